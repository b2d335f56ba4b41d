package sync

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/etcdhook/etcdhook/api"
)

// A refused in-place restore costs nothing (issue 24, class 7): the snapshot is verified while the
// cluster serves, and one that fails (damaged, another cluster's) is refused with the Job's reason in
// status, without a member stopping, a retry, or a person to bring anything back.
func TestRestoreInPlaceRefusedByVerification(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*world)
		wants string
	}{
		{"damaged", func(w *world) { w.snapshotDamaged = true }, "truncated?"},
		{"another cluster's", func(w *world) { w.snapshotOwner = "0d5c3f1e-other-cluster" }, "accept it by naming 0d5c3f1e-other-cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 3)
			w.spec.Backup = inPlaceBackup()
			w.converge(60)
			oldID, members := w.etcd.clusterID, append([]api.Member(nil), w.etcd.members...)
			tc.edit(w)
			w.parentAnn = map[string]string{api.AnnRestoreFrom: inPlaceSnapshot}
			for range 30 {
				w.step(5 * time.Second)
				require.Equal(t, 3, w.replicas(), "no member is asked to stop")
				require.Len(t, w.pods, 3)
				require.Nil(t, restoreJobOf(w), "no restore Job")
				require.Empty(t, agentRetired(t, w))
			}
			require.Equal(t, 1, w.verified, "a refused snapshot is not verified again")
			require.Equal(t, oldID, w.etcd.clusterID)
			require.Equal(t, members, w.etcd.members)
			require.Equal(t, api.PhaseRunning, w.status.Phase)
			c := meta.FindStatusCondition(w.status.Conditions, api.CondRestoreFailed)
			require.NotNil(t, c)
			require.Contains(t, c.Message, "failed verification")
			require.Contains(t, c.Message, tc.wants, "the Job's reason, not only its name")
			require.Contains(t, c.Message, "nothing was changed")
			require.Nil(t, w.status.Restore, "no restore happened: nothing was replaced")
			require.Nil(t, verifyJobOf(w), "the verify Job is released")

			// A person's next value (another snapshot, or the opt-in for the other cluster's) runs.
			w.snapshotDamaged = false
			w.parentAnn = map[string]string{api.AnnRestoreFrom: "s3://etcd-backups/prod/prod/demo/20260102T000000Z-r5000.db",
				api.AnnRestoreForeignCluster: w.snapshotOwner}
			stepAtMostUntil(w, 80, func() bool { return restoredAndRunning(w) })
			require.NotEqual(t, oldID, w.etcd.clusterID, "restored")
			require.Equal(t, []string{oldID}, w.status.Restore.ReplacedClusterIDs)
			require.Nil(t, meta.FindStatusCondition(w.status.Conditions, api.CondRestoreFailed))
		})
	}
}

// A snapshot that changed between its verification and the restore (a "latest" whose newest copy was
// replaced) is refused by the restore Job before it touches any data: the members start again on their
// own data by themselves, and status says why.
func TestRestoreInPlaceRefusedAfterStopStartsTheMembersAgain(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Backup = inPlaceBackup()
	w.converge(60)
	oldID, members := w.etcd.clusterID, len(w.etcd.members)
	w.parentAnn = map[string]string{api.AnnRestoreFrom: inPlaceSnapshot}
	w.snapshotChanged = true
	stepUntilStopping(t, w, 10)
	w.converge(80)
	require.Equal(t, oldID, w.etcd.clusterID, "the old cluster, on its own data")
	require.Len(t, w.etcd.members, members)
	require.Nil(t, w.status.Restore)
	require.Nil(t, agentRetired(t, w))
	c := meta.FindStatusCondition(w.status.Conditions, api.CondRestoreFailed)
	require.NotNil(t, c)
	require.Contains(t, c.Message, "refused the snapshot before touching any data: snapshot changed since it was verified")
	for range 10 {
		w.step(5 * time.Second)
		require.Nil(t, restoreJobOf(w), "not tried again")
	}
}

// restoreOnQuorumLoss whose snapshot fails verification is refused once, not retried every sync, and
// says so; switching the flag off forgets the refusal, and a restore by hand runs.
func TestRestoreOnQuorumLossRefusedByVerification(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Backup = &api.BackupSpec{Destination: "s3://etcd-backups/prod", CredentialsSecret: "creds", RestoreOnQuorumLoss: true}
	w.converge(60)
	oldID := w.etcd.clusterID
	w.snapshotDamaged = true
	w.loseVolumes(1, 2)
	for range 120 {
		w.step(5 * time.Second)
		require.Nil(t, restoreJobOf(w))
	}
	require.Equal(t, 1, w.verified, "verified once")
	require.Equal(t, oldID, w.etcd.clusterID)
	require.Contains(t, conditionMessage(w.status, api.CondRestoreFailed), "spec.backup.restoreOnQuorumLoss: the snapshot failed verification")

	// Switched off, the refusal is forgotten (switched on again, the next loss tries again).
	w.spec.Backup.RestoreOnQuorumLoss = false
	w.generation++
	w.step(5 * time.Second)
	require.Empty(t, conditionMessage(w.status, api.CondRestoreFailed))
	// By hand: the same source, once it holds a good snapshot.
	w.snapshotDamaged = false
	w.parentAnn = map[string]string{api.AnnRestoreFrom: "s3://etcd-backups/prod/latest"}
	stepAtMostUntil(w, 100, func() bool { return restoredAndRunning(w) })
	require.NotEqual(t, oldID, w.etcd.clusterID, "restored")
}

// Both restore Jobs end at once on a refusal (no retry of a snapshot that cannot pass), report on the
// backup Lease under its account, and pass the cluster the snapshot must belong to.
func TestRestoreJobsRendering(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Backup = inPlaceBackup()
	w.converge(60)
	w.parentAnn = map[string]string{api.AnnRestoreFrom: inPlaceSnapshot, api.AnnRestoreForeignCluster: "other-uid"}
	w.noJobs = true
	w.step(5 * time.Second)
	v := verifyJobOf(w)
	require.NotNil(t, v)
	cmd := jobCmd(v)
	for _, want := range []string{"restore ", "--verify-only", "--cluster-uid=" + w.uid, "--accept-cluster=other-uid", "--lease=" + w.names().BackupName(), "--from=" + inPlaceSnapshot} {
		require.Contains(t, cmd, want)
	}
	require.NotContains(t, cmd, "--replace")
	spec := v["spec"].(map[string]any)
	require.Equal(t, map[string]any{"rules": []any{map[string]any{"action": "FailJob",
		"onExitCodes": map[string]any{"containerName": "etcdhook", "operator": "In", "values": []any{float64(api.RestoreExitRefused)}}}}}, spec["podFailurePolicy"])
	pod := spec["template"].(map[string]any)["spec"].(map[string]any)
	require.Equal(t, w.names().BackupName(), pod["serviceAccountName"])
	require.True(t, strings.Contains(jobCmd(v), "--data-dir=/scratch/data"))
	require.Equal(t, 3, w.replicas())
}
