package sync

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/wire"
)

const inPlaceSnapshot = "s3://etcd-backups/prod/prod/demo/20260101T000000Z-r4242.db"

// inPlaceBackup is the spec.backup an in-place restore of inPlaceSnapshot reads the store with.
func inPlaceBackup() *api.BackupSpec {
	return &api.BackupSpec{Destination: "s3://etcd-backups/prod", CredentialsSecret: "backup-creds"}
}

// restoreJobOf is the in-place restore Job the hook rendered, nil when none.
func restoreJobOf(w *world) map[string]any {
	for name, j := range w.desired[wire.KeyJob] {
		if strings.HasPrefix(name, w.name+"-restore-") && !strings.HasPrefix(name, w.name+"-restore-v") {
			return j
		}
	}
	return nil
}

// verifyJobOf is the in-place restore's verify Job the hook rendered, nil when none.
func verifyJobOf(w *world) map[string]any {
	for name, j := range w.desired[wire.KeyJob] {
		if strings.HasPrefix(name, w.name+"-restore-v") {
			return j
		}
	}
	return nil
}

// jobCmd is a rendered Job's command line.
func jobCmd(j map[string]any) string {
	var out []string
	for _, a := range j["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["command"].([]any) {
		out = append(out, a.(string))
	}
	return strings.Join(out, " ")
}

// stepUntilStopping steps until the members are asked to stop (the snapshot passed its
// verification), at most max steps; every step before, the cluster serves at its size.
func stepUntilStopping(t *testing.T, w *world, max int) {
	t.Helper()
	for n := 0; w.replicas() != 0; n++ {
		require.Less(t, n, max, "the restore never stopped the members")
		require.Len(t, w.pods, 3, "the cluster serves while the snapshot is verified")
		w.step(5 * time.Second)
	}
}

// restoredAndRunning: the latest restore is done and the cluster serves again.
func restoredAndRunning(w *world) bool {
	return w.status.Restore != nil && w.status.Restore.Phase == "Restored" && w.status.Phase == api.PhaseRunning
}

// stepAtMostUntil steps the world 5 s at a time until cond holds, at most max steps. Unlike stepUntil it
// does not fail when cond is not reached: the caller asserts what it needs.
func stepAtMostUntil(w *world, max int, cond func() bool) {
	for n := 0; n < max && !cond(); n++ {
		w.step(5 * time.Second)
	}
}

// agentRetired is agent.json's retiredClusters as rendered.
func agentRetired(t *testing.T, w *world) []string {
	cm := w.desired[wire.KeyConfigMap][w.names().ConfigMap()]
	var cfg api.AgentConfig
	require.NoError(t, json.Unmarshal([]byte(cm["data"].(map[string]any)[api.ConfigKeyAgent].(string)), &cfg))
	return cfg.RetiredClusters
}

// A restore in place stops every member before the Job touches a volume, restores into ordinal 0's,
// starts pod 0 alone on it, and grows back to the spec's size under a new cluster ID; the replaced ID
// is retired (its stale Lease reports count for nothing) and recorded.
func TestRestoreInPlace(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Backup = &api.BackupSpec{Destination: "s3://etcd-backups/prod", CredentialsSecret: "backup-creds", Schedule: "0 * * * *"}
	w.spec.Scheduling.NodeSelector = map[string]string{"pool": "etcd"}
	w.spec.Scheduling.Tolerations = []corev1.Toleration{{Key: "dedicated", Value: "etcd", Effect: corev1.TaintEffectNoSchedule}}
	w.converge(60)
	oldID := w.etcd.clusterID
	w.parentAnn = map[string]string{api.AnnRestoreFrom: inPlaceSnapshot}

	jobSeen, suspended, verifying := false, false, false
	var restoreCmd string
	for n := 0; n < 80 && !restoredAndRunning(w); n++ {
		w.step(5 * time.Second)
		if j := restoreJobOf(w); j != nil && !jobSeen {
			// (The simulated Job fails if pod 0 exists when it runs.)
			jobSeen = true
			restoreCmd = jobCmd(j)
			require.Equal(t, 0, w.replicas(), "rendered only with the StatefulSet at 0")
			pod := j["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			require.Equal(t, map[string]any{"pool": "etcd"}, pod["nodeSelector"], "it runs where the members may")
			require.Len(t, pod["tolerations"], 1)
		}
		if w.status.Restore != nil && (w.status.Restore.Phase == "Stopping" || w.status.Restore.Phase == "Restoring") {
			require.Empty(t, agentRetired(t, w), "before the data is replaced, the live cluster's ID is nobody's to move aside")
		}
		if cj := w.desired[wire.KeyCronJob][w.names().BackupName()]; cj != nil && cj["spec"].(map[string]any)["suspend"] == true {
			suspended = true
		}
		if w.status.Restore != nil && w.status.Restore.Phase == "Verifying" {
			verifying = true
			require.Equal(t, api.PhaseRunning, w.status.Phase, "the cluster serves while the snapshot is verified")
			require.Empty(t, w.status.Restore.ReplacedClusterIDs, "nothing is replaced yet")
			require.Len(t, w.pods, 3)
		} else if w.status.Restore != nil && w.status.Restore.Phase != "Restored" {
			require.Equal(t, api.PhaseRestoring, w.status.Phase)
			c := meta.FindStatusCondition(w.status.Conditions, api.CondAvailable)
			require.Equal(t, "RestoringInPlace", c.Reason)
		}
	}
	require.True(t, jobSeen, "a restore Job ran")
	require.True(t, verifying, "the snapshot was verified first")
	require.Equal(t, 1, w.verified)
	require.Contains(t, restoreCmd, "--expect-sha256="+strings.Repeat("ab", 32), "the restore Job restores the snapshot verified")
	require.True(t, suspended, "the backup schedule is suspended while the members are down")
	w.converge(40)
	require.NotEqual(t, oldID, w.etcd.clusterID, "a new cluster")
	require.Equal(t, w.etcd.clusterID, w.status.ClusterID)
	require.Len(t, w.voterOrdinals(), 3, "grown back to the spec's size")
	rs := w.status.Restore
	require.NotNil(t, rs)
	require.True(t, rs.InPlace)
	require.Equal(t, inPlaceSnapshot, rs.Source)
	require.Equal(t, inPlaceSnapshot, rs.Snapshot)
	require.Equal(t, int64(4242), rs.Revision)
	require.Equal(t, []string{oldID}, rs.ReplacedClusterIDs)
	require.Equal(t, []string{oldID}, agentRetired(t, w), "the agents move the replaced cluster's data aside")
	require.Nil(t, restoreJobOf(w), "the Job goes once the restored member runs")
	require.Nil(t, w.desired[wire.KeyCronJob][w.names().BackupName()]["spec"].(map[string]any)["suspend"], "backups resume")
	require.Nil(t, meta.FindStatusCondition(w.status.Conditions, api.CondSplitBrain))
	for name := range w.jobs {
		require.NotContains(t, name, "-pvc-", "the old volumes below the size are grown back onto, never deleted")
	}

	// The annotation stays: nothing more happens.
	clusterID := w.etcd.clusterID
	for range 10 {
		w.step(5 * time.Second)
	}
	require.Equal(t, clusterID, w.etcd.clusterID, "one restore per value")
	require.Len(t, w.pods, 3)
}

// A restore whose Job fails (after the snapshot passed its verification: a store's or the volume's
// failure, not the snapshot's) leaves every volume as it was and the members stopped, and says so;
// withdrawing the annotation starts the cluster again on its own data.
func TestRestoreInPlaceFailedThenWithdrawn(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Backup = inPlaceBackup() // the store the snapshot is read from, with its credentials
	w.converge(60)
	oldID, members := w.etcd.clusterID, len(w.etcd.members)
	w.parentAnn = map[string]string{api.AnnRestoreFrom: inPlaceSnapshot}
	stepUntilStopping(t, w, 10)
	w.failJobs = true
	for range 20 {
		w.step(5 * time.Second)
	}
	require.Empty(t, w.pods)
	c := meta.FindStatusCondition(w.status.Conditions, api.CondRestoreFailed)
	require.NotNil(t, c)
	require.Contains(t, c.Message, "the cluster's data is as it was")
	require.Equal(t, "Restoring", w.status.Restore.Phase)
	require.Equal(t, oldID, w.etcd.clusterID)

	w.failJobs = false
	delete(w.parentAnn, api.AnnRestoreFrom)
	w.converge(60)
	require.Equal(t, oldID, w.etcd.clusterID, "the old cluster, on its own data")
	require.Equal(t, oldID, w.status.ClusterID)
	require.Len(t, w.etcd.members, members)
	require.Nil(t, w.status.Restore)
	require.Nil(t, agentRetired(t, w))
}

// A request withdrawn while the members stop changes nothing but a restart.
func TestRestoreInPlaceWithdrawnWhileStopping(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Backup = inPlaceBackup() // the store the snapshot is read from, with its credentials
	w.converge(60)
	oldID := w.etcd.clusterID
	w.parentAnn = map[string]string{api.AnnRestoreFrom: inPlaceSnapshot}
	stepUntilStopping(t, w, 10)
	w.parentAnn = nil
	w.converge(60)
	require.Equal(t, oldID, w.etcd.clusterID)
	require.Nil(t, w.status.Restore)
	for name := range w.jobs {
		require.Contains(t, name, "-restore-v", "no restore Job was made, only the verification")
	}
}

// A value that cannot be carried out changes nothing and names the problem.
func TestRestoreInPlaceRefused(t *testing.T) {
	for _, tc := range []struct {
		name, value, want string
		edit              func(*api.ClusterSpec)
	}{
		{"scheme", "ftp://host/x.db", "etcd.io/restore-from \"ftp://host/x.db\"", nil},
		{"file without claim", "file:///backups/prod/demo/latest", "spec.backup.volumeClaimName", nil},
		{"emptyDir", inPlaceSnapshot, "emptyDir", func(s *api.ClusterSpec) {
			s.Storage.EmptyDir, s.Backup = &corev1.EmptyDirVolumeSource{}, inPlaceBackup()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 3)
			if tc.edit != nil {
				tc.edit(&w.spec)
			}
			w.converge(60)
			oldID := w.etcd.clusterID
			w.parentAnn = map[string]string{api.AnnRestoreFrom: tc.value}
			for range 5 {
				w.step(5 * time.Second)
			}
			require.Equal(t, 3, w.replicas())
			require.Len(t, w.pods, 3)
			require.Equal(t, oldID, w.etcd.clusterID)
			c := meta.FindStatusCondition(w.status.Conditions, api.CondRestoreFailed)
			require.NotNil(t, c)
			require.Equal(t, "InvalidRestoreRequest", c.Reason)
			require.Contains(t, c.Message, tc.want)
			require.Equal(t, api.PhaseRunning, w.status.Phase)
			// A refused value stays refused when what refused it changes: a value is acted on once.
			w.setSpec(func(s *api.ClusterSpec) {
				s.Storage.EmptyDir = nil
				s.Backup = &api.BackupSpec{Destination: "file:///backups", VolumeClaimName: "backups"}
			})
			for range 10 {
				w.step(5 * time.Second)
				require.Nil(t, restoreJobOf(w))
			}
			require.Equal(t, oldID, w.etcd.clusterID)
		})
	}
}

// restoreOnQuorumLoss: two of three members run without their data (volumes lost). Nothing happens
// before deadMemberSeconds; then the destination's newest snapshot is restored in place, as the
// annotation would, and the cluster grows back to three under a new ID. With one member lost, or the
// flag off, the hook never restores.
func TestRestoreOnQuorumLoss(t *testing.T) {
	const dest = "s3://etcd-backups/prod?endpoint=https://minio.storage:9000"
	for _, tc := range []struct {
		name     string
		flag     bool
		lost     []int
		restores bool
	}{
		{"quorum lost", true, []int{1, 2}, true},
		{"one member lost", true, []int{2}, false},
		{"flag off", false, []int{1, 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 3)
			w.spec.Backup = &api.BackupSpec{Destination: dest, CredentialsSecret: "creds", RestoreOnQuorumLoss: tc.flag}
			w.converge(60)
			oldID := w.etcd.clusterID
			w.loseVolumes(tc.lost...)
			for range 50 { // 250 s: below deadMemberSeconds (300 s)
				w.step(5 * time.Second)
				require.Nil(t, restoreJobOf(w), "not before deadMemberSeconds")
			}
			stepAtMostUntil(w, 100, func() bool { return restoredAndRunning(w) })
			if !tc.restores {
				require.Nil(t, w.status.Restore)
				require.Equal(t, oldID, w.etcd.clusterID)
				return
			}
			w.converge(40)
			rs := w.status.Restore
			require.NotNil(t, rs)
			require.Equal(t, "s3://etcd-backups/prod/latest?endpoint=https://minio.storage:9000", rs.Source)
			require.Equal(t, []string{"demo-1", "demo-2"}, rs.LostMembers)
			require.Contains(t, rs.Message, "restoreOnQuorumLoss: demo-1, demo-2 ran without their data")
			require.Equal(t, []string{oldID}, rs.ReplacedClusterIDs)
			require.NotEqual(t, oldID, w.etcd.clusterID)
			require.Len(t, w.voterOrdinals(), 3)

			// A second disaster restores again, from the same /latest, under other IDs.
			second := w.etcd.clusterID
			w.loseVolumes(0, 1)
			stepAtMostUntil(w, 200, func() bool { return w.etcd.clusterID != second && restoredAndRunning(w) })
			require.NotEqual(t, second, w.etcd.clusterID, "restored again")
			require.Equal(t, []string{oldID, second}, w.status.Restore.ReplacedClusterIDs, "retired IDs add up: a member of the first cluster that never came back still counts for nothing")
			require.Equal(t, []string{"demo-0", "demo-1"}, w.status.Restore.LostMembers)
		})
	}
}

// An annotation value is carried out once, whatever restore came after it: after an automatic restore
// (whose request is the destination's /latest), the value still on the parent is not restored again.
func TestRestoreAnnotationNotRepeatedAfterAutomatic(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Backup = &api.BackupSpec{Destination: "s3://etcd-backups/prod", CredentialsSecret: "creds", RestoreOnQuorumLoss: true}
	w.converge(60)
	w.parentAnn = map[string]string{api.AnnRestoreFrom: inPlaceSnapshot}
	stepAtMostUntil(w, 80, func() bool { return restoredAndRunning(w) })
	w.converge(40)
	manual := w.etcd.clusterID
	w.loseVolumes(1, 2)
	stepAtMostUntil(w, 200, func() bool { return w.etcd.clusterID != manual && restoredAndRunning(w) })
	require.NotEmpty(t, w.status.Restore.LostMembers, "the automatic restore ran")
	automatic := w.etcd.clusterID
	require.NotEqual(t, manual, automatic)
	for range 30 {
		w.step(5 * time.Second)
		require.Nil(t, restoreJobOf(w), "the annotation's value was carried out already")
	}
	require.Equal(t, automatic, w.etcd.clusterID)
}

// While paused no restore starts; one in flight goes on, its Job kept.
func TestRestoreInPlaceAndPause(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Backup = inPlaceBackup() // the store the snapshot is read from, with its credentials
	w.converge(60)
	oldID := w.etcd.clusterID
	w.spec.Paused = true
	w.generation++
	w.parentAnn = map[string]string{api.AnnRestoreFrom: inPlaceSnapshot}
	for range 5 {
		w.step(5 * time.Second)
	}
	require.Equal(t, 3, w.replicas(), "nothing starts while paused")
	require.Nil(t, w.status.Restore)
	require.Empty(t, agentRetired(t, w))

	w.spec.Paused = false
	w.generation++
	stepUntilStopping(t, w, 10)
	w.noJobs = true // the Job runs long
	stepAtMostUntil(w, 10, func() bool { return restoreJobOf(w) != nil })
	require.NotNil(t, restoreJobOf(w))
	w.spec.Paused = true
	w.generation++
	for range 5 {
		w.step(5 * time.Second)
		require.NotNil(t, restoreJobOf(w), "a paused sync keeps the running Job")
		require.Equal(t, 0, w.replicas())
	}
	w.noJobs = false
	stepAtMostUntil(w, 60, func() bool { return w.status.Restore != nil && w.status.Restore.Phase == "Restored" })
	require.NotEqual(t, oldID, w.etcd.clusterID, "the restore in flight finished while paused")
}

// A second request withdrawn by setting the first value back never runs the first again, and the
// record goes back to the first restore (its retired IDs, its status).
func TestRestoreInPlaceWithdrawnToAnOldValue(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Backup = inPlaceBackup() // the store the snapshot is read from, with its credentials
	w.converge(60)
	w.parentAnn = map[string]string{api.AnnRestoreFrom: inPlaceSnapshot}
	stepAtMostUntil(w, 80, func() bool { return restoredAndRunning(w) })
	w.converge(40)
	first := w.etcd.clusterID
	retired := w.status.Restore.ReplacedClusterIDs
	w.parentAnn = map[string]string{api.AnnRestoreFrom: "s3://etcd-backups/prod/prod/demo/20260102T000000Z-r5000.db"}
	stepUntilStopping(t, w, 10) // the second restore started
	w.parentAnn = map[string]string{api.AnnRestoreFrom: inPlaceSnapshot}
	w.converge(60)
	for range 20 {
		w.step(5 * time.Second)
		require.Nil(t, restoreJobOf(w), "the first value was carried out already")
	}
	require.Equal(t, first, w.etcd.clusterID)
	require.Equal(t, inPlaceSnapshot, w.status.Restore.Source, "the record is the first restore's again")
	require.Equal(t, retired, w.status.Restore.ReplacedClusterIDs)
}

// A hand-edited record that retires the live cluster ID (after a restore it claims was committed) is not
// trusted for that ID: ready member pods report it as a healthy voter. Without this check the agents
// would get it in agent.json and move their data aside at their next restart.
func TestRestoreInPlaceRecordRetiringTheLiveCluster(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	live, members := w.etcd.clusterID, append([]api.Member(nil), w.etcd.members...)
	rec, err := json.Marshal(facts.InPlaceRecord{Request: "s3://b/x.db", Retired: []string{"1111111111111111", live}, Committed: true, Done: true, Seen: []string{"s3://b/x.db"}})
	require.NoError(t, err)
	w.desired[wire.KeyConfigMap][w.names().ConfigMap()]["data"].(map[string]any)[api.ConfigKeyRestoreInPlace] = string(rec)
	w.step(5e9)
	require.Equal(t, []string{"1111111111111111"}, agentRetired(t, w), "the live ID is not handed to the agents")
	require.Equal(t, "True/ImpossibleInput", w.condition(api.CondInputIgnored))
	require.Contains(t, conditionMessage(w.status, api.CondInputIgnored), "lists cluster ID "+live+" as replaced, but a ready member pod reports it as a healthy voter")
	require.Equal(t, api.PhaseRunning, w.status.Phase)
	var kept facts.InPlaceRecord
	cm := w.desired[wire.KeyConfigMap][w.names().ConfigMap()]["data"].(map[string]any)
	require.NoError(t, json.Unmarshal([]byte(cm[api.ConfigKeyRestoreInPlace].(string)), &kept))
	require.Equal(t, []string{"1111111111111111"}, kept.Retired, "the record is rewritten without it")
	w.converge(20)
	require.Equal(t, members, w.etcd.members)
}
