package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// request is a command that sets a request annotation to a value never used before and follows the
// status until the request is served (renew, rotate-ca): its annotation, what it prints, and how it
// reads progress.
type request struct {
	cmd, annotation string
	waitHelp        string
	// asked is printed once the annotation is set (a format of the value, the namespace and the name);
	// progress reads the status: a line when the request is there, and whether it is served; done is
	// printed then (a format of the namespace and the name); timedOut adds a hint to the timeout error.
	asked    string
	progress func(snap *Snapshot, token string) (line string, done bool)
	done     string
	timedOut string
}

func runRequest(ctx context.Context, env Env, args []string, r request) error {
	o, c, u, err := startRequest(ctx, r.cmd, env, args, requestFlags{
		idHelp:   "the annotation's value (default: the current time, in nanoseconds); use a value never used before",
		waitHelp: r.waitHelp,
		timeout:  10 * time.Minute,
		nanos:    true,
	})
	if err != nil {
		return err
	}
	if u.GetAnnotations()[r.annotation] == o.token {
		return fmt.Errorf("%s: %s/%s already carries %s=%s: use a value never used before", r.cmd, c.Namespace, o.name, r.annotation, o.token)
	}
	if err := o.ask(ctx, env, c, r.annotation, r.asked); err != nil || !o.wait {
		return err
	}
	last := ""
	return o.follow(ctx, env, c, func(snap *Snapshot) (bool, error) {
		line, done := r.progress(snap, o.token)
		if line == "" {
			return false, nil
		}
		if line != last {
			last = line
			fmt.Fprintln(env.Out, "  "+line)
		}
		if done {
			fmt.Fprintf(env.Out, r.done+"\n", c.Namespace, o.name)
		}
		return done, nil
	}, func() error {
		return fmt.Errorf("timed out after %s waiting for %s %q of %s/%s (last: %s; %s)", o.timeout, r.cmd, o.token, c.Namespace, o.name, dash(last), r.timedOut)
	})
}

// runRenew asks for every built-in certificate to be renewed now: the etcd.io/renew-certificates
// annotation with a value never used before (the current time by default; the renewed certificates
// carry its mark, so a value used again finds them renewed already, docs/design/14-tls.md §14.7). With --wait
// it follows status.tls.renewal until every member serves a certificate renewed for it.
func runRenew(ctx context.Context, env Env, args []string) error {
	return runRequest(ctx, env, args, request{
		cmd: "renew", annotation: api.AnnRenewCertificates,
		waitHelp: "wait until every member serves a renewed certificate",
		asked:    "renewal %q of the certificates of %s/%s requested (member keys are kept)",
		progress: func(snap *Snapshot, token string) (string, bool) {
			t := snap.status.TLS
			if t == nil || t.Renewal == nil || t.Renewal.Request != token {
				return "", false
			}
			return fmt.Sprintf("%d of %d members serve a renewed certificate", t.Renewal.Renewed, t.Renewal.Members),
				t.Renewal.Members > 0 && t.Renewal.Renewed == t.Renewal.Members
		},
		done:     "done: every member of %s/%s serves a renewed certificate",
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
		asked:    "CA rotation %q of %s/%s requested (each member's etcd restarts twice, one at a time; clients must read the client Secret again)",
		progress: func(snap *Snapshot, token string) (string, bool) {
			t := snap.status.TLS
			if t == nil || t.CARotation == nil || t.CARotation.Request != token {
				return "", false
			}
			return caRotationLine(t.CARotation), t.CARotation.Phase == api.CARotationDone
		},
		done:     "done: every member of %s/%s trusts and serves the new CA alone",
		timedOut: "the built-in CA is rotated only when both planes use it (see the InputIgnored condition)",
	})
}
