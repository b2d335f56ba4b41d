// Command etcdhook is one static binary with three roles (docs/design/01-components.md §1): the Metacontroller hook server
// (serve), the in-pod agent that wraps etcd (agent), and the one-shot Jobs the hook emits (member remove,
// pvc delete). `install` copies the binary into the shared volume of a member pod.
package main

import (
	"fmt"
	"os"
)

const usage = `usage: etcdhook <command> [flags]

commands:
  serve            run the Metacontroller hook server (sync, customize, finalize, health, metrics)
  agent -- etcd …  supervise etcd in a member pod (the etcd container's entrypoint)
  member remove    remove an etcd member (the Job the hook emits)
  pvc delete       delete the volume of a removed member (the Job the hook emits)
  pvc grow         grow a member's claim to spec.storage.size (the Job the hook emits)
  statefulset orphan
                   delete the StatefulSet, keeping its pods and claims, for a new claim template
  backup           snapshot the cluster into its destination and apply retention (the backup Jobs)
  backup-follow    follow the revisions after the newest snapshot and upload them beside it (continuous backup)
  standby-follow   apply the primary's backups to a standby as they appear (a standby's applier)
  backup-list      print what a cluster's backups can be restored to (snapshots and their chains, JSON)
  restore          restore a snapshot into a new data directory (what a restored cluster's seed does)
  certs            create or renew the hook's serving certificate (the hook pod's init container)
  install DEST     copy this binary to DEST (the member pod's init container)
  etcdctl-as-root -- ETCDCTL [ARGS…]
                   run etcdctl logged in as root with the password the agent keeps (kubectl etcd etcdctl)
  version          print the version
`

// commands are the subcommands, but for version and help; each gets the arguments after its name.
var commands = map[string]func(args []string) error{
	"serve":           runServe,
	"agent":           runAgent,
	"member":          runMember,
	"pvc":             runPVC,
	"statefulset":     runStatefulSet,
	"backup":          runBackup,
	"backup-follow":   runBackupFollow,
	"backup-list":     runBackupList,
	"standby-follow":  runStandbyFollow,
	"restore":         runRestore,
	"certs":           runCerts,
	"install":         runInstall,
	"etcdctl-as-root": runEtcdctlAsRoot,
}

// version is set by the build (-ldflags "-X main.version=…").
var version = "dev"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch run, ok := commands[os.Args[1]]; {
	case ok:
		err = run(os.Args[2:])
	case os.Args[1] == "version" || os.Args[1] == "--version":
		fmt.Println(version)
	case os.Args[1] == "help" || os.Args[1] == "-h" || os.Args[1] == "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdhook %s: %v\n", os.Args[1], err)
		os.Exit(exitCode(err))
	}
}
