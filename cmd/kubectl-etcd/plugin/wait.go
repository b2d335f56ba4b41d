package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// waitSettled polls the EtcdCluster every interval until it is settled (Running, Available, the latest
// spec seen), printing a line whenever what the hook reports changes. It ends at the first of: settled
// (nil), ctx done (Ctrl-C: the context's error), timeout. A poll, not a watch: it works with get-only
// RBAC and through proxies that cut long requests, and one GET a second costs the API server nothing.
// stop, when not nil, ends the wait early with its error (a failure that waiting will not end); done,
// when not nil, must also hold for the wait to end (a cluster that is settled before the hook has even
// seen the request it waits for).
func waitSettled(ctx context.Context, c *Clients, name string, out io.Writer, timeout, interval time.Duration, now func() time.Time, stop func(*Snapshot) error, done func(*Snapshot) bool) (*Snapshot, error) {
	start := now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	var snap *Snapshot
	for first := true; ; first = false {
		u, err := getCluster(ctx, c, name)
		var line string
		switch {
		case err == nil:
			if snap, err = snapshotOf(u); err != nil {
				return nil, err
			}
			line = progressLine(snap)
		case first && (apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)):
			// A typo or missing permission will not fix itself: say so now, not after the timeout.
			return nil, err
		case ctx.Err() != nil:
		default:
			// The API server may be restarting or the network briefly gone; keep trying until the timeout.
			line = "(cannot read the EtcdCluster: " + err.Error() + ")"
		}
		if line != "" && line != last {
			fmt.Fprintf(out, "%6s  %s\n", age(now().Sub(start).Round(time.Second)), line)
			last = line
		}
		if snap != nil && err == nil && snap.settled() && (done == nil || done(snap)) {
			return snap, nil
		}
		if snap != nil && err == nil && stop != nil {
			if err := stop(snap); err != nil {
				return snap, err
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				what := "no status read"
				if snap != nil {
					what = progressLine(snap)
				}
				return snap, fmt.Errorf("timed out after %s waiting for %s/%s to be Running and Available; last: %s", timeout, c.Namespace, name, what)
			}
			return snap, fmt.Errorf("interrupted while waiting for %s/%s: %w", c.Namespace, name, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// progressLine is one line of --wait: phase, how many voters are healthy of the target, and the
// hook's message (what it waits for), else the step in flight.
func progressLine(s *Snapshot) string {
	st := &s.status
	healthy, _ := s.voters()
	line := st.Phase
	if line == "" {
		line = "(no status yet)"
	}
	if st.Target != nil {
		line += fmt.Sprintf(" [%d/%d voters healthy]", healthy, st.Target.Size)
	}
	msg := st.Message
	if msg == "" {
		if f := s.inFlight(); f != "none" {
			msg = f
		}
	}
	if msg != "" {
		line += " " + msg
	}
	if c := condition(st, api.CondRestoreFailed); c != nil && c.Status == metav1.ConditionTrue && c.Reason == api.ReasonRestoreRetrying {
		line += " (restore retrying: " + c.Message + ")"
	}
	if s.ObservedGeneration < s.Generation {
		line += " (the hook has not seen the latest spec yet)"
	}
	return line
}
