package membership

import (
	"context"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// The seed of a restored cluster restores its snapshot before etcd first starts.

// restoreSeed restores the seed's data directory from the configured snapshot and binds it to this
// member. A failure is reported on the Lease (RestoreFailed) and retried with backoff up to five
// minutes: a bucket or credentials can be fixed while the cluster waits; a damaged snapshot cannot,
// and the condition says which it is.
func (a *Agent) restoreSeed(ctx context.Context) {
	a.setState("restoring", false)
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
	if err == nil {
		a.restored = &Restored{URL: res.URL, Revision: res.Revision}
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		a.restoreFailures++
		wait := 5 * time.Second
		for i := 1; i < a.restoreFailures && wait < 5*time.Minute; i++ {
			wait *= 2
		}
		wait = min(wait, 5*time.Minute)
		a.Log.Warn("restore failed", "error", err, "failures", a.restoreFailures, "backoff", wait.String())
		if msg := err.Error(); msg != a.restoreError {
			a.restoreError = msg
			a.event(EventRestoreFailed, "Restore", true, "restoring the seed failed (retrying in %s): %v", wait, err)
		}
		r := a.keptReport()
		r.SetError(api.ReasonRestoreFailed, err.Error())
		a.report(ctx, r, false)
		a.sleep(ctx, wait)
		return
	}
	a.restoreFailures, a.restoreError = 0, ""
	a.event(EventSnapshotRestored, "Restore", false, "restored snapshot %s (revision %d, %d bytes) as the seed of this cluster; revisions continue from %d", res.URL, res.Revision, res.Manifest.Size, res.Revision+RevisionBump)
}
