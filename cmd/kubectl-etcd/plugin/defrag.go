package plugin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// runDefrag asks for one defragmentation pass now: the etcd.io/defrag-now annotation with a new token
// (the hook runs one pass per token, docs/design/15-maintenance.md §15.5). With --wait it follows the Defragmenting
// condition: done once the condition no longer names the pass and every member reports a
// defragmentation since the request (or the pass was seen and ended).
func runDefrag(ctx context.Context, env Env, args []string) error {
	o, c, _, err := startRequest(ctx, "defrag", env, args, requestFlags{
		idHelp:   "the pass's token, the annotation's value (default: the current time); a token runs once",
		waitHelp: "wait until the pass is over",
		timeout:  30 * time.Minute,
	})
	if err != nil {
		return err
	}
	if err := o.ask(ctx, env, c, api.AnnDefragNow, "defragmentation %q of %s/%s requested"); err != nil || !o.wait {
		return err
	}
	pass := "pass now:" + o.token + ":"
	seen, last := false, ""
	return o.follow(ctx, env, c, func(snap *Snapshot) (bool, error) {
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
			if m.LastDefragTime == nil || m.LastDefragTime.Time.Before(o.asked.Add(-time.Minute)) {
				all = false
			}
		}
		if !running && (seen || all) {
			fmt.Fprintf(env.Out, "done: every member of %s/%s defragmented\n", c.Namespace, o.name)
			return true, nil
		}
		return false, nil
	}, func() error {
		return fmt.Errorf("timed out after %s waiting for defragmentation %q of %s/%s (last: %s)", o.timeout, o.token, c.Namespace, o.name, last)
	})
}
