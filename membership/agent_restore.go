package membership

import (
	"context"
	"fmt"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// The seed of a restored cluster restores its snapshot before etcd first starts.

// restoreGiveUp bounds the retries of a seed restore that keeps failing for a cause that may pass (a
// store that does not answer): past it the seed stops as it does for a terminal cause, and says so.
const restoreGiveUp = time.Hour

// restoreBackoff is the wait after the n-th failure in a row: 5 s doubling, at most 5 minutes.
func restoreBackoff(n int) time.Duration {
	wait := 5 * time.Second
	for i := 1; i < n && wait < 5*time.Minute; i++ {
		wait *= 2
	}
	return min(wait, 5*time.Minute)
}

// seedRestore is the seed's restore attempts in this pod: a failure that may pass is retried with
// backoff until restoreGiveUp; a terminal one (Refused) is never tried again by this pod. A new pod
// (kubectl delete pod) tries once more: that is how a user retries after fixing the store or Secret.
type seedRestore struct {
	failures int
	first    time.Time // the first failure in a row
	posted   string    // the last failure posted as an Event
	// refused: the terminal failure, as reported ("" while attempts go on).
	refused string
}

// failed records err and says what to report: the reason (terminal ReasonRestoreRefused, or
// ReasonRestoreFailed while it retries), the message naming the spec.restore field or the retry, and
// how long to wait before the next attempt.
func (s *seedRestore) failed(err error, now time.Time, point func(error) string) (reason, msg string, wait time.Duration) {
	if s.failures == 0 {
		s.first = now
	}
	s.failures++
	switch {
	case Refused(err):
		s.refused = fmt.Sprintf("spec.restore.%s: %v", point(err), err)
	case now.Sub(s.first) >= restoreGiveUp:
		s.refused = fmt.Sprintf("gave up after %d attempts in %s (the last: %v)", s.failures, now.Sub(s.first).Round(time.Second), err)
	default:
		wait = restoreBackoff(s.failures)
		return api.ReasonRestoreFailed, fmt.Sprintf("attempt %d failed, retrying at %s, until %s: %v", s.failures,
			now.Add(wait).UTC().Format(time.RFC3339), s.first.Add(restoreGiveUp).UTC().Format(time.RFC3339), err), wait
	}
	return api.ReasonRestoreRefused, s.refused, 0
}

// restoreSeed restores the seed's data directory from the configured snapshot and binds it to this
// member. Each outcome is reported on the Lease: RestoreFailed while a retry may help (the store not
// answering), RestoreRefused once it cannot (nothing under the folder, a point the backups do not reach,
// a damaged or foreign chain, refused credentials): the hook then ends the restore as Failed, and this
// pod only repeats its report.
func (a *Agent) restoreSeed(ctx context.Context) {
	a.proc.setState("restoring", false)
	if a.seed.refused != "" {
		r := a.rep.kept()
		r.SetError(api.ReasonRestoreRefused, a.seed.refused)
		a.rep.report(ctx, r, false)
		sleep(ctx, time.Minute)
		return
	}
	req := *a.Cfg.Restore
	// Bound before the data is in place, like every start of ours (the binding is what makes the data
	// ours): a crash between the two leaves a binding without data, which restores again, never data
	// without a binding, which would be refused as foreign for good.
	req.Bind = func(res RestoreResult) error {
		return WriteBinding(a.Cfg.DataDir, Binding{ClusterUID: a.Cfg.ClusterUID, PeerURL: a.Cfg.PeerURL,
			Restored: &Restored{URL: res.URL, Revision: res.Revision}})
	}
	// One attempt is bounded: a stalled download must end in RestoreFailed and a retry, not hang.
	actx, cancel := context.WithTimeout(ctx, restoreAttemptTimeout)
	res, err := Restore(actx, a.Log, req)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		reason, msg, wait := a.seed.failed(err, time.Now(), func(err error) string { return RefusedField(err, req.Point) })
		a.Log.Warn("restore failed", "error", err, "failures", a.seed.failures, "terminal", reason == api.ReasonRestoreRefused, "backoff", wait.String())
		if err.Error() != a.seed.posted || reason == api.ReasonRestoreRefused {
			a.seed.posted = err.Error()
			if reason == api.ReasonRestoreRefused {
				a.env.event(EventRestoreFailed, "Restore", true, "the seed's restore cannot succeed as written and is not tried again (delete this pod to try once more after fixing the cause): %s", msg)
			} else {
				a.env.event(EventRestoreFailed, "Restore", true, "restoring the seed failed (retrying in %s): %v", wait, err)
			}
		}
		r := a.rep.kept()
		r.SetError(reason, msg)
		a.rep.report(ctx, r, false)
		sleep(ctx, wait)
		return
	}
	a.bound.restored = &Restored{URL: res.URL, Revision: res.Revision}
	a.seed = seedRestore{}
	a.env.event(EventSnapshotRestored, "Restore", false, "restored snapshot %s (revision %d, %d bytes) as the seed of this cluster; revisions continue from %d", res.URL, res.Revision, res.Manifest.Size, res.Revision+req.Bump())
}
