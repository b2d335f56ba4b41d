// Package plugin is the `kubectl etcd` plugin (cmd/kubectl-etcd): its commands, so that the e2e suite
// can run them in-process against a real cluster. See cmd/kubectl-etcd for the design.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	utilexec "k8s.io/client-go/util/exec"
)

// Usage is the plugin's help.
const Usage = `kubectl etcd: look at and talk to etcdhook EtcdClusters

Usage:
  kubectl etcd status NAME [-o json] [--wait [--timeout 10m]]
  kubectl etcd etcdctl NAME [--member POD|ORDINAL] [-i] -- ETCDCTL ARGS...
  kubectl etcd backup NAME [--id TOKEN] [--wait=false] [--timeout 30m]
  kubectl etcd backups NAME [-o json]
  kubectl etcd defrag NAME [--id TOKEN] [--wait=false] [--timeout 30m]
  kubectl etcd renew NAME [--id VALUE] [--wait=false] [--timeout 10m]
  kubectl etcd rotate-ca NAME [--id VALUE] [--wait=false] [--timeout 10m]
  kubectl etcd rotate-user NAME USER [--id VALUE] [--wait=false] [--timeout 5m]
  kubectl etcd restore NAME (--from URL | --like CLUSTER) [--size N] [--version V]
                       [--to-revision R | --to-time T]
                       [--credentials-secret S] [--claim PVC] [--wait=false] [--timeout 30m]
  kubectl etcd restore NAME --in-place [--from URL] [--wait=false] [--timeout 30m]
  kubectl etcd recover NAME [--plan | --apply [--id TOKEN] [--wait=false] [--timeout 30m]]
  kubectl etcd promote NAME [--id TOKEN] [--wait=false] [--timeout 10m]
  kubectl etcd version

status   phase, message, conditions, members (from the status and the agents' member Leases), the
         step in flight and certificate expiry; -o json prints the status and the Lease reports.
         --wait prints a line whenever the phase or message changes until the cluster is Running and
         Available (exit 0) or --timeout passes (exit 1).
etcdctl  runs the member image's own etcdctl inside a ready member pod (container etcd), with the
         cluster's endpoints and, with TLS, the certificate files that pod's etcd uses.
backup   asks for one backup now (annotation etcd.io/backup-now=TOKEN, --id, default the current time) to
         the cluster's spec.backup destination and waits for its outcome: the snapshot's URL (usable
         as spec.restore.from of a new cluster), or the failure.
backups  lists what the cluster's backups can be restored to: each full snapshot, newest first, and
         with continuous backup the revisions and times its chain reaches (read by the writer pod).
defrag   asks for one defragmentation pass of every member now (annotation etcd.io/defrag-now=TOKEN):
         one member at a time, the leader last; under NOSPACE the hook's own recovery comes first.
         Waits until the pass is over, printing its progress.
renew    asks for every built-in certificate (members' and the client Secret's) to be renewed now
         (annotation etcd.io/renew-certificates=VALUE, default the current time), without a restart;
         member keys are kept. Waits until every member serves a renewed certificate.
rotate-ca replaces the built-in CA (annotation etcd.io/rotate-ca=VALUE): the new CA is trusted beside
         the old one, everything is reissued from it, the old one is dropped; each member's etcd
         restarts twice in place, one at a time, with the others healthy. Clients must read
         the client Secret again (it carries both CAs during the rotation, the new one alone after).
rotate-user gives one user of spec.auth a new key and certificate in its Secret (annotation
         etcd.io/rotate-user=USER=VALUE); the old certificate stays valid until it expires (etcd
         checks no revocation list). Waits until the user's Secret holds the new one.
restore  creates the new cluster NAME from a snapshot (spec.restore, read only at creation: NAME
         must not exist). --like copies another cluster's spec and, without --from, restores its last
         snapshot with its backup credentials. --to-revision or --to-time restores the keyspace at
         that point (the newest snapshot before it and the continuous backup's chain after it).
         Waits until the cluster is Running, printing progress.
         --in-place replaces the data of the existing cluster NAME instead (etcd.io/restore-from and,
         to a point, etcd.io/restore-to; without --from, its last snapshot, or to a point its
         destination's latest): every member stops, writes after the snapshot or point are lost;
         waits until the restored cluster has every member healthy, or the restore fails.
         --dry-run (with --in-place or --like) prints what the restore would hold (snapshot,
         revision, time, keys) from a Job that restores into scratch space: nothing is touched.

recover  shows the plan for a quorum that lost its data for good (status.recovery): the survivor (the
         freshest member, by revision then raft term), what each member holds, what would be lost.
         --apply carries it out (annotation etcd.io/recover-apply=TOKEN; --id refuses a plan that
         changed since): the others' data is set aside, the survivor restarts alone on its data,
         the others rejoin as learners. Waits until every member is back.
promote  promotes a standby (spec.standby) to a normal cluster on the data it holds (annotation
         etcd.io/promote=TOKEN): its applier stops, status.standby.promoted records the revision it
         ends at and the primary's newest it had seen, and its write fence is lifted. Nothing moves,
         the primary is not contacted. A second promote changes nothing. Waits until Available.

Connection flags as kubectl's: --kubeconfig, --context, -n/--namespace, --cluster, --user, --server,
--token, --as, ... (run 'kubectl etcd status --help' for all).
`

// Version is set by the build (-ldflags "-X github.com/etcdhook/etcdhook/cmd/kubectl-etcd/plugin.Version=…").
var Version = "dev"

// IO is where a command reads and writes.
type IO struct {
	In       io.Reader
	Out, Err io.Writer
}

// Env is what a command runs with. Connect and Now are replaced by tests.
type Env struct {
	IO
	// Connect returns the clients for the connection flags (nil: from the kubeconfig, as kubectl).
	Connect func(*KubeFlags) (*Clients, error)
	Now     func() time.Time
	// PollInterval is --wait's polling period.
	PollInterval time.Duration
}

// ExitError carries a process exit code (etcdctl's own, or 130 after Ctrl-C).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Main runs the plugin with os-level arguments (without the program name) and returns the exit code.
func Main(ctx context.Context, env Env, args []string) int {
	err := Run(ctx, env, args)
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil && ee.Code != 0 && !errors.Is(ee.Err, errSilent) {
			fmt.Fprintln(env.Err, "kubectl etcd:", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintln(env.Err, "kubectl etcd:", err)
	return 1
}

var errSilent = errors.New("exit status reported by the remote command")

// commands are the plugin's commands, but for version and help.
var commands = map[string]func(ctx context.Context, env Env, args []string) error{
	"status":      runStatus,
	"etcdctl":     runEtcdctlCmd,
	"backup":      runBackup,
	"backups":     runBackups,
	"defrag":      runDefrag,
	"restore":     runRestore,
	"renew":       runRenew,
	"rotate-ca":   runRotateCA,
	"rotate-user": runRotateUser,
	"promote":     runPromote,
	"recover":     runRecover,
}

// Run runs one command; errors are for the user.
func Run(ctx context.Context, env Env, args []string) error {
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.PollInterval == 0 {
		env.PollInterval = time.Second
	}
	if env.Connect == nil {
		env.Connect = (*KubeFlags).connect
	}
	if len(args) == 0 {
		fmt.Fprint(env.Err, Usage)
		return &ExitError{Code: 2, Err: errors.New("a command is required")}
	}
	if run, ok := commands[args[0]]; ok {
		return run(ctx, env, args[1:])
	}
	switch args[0] {
	case "version", "--version":
		fmt.Fprintln(env.Out, Version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(env.Out, Usage)
		return nil
	default:
		fmt.Fprint(env.Err, Usage)
		return &ExitError{Code: 2, Err: fmt.Errorf("unknown command %q", args[0])}
	}
}

func newFlags(cmd string, env Env, kf *KubeFlags) *pflag.FlagSet {
	fs := pflag.NewFlagSet("kubectl etcd "+cmd, pflag.ContinueOnError)
	fs.SetOutput(env.Err)
	kf.bind(fs)
	return fs
}

// oneName returns the single positional argument, the EtcdCluster's name.
func oneName(cmd string, pos []string) (string, error) {
	switch len(pos) {
	case 1:
		return pos[0], nil
	case 0:
		return "", &ExitError{Code: 2, Err: fmt.Errorf("%s: the EtcdCluster's NAME is required", cmd)}
	default:
		return "", &ExitError{Code: 2, Err: fmt.Errorf("%s: one NAME expected, got %q", cmd, strings.Join(pos, " "))}
	}
}

func parseErr(err error) error {
	if errors.Is(err, pflag.ErrHelp) {
		return &ExitError{Code: 0}
	}
	return &ExitError{Code: 2, Err: err}
}

type statusOpts struct {
	name    string
	output  string
	wait    bool
	timeout time.Duration
	kube    KubeFlags
}

func parseStatus(env Env, args []string) (*statusOpts, error) {
	o := &statusOpts{}
	fs := newFlags("status", env, &o.kube)
	fs.StringVarP(&o.output, "output", "o", "", "output format: json (default: the one-screen text)")
	fs.BoolVarP(&o.wait, "wait", "w", false, "print progress until the cluster is Running and Available, or --timeout")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long --wait waits")
	if err := fs.Parse(args); err != nil {
		return nil, parseErr(err)
	}
	var err error
	if o.name, err = oneName("status", fs.Args()); err != nil {
		return nil, err
	}
	if o.output != "" && o.output != "json" {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("status: -o %q: only json is supported", o.output)}
	}
	if o.timeout <= 0 {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("status: --timeout must be positive")}
	}
	return o, nil
}

func runStatus(ctx context.Context, env Env, args []string) error {
	o, err := parseStatus(env, args)
	if err != nil {
		return err
	}
	c, err := env.Connect(&o.kube)
	if err != nil {
		return err
	}
	if o.wait {
		// Progress goes to stderr with -o json, so that stdout stays one JSON document.
		progress := env.Out
		if o.output == "json" {
			progress = env.Err
		}
		if _, err := waitSettled(ctx, c, o.name, progress, o.timeout, env.PollInterval, env.Now, nil, nil); err != nil {
			if ctx.Err() != nil {
				return &ExitError{Code: 130, Err: err}
			}
			return err
		}
		if o.output != "json" {
			fmt.Fprintln(env.Out)
		}
	}
	snap, err := load(ctx, c, o.name)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeJSON(env.Out, snap)
	}
	return writeText(env.Out, snap, env.Now())
}

type etcdctlOpts struct {
	name   string
	member string
	stdin  bool
	args   []string
	kube   KubeFlags
}

// parseEtcdctl splits at the first "--": the plugin's flags and NAME before, etcdctl's arguments after.
// Without "--", extra words are refused rather than guessed at: "-n" means a namespace to kubectl and
// nothing to etcdctl, so a misplaced flag must not silently change meaning.
func parseEtcdctl(env Env, args []string) (*etcdctlOpts, error) {
	o := &etcdctlOpts{}
	fs := newFlags("etcdctl", env, &o.kube)
	fs.StringVar(&o.member, "member", "", "run etcdctl in this member pod (name or ordinal; default: a ready pod of a healthy voter)")
	fs.BoolVarP(&o.stdin, "stdin", "i", false, "pass stdin to etcdctl (e.g. put KEY without a value, txn -i)")
	own, rest := args, []string(nil)
	for i, a := range args {
		if a == "--" {
			own, rest = args[:i], args[i+1:]
			break
		}
	}
	if err := fs.Parse(own); err != nil {
		return nil, parseErr(err)
	}
	pos := fs.Args()
	if len(pos) > 1 && rest == nil {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("etcdctl: put etcdctl's arguments after --: kubectl etcd etcdctl %s -- %s", pos[0], strings.Join(pos[1:], " "))}
	}
	var err error
	if o.name, err = oneName("etcdctl", pos); err != nil {
		return nil, err
	}
	if len(rest) == 0 {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("etcdctl: no etcdctl command: kubectl etcd etcdctl %s -- member list -w table", o.name)}
	}
	o.args = rest
	return o, nil
}

func runEtcdctlCmd(ctx context.Context, env Env, args []string) error {
	o, err := parseEtcdctl(env, args)
	if err != nil {
		return err
	}
	if err := refused(o.args); err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	c, err := env.Connect(&o.kube)
	if err != nil {
		return err
	}
	p, err := planEtcdctl(ctx, c, o.name, o.member, o.args)
	if err != nil {
		return err
	}
	var in io.Reader
	if o.stdin {
		in = env.In
	}
	err = runEtcdctl(ctx, c, p, in, env.Out, env.Err)
	var code utilexec.ExitError
	if errors.As(err, &code) && code.Exited() {
		// etcdctl ran and failed: it has said why on stderr; pass its exit status on, as kubectl exec does.
		return &ExitError{Code: code.ExitStatus(), Err: errSilent}
	}
	if err != nil && ctx.Err() != nil {
		return &ExitError{Code: 130, Err: err}
	}
	return err
}

// Stdio is the process's standard streams.
func Stdio() IO { return IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr} }
