package plugin

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

type defragOpts struct {
	name    string
	token   string
	wait    bool
	timeout time.Duration
	kube    KubeFlags
}

// runDefrag asks for one defragmentation pass now: the etcd.io/defrag-now annotation with a new token
// (the hook runs one pass per token, docs/design/15-maintenance.md §15.5). With --wait it follows the Defragmenting
// condition: done once the condition no longer names the pass and every member reports a
// defragmentation since the request (or the pass was seen and ended).
func runDefrag(ctx context.Context, env Env, args []string) error {
	o := &defragOpts{}
	fs := newFlags("defrag", env, &o.kube)
	fs.StringVar(&o.token, "id", "", "the pass's token, the annotation's value (default: the current time); a token runs once")
	fs.BoolVarP(&o.wait, "wait", "w", true, "wait until the pass is over")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "how long --wait waits")
	if err := fs.Parse(args); err != nil {
		return parseErr(err)
	}
	var err error
	if o.name, err = oneName("defrag", fs.Args()); err != nil {
		return err
	}
	asked := env.Now()
	if o.token == "" {
		o.token = strconv.FormatInt(asked.Unix(), 10)
	}
	c, err := env.Connect(&o.kube)
	if err != nil {
		return err
	}
	if _, err := getCluster(ctx, c, o.name); err != nil {
		return err
	}
	if err := annotate(ctx, c, o.name, api.AnnDefragNow, &o.token); err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "defragmentation %q of %s/%s requested\n", o.token, c.Namespace, o.name)
	if !o.wait {
		return nil
	}
	pass := "pass now:" + o.token + ":"
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	seen, last := false, ""
	for {
		if u, err := getCluster(wctx, c, o.name); err == nil {
			snap, err := snapshotOf(u)
			if err != nil {
				return err
			}
			running := false
			for _, cond := range snap.status.Conditions {
				if cond.Type == api.CondDefragmenting && strings.HasPrefix(cond.Message, pass) {
					running, seen = true, true
					if cond.Message != last {
						last = cond.Message
						fmt.Fprintln(env.Out, "  "+cond.Message)
					}
				}
			}
			all := len(snap.status.Members) > 0
			for _, m := range snap.status.Members {
				// A minute of slack for the agents' clocks against this one.
				if m.LastDefragTime == nil || m.LastDefragTime.Time.Before(asked.Add(-time.Minute)) {
					all = false
				}
			}
			if !running && (seen || all) {
				fmt.Fprintf(env.Out, "done: every member of %s/%s defragmented\n", c.Namespace, o.name)
				return nil
			}
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return &ExitError{Code: 130, Err: ctx.Err()}
			}
			return fmt.Errorf("timed out after %s waiting for defragmentation %q of %s/%s (last: %s)", o.timeout, o.token, c.Namespace, o.name, last)
		case <-time.After(env.PollInterval):
		}
	}
}
