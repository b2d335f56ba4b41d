// Command kubectl-etcd is the `kubectl etcd` plugin for etcdhook's EtcdClusters:
//
//	kubectl etcd status NAME [-o json] [--wait [--timeout 10m]]
//	kubectl etcd etcdctl NAME [--member POD] [-i] -- get /foo
//
// Install with `go install github.com/etcdhook/etcdhook/cmd/kubectl-etcd@latest` (kubectl finds
// kubectl-etcd on PATH), or with krew from the archives and manifest `make plugin-dist` builds into dist/
// (./dist, README.md).
//
// # status
//
// Reads the EtcdCluster (its status, written by the hook) and the member Leases (the agents' own
// reports, docs/design/03-member-lease.md §3.3) and prints them on one screen; nothing is computed that the hook or the
// agents did not report. A DB size column appears only when the status carries per-member dbSize (a
// later hook adds it); backups are asked for and followed with kubectl etcd backup.
//
// # etcdctl: why exec into a member pod
//
// `kubectl etcd etcdctl` runs /usr/local/bin/etcdctl inside a ready member pod (container etcd; a
// healthy voter's by default) with --endpoints set to the client URLs the voters advertise and, with
// TLS, --cacert/--cert/--key set to the files that pod's etcd serves its client plane with (read from
// the pod spec's --trusted-ca-file, --cert-file, --key-file; member certificates carry the client-auth
// usage too). Chosen over a port-forward with a local client because:
//
//   - no key leaves the cluster: the user needs pods/exec on the member pods, not read access to the
//     client certificate Secret, and nothing is written to the user's disk;
//   - the etcdctl is the one of the member image, so its version matches the cluster's (the official
//     quay.io/coreos/etcd images and the local test images built by `localkube image etcd`, used by
//     e2e/local.sh and e2e/kind, both ship /usr/local/bin/etcdctl);
//   - every etcdctl command works, not a fixed subset an embedded client would re-implement, and the
//     endpoints are the names the member certificates cover (a port-forward to localhost would verify
//     only because the built-in certificates happen to cover localhost);
//   - it needs nothing installed on the user's machine but this plugin.
//
// The price: the command runs in the pod, so files it writes land there. `snapshot save` is refused for
// that reason (the image has no shell or tar to copy a file out); backup, restore and defrag commands
// come with the backup and maintenance work, as thin wrappers over what the hook honours.
//
// Connection flags are kubectl's (--kubeconfig, --context, -n, ...), bound with client-go's clientcmd
// rather than k8s.io/cli-runtime: the same names and kubeconfig resolution without cobra and kustomize.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/etcdhook/etcdhook/cmd/kubectl-etcd/plugin"
)

func main() {
	// Ctrl-C cancels the context: --wait stops polling and an etcdctl stream is closed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := plugin.Main(ctx, plugin.Env{IO: plugin.Stdio()}, os.Args[1:])
	stop()
	os.Exit(code)
}
