package sync

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// A restore in place to a point (issue 27): etcd.io/restore-to beside etcd.io/restore-from. The verify
// Job looks for the point while the cluster serves; the restore Job restores the revision the
// verification found, so a time point does not move with chunks uploaded in between; status.restore
// names the point.
func TestRestoreInPlaceToAPoint(t *testing.T) {
	at := time.Date(2026, 1, 1, 6, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, to           string
		verifies, restores string
		toRevision         int64
	}{
		{name: "time", to: "2026-01-01T07:30:00+01:00", verifies: "to-time=2026-01-01T06:30:00Z", restores: "to-revision=5017"},
		{name: "revision", to: "4300", verifies: "to-revision=4300", restores: "to-revision=4300", toRevision: 4300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 3)
			w.spec.Backup = inPlaceBackup()
			w.converge(60)
			oldID := w.etcd.clusterID
			w.pointRevision = 5017
			w.parentAnn = map[string]string{api.AnnRestoreFrom: "s3://etcd-backups/prod/latest", api.AnnRestoreTo: tc.to}
			stepAtMostUntil(w, 100, func() bool { return restoredAndRunning(w) })
			require.True(t, restoredAndRunning(w), "restored")
			require.NotEqual(t, oldID, w.etcd.clusterID)
			require.Equal(t, "--"+tc.verifies, "--"+flagPair(w.verifyFlags, tc.verifies))
			require.Equal(t, "--"+tc.restores, "--"+flagPair(w.restoreFlags, tc.restores), "the restore Job restores the verified revision")
			require.NotContains(t, w.restoreFlags, "to-time", "never a time: it would move")
			rs := w.status.Restore
			require.True(t, rs.InPlace)
			require.Equal(t, tc.toRevision, rs.ToRevision)
			if tc.toRevision == 0 {
				require.NotNil(t, rs.ToTime)
				require.True(t, rs.ToTime.Time.Equal(at), "status names the point asked: %v", rs.ToTime)
			}
			require.Nil(t, meta.FindStatusCondition(w.status.Conditions, api.CondRestoreFailed))

			// The same pair is not acted on again; the same source to another point is a new request.
			verified := w.verified
			w.converge(40)
			require.Equal(t, verified, w.verified, "a request is acted on once")
			restoredID := w.etcd.clusterID
			w.parentAnn[api.AnnRestoreTo] = "4250"
			stepAtMostUntil(w, 100, func() bool {
				return restoredAndRunning(w) && w.etcd.clusterID != restoredID && w.status.Restore.ToRevision == 4250
			})
			require.Equal(t, int64(4250), w.status.Restore.ToRevision)
			require.Equal(t, "4250", w.restoreFlags["to-revision"])
		})
	}
}

// flagPair is "name=value" of the flag pair names, as the Job's command line had it.
func flagPair(flags map[string]string, pair string) string {
	name, _, _ := strings.Cut(pair, "=")
	return name + "=" + flags[name]
}

// Changing the point while the snapshot is verified withdraws that request (nothing stopped) and asks
// the new one; a point the verify Job's report does not pin is not carried out.
func TestRestoreInPlacePointChangedOrNotPinned(t *testing.T) {
	t.Run("changed while verifying", func(t *testing.T) {
		w := newWorld(t, 3)
		w.spec.Backup = inPlaceBackup()
		w.converge(60)
		w.parentAnn = map[string]string{api.AnnRestoreFrom: "s3://etcd-backups/prod/latest", api.AnnRestoreTo: "4300"}
		w.step(5 * time.Second) // the verify Job is rendered, and passes
		require.Equal(t, "4300", w.verifyFlags["to-revision"])
		// Changed before the hook saw the verification: the first request is withdrawn, the second verified.
		w.parentAnn[api.AnnRestoreTo] = "4301"
		w.step(5 * time.Second)
		require.Equal(t, 3, w.replicas(), "nothing stopped for the withdrawn request")
		require.NotNil(t, verifyJobOf(w))
		require.Contains(t, jobCmd(verifyJobOf(w)), "--to-revision=4301")
		stepAtMostUntil(w, 100, func() bool { return restoredAndRunning(w) })
		require.Equal(t, "4301", w.restoreFlags["to-revision"])
		require.Equal(t, 2, w.verified)
	})
	t.Run("report without the revision", func(t *testing.T) {
		w := newWorld(t, 3)
		w.spec.Backup = inPlaceBackup()
		w.converge(60)
		oldID := w.etcd.clusterID
		w.noAtRevision = true
		w.parentAnn = map[string]string{api.AnnRestoreFrom: "s3://etcd-backups/prod/latest", api.AnnRestoreTo: "2026-01-01T06:30:00Z"}
		for range 30 {
			w.step(5 * time.Second)
			require.Equal(t, 3, w.replicas(), "no member is asked to stop")
			require.Nil(t, restoreJobOf(w))
		}
		require.Equal(t, oldID, w.etcd.clusterID)
		require.Contains(t, conditionMessage(w.status, api.CondRestoreFailed), "names no revision the keyspace is at")
	})
}

// A point that does not parse is refused naming the annotation, before anything runs; a point without
// a source is named in InputIgnored.
func TestRestoreInPlacePointRefused(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Backup = inPlaceBackup()
	w.converge(60)
	w.parentAnn = map[string]string{api.AnnRestoreFrom: "s3://etcd-backups/prod/latest", api.AnnRestoreTo: "yesterday"}
	for range 10 {
		w.step(5 * time.Second)
		require.Equal(t, 3, w.replicas())
		require.Nil(t, verifyJobOf(w), "not even verified")
	}
	msg := conditionMessage(w.status, api.CondRestoreFailed)
	require.Contains(t, msg, `annotation etcd.io/restore-to "yesterday" is neither a revision`)
	require.Contains(t, msg, "nothing was changed")

	w.parentAnn = map[string]string{api.AnnRestoreTo: "4300"}
	w.step(5 * time.Second)
	require.Contains(t, conditionMessage(w.status, api.CondInputIgnored), `annotation etcd.io/restore-to "4300" without etcd.io/restore-from`)
	require.Nil(t, verifyJobOf(w))
}

// With continuous backup on, the writer stops while an in-place restore has the members down (its
// StatefulSet released, with the reason), and is back once the restored cluster runs: before, the answer
// that stopped the members was refused (500) for leaving the writer out without a reason, and the
// restore never started (found by the e2e RPO scenario). Switching continuous backup off releases it too.
func TestRestoreInPlaceWithContinuousBackup(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Backup = inPlaceBackup()
	w.spec.Backup.Continuous = &api.ContinuousBackupSpec{}
	w.converge(60)
	writer := w.name + "-backup-writer"
	require.NotNil(t, w.desired[wire.KeyStatefulSet][writer], "the writer runs")
	w.parentAnn = map[string]string{api.AnnRestoreFrom: "s3://etcd-backups/prod/latest", api.AnnRestoreTo: "4300"}
	stepUntilStopping(t, w, 10)
	w.step(5 * time.Second)
	require.Nil(t, w.desired[wire.KeyStatefulSet][writer], "no writer while the members are down")
	stepAtMostUntil(w, 100, func() bool { return restoredAndRunning(w) })
	require.True(t, restoredAndRunning(w))
	w.converge(20)
	require.NotNil(t, w.desired[wire.KeyStatefulSet][writer], "the writer is back on the restored cluster")

	w.spec.Backup.Continuous = nil
	w.generation++
	resp := w.step(5 * time.Second)
	require.Nil(t, w.desired[wire.KeyStatefulSet][writer])
	require.NotNil(t, resp)
}
