package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/etcdhook/etcdhook/api"
)

// runEtcdctlAsRoot runs etcdctl (args: its path, then its arguments) logged in as root with the root
// Secret's password the agent keeps in the pod (kubectl etcd etcdctl, when etcd takes no user from
// client certificates: docs/design/20-auth.md §20.2). The password goes through the environment, never
// the command line: an exec's arguments are logged by the API server and shown by ps.
func runEtcdctlAsRoot(args []string) error {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return errors.New("usage: etcdhook etcdctl-as-root -- ETCDCTL [ARGS…]")
	}
	pw, err := os.ReadFile(filepath.Join(api.TLSRootDir, api.SecretKeyPassword))
	if err != nil {
		return err
	}
	env := append(os.Environ(), "ETCDCTL_USER="+api.RootUser, "ETCDCTL_PASSWORD="+strings.TrimSpace(string(pw)))
	return syscall.Exec(args[0], args, env)
}
