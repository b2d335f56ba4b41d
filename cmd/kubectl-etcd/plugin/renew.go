package plugin

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// requestOpts are the options of a command that sets a request annotation to a value never used before
// and follows the status until the request is served (renew, rotate-ca).
type requestOpts struct {
	name    string
	token   string
	wait    bool
	timeout time.Duration
	kube    KubeFlags
}

// request is one such command: its annotation, what it prints, and how it reads progress.
type request struct {
	cmd, annotation string
	waitHelp        string
	// asked is printed once the annotation is set; progress reads the status: a line when the request
	// is there, and whether it is served; timedOut adds a hint to the timeout error.
	asked    func(ns, name, token string) string
	progress func(snap *Snapshot, token string) (line string, done bool)
	done     func(ns, name string) string
	timedOut string
}

func runRequest(ctx context.Context, env Env, args []string, r request) error {
	o := &requestOpts{}
	fs := newFlags(r.cmd, env, &o.kube)
	fs.StringVar(&o.token, "id", "", "the annotation's value (default: the current time, in nanoseconds); use a value never used before")
	fs.BoolVarP(&o.wait, "wait", "w", true, r.waitHelp)
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long --wait waits")
	if err := fs.Parse(args); err != nil {
		return parseErr(err)
	}
	var err error
	if o.name, err = oneName(r.cmd, fs.Args()); err != nil {
		return err
	}
	if o.token == "" {
		o.token = strconv.FormatInt(env.Now().UnixNano(), 10)
	}
	c, err := env.Connect(&o.kube)
	if err != nil {
		return err
	}
	u, err := getCluster(ctx, c, o.name)
	if err != nil {
		return err
	}
	if u.GetAnnotations()[r.annotation] == o.token {
		return fmt.Errorf("%s: %s/%s already carries %s=%s: use a value never used before", r.cmd, c.Namespace, o.name, r.annotation, o.token)
	}
	if err := annotate(ctx, c, o.name, r.annotation, &o.token); err != nil {
		return err
	}
	fmt.Fprintln(env.Out, r.asked(c.Namespace, o.name, o.token))
	if !o.wait {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	last := ""
	for {
		if u, err := getCluster(wctx, c, o.name); err == nil {
			snap, err := snapshotOf(u)
			if err != nil {
				return err
			}
			if line, done := r.progress(snap, o.token); line != "" {
				if line != last {
					last = line
					fmt.Fprintln(env.Out, "  "+line)
				}
				if done {
					fmt.Fprintln(env.Out, r.done(c.Namespace, o.name))
					return nil
				}
			}
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return &ExitError{Code: 130, Err: ctx.Err()}
			}
			return fmt.Errorf("timed out after %s waiting for %s %q of %s/%s (last: %s; %s)", o.timeout, r.cmd, o.token, c.Namespace, o.name, dash(last), r.timedOut)
		case <-time.After(env.PollInterval):
		}
	}
}

// runRenew asks for every built-in certificate to be renewed now: the etcd.io/renew-certificates
// annotation with a value never used before (the current time by default; the renewed certificates
// carry its mark, so a value used again finds them renewed already, docs/design/14-tls.md §14.7). With --wait
// it follows status.tls.renewal until every member serves a certificate renewed for it.
func runRenew(ctx context.Context, env Env, args []string) error {
	return runRequest(ctx, env, args, request{
		cmd: "renew", annotation: api.AnnRenewCertificates,
		waitHelp: "wait until every member serves a renewed certificate",
		asked: func(ns, name, token string) string {
			return fmt.Sprintf("renewal %q of the certificates of %s/%s requested (member keys are kept)", token, ns, name)
		},
		progress: func(snap *Snapshot, token string) (string, bool) {
			t := snap.status.TLS
			if t == nil || t.Renewal == nil || t.Renewal.Request != token {
				return "", false
			}
			return fmt.Sprintf("%d of %d members serve a renewed certificate", t.Renewal.Renewed, t.Renewal.Members),
				t.Renewal.Members > 0 && t.Renewal.Renewed == t.Renewal.Members
		},
		done: func(ns, name string) string {
			return fmt.Sprintf("done: every member of %s/%s serves a renewed certificate", ns, name)
		},
		timedOut: "without a plane on the built-in CA nothing is renewed",
	})
}

// runRotateCA asks for the built-in CA to be replaced (etcd.io/rotate-ca, docs/design/14-tls.md §14.6): a new
// CA is trusted beside the old one (each member's etcd restarts in place, one at a time), everything is
// reissued from it, the old one is dropped (each member restarts again). With --wait it follows
// status.tls.caRotation until it is done.
func runRotateCA(ctx context.Context, env Env, args []string) error {
	return runRequest(ctx, env, args, request{
		cmd: "rotate-ca", annotation: api.AnnRotateCA,
		waitHelp: "wait until every member trusts and serves the new CA alone",
		asked: func(ns, name, token string) string {
			return fmt.Sprintf("CA rotation %q of %s/%s requested (each member's etcd restarts twice, one at a time; clients must read the client Secret again)", token, ns, name)
		},
		progress: func(snap *Snapshot, token string) (string, bool) {
			t := snap.status.TLS
			if t == nil || t.CARotation == nil || t.CARotation.Request != token {
				return "", false
			}
			r := t.CARotation
			line := fmt.Sprintf("%s: %d of %d members trust the new CA, %d serve its certificate", r.Phase, r.Trusting, r.Members, r.Issued)
			if r.Restarting != "" {
				line += "; restarting " + r.Restarting
			}
			return line, r.Phase == api.CARotationDone
		},
		done: func(ns, name string) string {
			return fmt.Sprintf("done: every member of %s/%s trusts and serves the new CA alone", ns, name)
		},
		timedOut: "the built-in CA is rotated only when both planes use it (see the InputIgnored condition)",
	})
}
