package plugin

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

type renewOpts struct {
	name    string
	token   string
	wait    bool
	timeout time.Duration
	kube    KubeFlags
}

// runRenew asks for every built-in certificate to be renewed now: the etcd.io/renew-certificates
// annotation with a value never used before (the current time by default; the renewed certificates
// carry its mark, so a value used again finds them renewed already, docs/design.md §14.7). With --wait
// it follows status.tls.renewal until every member serves a certificate renewed for it.
func runRenew(ctx context.Context, env Env, args []string) error {
	o := &renewOpts{}
	fs := newFlags("renew", env, &o.kube)
	fs.StringVar(&o.token, "id", "", "the annotation's value (default: the current time, in nanoseconds); use a value never used before")
	fs.BoolVarP(&o.wait, "wait", "w", true, "wait until every member serves a renewed certificate")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long --wait waits")
	if err := fs.Parse(args); err != nil {
		return parseErr(err)
	}
	var err error
	if o.name, err = oneName("renew", fs.Args()); err != nil {
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
	if u.GetAnnotations()[api.AnnRenewCertificates] == o.token {
		return fmt.Errorf("renew: %s/%s already carries %s=%s: use a value never used before", c.Namespace, o.name, api.AnnRenewCertificates, o.token)
	}
	if err := annotate(ctx, c, o.name, api.AnnRenewCertificates, &o.token); err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "renewal %q of the certificates of %s/%s requested (member keys are kept)\n", o.token, c.Namespace, o.name)
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
			if t := snap.status.TLS; t != nil && t.Renewal != nil && t.Renewal.Request == o.token {
				line := fmt.Sprintf("%d of %d members serve a renewed certificate", t.Renewal.Renewed, t.Renewal.Members)
				if line != last {
					last = line
					fmt.Fprintln(env.Out, "  "+line)
				}
				if t.Renewal.Members > 0 && t.Renewal.Renewed == t.Renewal.Members {
					fmt.Fprintf(env.Out, "done: every member of %s/%s serves a renewed certificate\n", c.Namespace, o.name)
					return nil
				}
			}
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return &ExitError{Code: 130, Err: ctx.Err()}
			}
			return fmt.Errorf("timed out after %s waiting for renewal %q of %s/%s (last: %s; without a plane on the built-in CA nothing is renewed)", o.timeout, o.token, c.Namespace, o.name, dash(last))
		case <-time.After(env.PollInterval):
		}
	}
}
