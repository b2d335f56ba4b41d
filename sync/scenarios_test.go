package sync

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

// resizing is a cluster of from members, settled, whose spec now asks for to (no sync has seen it yet).
func resizing(t *testing.T, from, to int32) *world {
	w := newWorld(t, from)
	w.converge(60)
	w.setSpec(size(to))
	return w
}

// Member data loss: the agent reports it waits to rejoin while its old ID is still a member; the hook
// permits the replacement when quorum allows, and the member comes back under a new ID.
func TestDataLossOnVoterReplacedUnderNewID(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	old := w.etcd.byPeer(w.peerURL(1)).ID
	w.data[1] = ""
	w.step(5 * time.Second)
	w.converge(40)
	m := w.etcd.byPeer(w.peerURL(1))
	require.NotEqual(t, old, m.ID)
	require.Equal(t, []int{0, 1, 2}, w.voterOrdinals())
	require.Empty(t, w.jobNames(w.name+"-rm-"), "the agent replaces its own old ID")
}

// An orphan (a member no ordinal explains) is removed by a Job when quorum allows.
func TestOrphanMemberRemoved(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	id := w.etcd.add("http://old-node.example:2380", false)
	w.etcd.byID(id).Started = true
	// Four voters, three healthy: the orphan's removal keeps quorum of both sets.
	w.converge(20)
	require.Nil(t, w.etcd.byID(id))
	require.Len(t, w.etcd.members, 3)
}

// Two cluster IDs among the Leases: condition SplitBrain, no membership action.
func TestSplitBrainFreezesMembership(t *testing.T) {
	w := resizing(t, 3, 5)
	l := w.leases[2]
	l.report.ClusterID = "aaaaaaaaaaaaaaaa"
	resp := w.sync()
	require.Equal(t, api.PhaseFailed, resp.Status.Phase)
	require.Equal(t, "True/ClusterIDMismatch", w.condition(api.CondSplitBrain))
	require.Equal(t, 3, w.replicas())
	for i := 0; i < 3; i++ {
		require.Nil(t, w.leaseAnn(i)[api.AnnJoinPermitted])
	}
}

// Size edited mid-step: the step in flight finishes under the latched target before the new size is taken.
func TestSizeEditedMidStepIsLatched(t *testing.T) {
	w := resizing(t, 3, 5)
	w.sync() // ordinal 3 permitted; pods 3 and 4 start together (4 waits for its turn)
	require.Equal(t, 5, w.replicas())
	require.NotNil(t, w.leaseAnn(3)[api.AnnJoinPermitted])
	require.Nil(t, w.leaseAnn(4)[api.AnnJoinPermitted], "one join at a time")
	w.setSpec(func(s *api.ClusterSpec) { s.Size = ptr(int32(3)) })
	resp := w.sync()
	require.Equal(t, int32(5), resp.Status.Target.Size, "the target stays latched while ordinal 3 joins")
	require.Equal(t, "True/SpecPending", w.condition(api.CondProgressing))
	w.converge(60)
	require.Equal(t, []int{0, 1, 2}, w.voterOrdinals())
	require.Equal(t, int32(3), w.status.Target.Size)
}

// The hook is unavailable in the middle of a scale step (no syncs while agents act), then back.
func TestHookUnavailableMidStepConverges(t *testing.T) {
	w := resizing(t, 3, 5)
	w.sync()
	for n := 0; n < 10; n++ { // hook down: the world moves on without it
		w.controllers()
		w.agents()
		w.runJobs()
		w.now = w.now.Add(30 * time.Second)
	}
	w.converge(60)
	require.Equal(t, []int{0, 1, 2, 3, 4}, w.voterOrdinals())
}

// A stale cache: a request from before the last step is answered again. It must not start a second
// change: the answer to the old request is the same step, not another one.
func TestStaleCacheNoDoubleStep(t *testing.T) {
	w := resizing(t, 3, 5)
	stale := w.request()
	first := w.sync()
	w.controllers()
	w.agents()
	again, err := Compute(stale, w.now, w.opts)
	require.NoError(t, err)
	require.Equal(t, mustJSON(first.Children), mustJSON(again.Children), "the same stale view gives the same single step")
	w.converge(60)
	require.Equal(t, []int{0, 1, 2, 3, 4}, w.voterOrdinals())
}

// Hook v1 and v2 key formats and Metacontroller's last-applied annotation give the same answer.
func TestKeyFormatsAndLastAppliedAgree(t *testing.T) {
	w := resizing(t, 3, 4)
	v1, err := Compute(w.request(), w.now, w.opts)
	require.NoError(t, err)
	w.v2, w.lastApplied = true, true
	v2, err := Compute(w.request(), w.now, w.opts)
	require.NoError(t, err)
	require.Equal(t, string(mustJSON(v1)), string(mustJSON(v2)))
}

// Scale-down of a leaving member whose agent is dead: a Job removes it by peer URL.
func TestLeaveWithDeadAgentUsesRemoveJob(t *testing.T) {
	w := newWorld(t, 4)
	w.converge(80)
	w.setSpec(func(s *api.ClusterSpec) { s.Size = ptr(int32(3)) })
	w.down[3] = true
	w.converge(60)
	require.Equal(t, []int{0, 1, 2}, w.voterOrdinals())
	require.Equal(t, 3, w.replicas())
}

// A failed remove Job stays visible and is retried under the next attempt number after a backoff.
func TestFailedRemoveJobRetriedWithBackoff(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	id := w.etcd.add("http://stray.example:2380", false)
	w.etcd.byID(id).Started = true
	w.agents()
	w.failJobs = true
	w.step(5 * time.Second)
	require.Len(t, w.jobNames(w.name+"-rm-"+id), 1)
	w.step(5 * time.Second)
	require.Equal(t, []string{w.name + "-rm-" + id + "-1"}, w.jobNames(w.name+"-rm-"+id), "within the backoff the failed attempt stays, alone")
	w.now = w.now.Add(40 * time.Second)
	w.failJobs = false
	w.step(5 * time.Second)
	require.ElementsMatch(t, []string{w.name + "-rm-" + id + "-1", w.name + "-rm-" + id + "-2"}, w.jobNames(w.name+"-rm-"+id))
	w.converge(20)
	require.Nil(t, w.etcd.byID(id))
	require.Empty(t, w.jobNames(w.name+"-rm-"), "finished Jobs are dropped once their effect shows")
}

// An invalid spec keeps the children of the last valid spec and says why.
func TestInvalidSpecKeepsLastValid(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	before := mustJSON(w.lastResp.Children)
	for _, tc := range []struct {
		edit   func(*api.ClusterSpec)
		reason string
	}{
		{func(s *api.ClusterSpec) { s.Size = ptr(int32(11)) }, "InvalidSize"},
		{func(s *api.ClusterSpec) { s.Version = "3.4.20" }, "UnsupportedVersion"},
		{func(s *api.ClusterSpec) { s.Version = "3.6.10" }, "UpgradeRefused"},
		{func(s *api.ClusterSpec) { s.Options = map[string]string{"initial-cluster-state": "new"} }, "ManagedOption"},
		{func(s *api.ClusterSpec) {
			s.Security.TLS.Enabled, s.Security.TLS.Peer.SecretName = ptr(false), "peer"
		}, "TLSSecretChange"},
		{func(s *api.ClusterSpec) { s.Storage.StorageClassName = ptr("fast") }, "StorageImmutable"},
	} {
		saved := *w.spec.DeepCopy()
		w.setSpec(tc.edit)
		resp := w.sync()
		require.Equal(t, string(before), string(mustJSON(resp.Children)), tc.reason)
		require.Equal(t, "True/"+tc.reason, w.condition(api.CondInvalidSpec))
		w.setSpec(func(s *api.ClusterSpec) { *s = saved })
		w.sync()
		require.Equal(t, "", w.condition(api.CondInvalidSpec))
	}
}

// Upgrade 3.5 -> 3.6 is allowed from 3.5.20, refused below, and rolls one pod at a time.
func TestUpgradePathAndRoll(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Version = "3.5.19"
	w.converge(60)
	w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.6.16" })
	w.sync()
	require.Equal(t, "True/UpgradeRefused", w.condition(api.CondInvalidSpec))
	w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.5.21" })
	w.converge(60)
	w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.6.16" })
	restarted := 0
	uids := map[int]string{}
	for i, p := range w.pods {
		uids[i] = p.uid
	}
	for n := 0; n < 60 && w.status.CurrentVersion != "3.6.16"; n++ {
		w.step(5 * time.Second)
		changed := 0
		for i, p := range w.pods {
			if p.uid != uids[i] {
				changed++
				uids[i] = p.uid
			}
		}
		require.LessOrEqual(t, changed, 1, "one pod at a time")
		restarted += changed
	}
	require.Equal(t, 3, restarted)
	require.Equal(t, "3.6.16", w.status.CurrentVersion)
}

// A cluster deleted with its claims kept and re-created under the same name with adoptExistingData: the
// hook must start every ordinal with a claim, or pod 0 alone sits on one member's data of a 3-member
// cluster without quorum for ever. The old members come back under their own IDs.
func TestAdoptExistingDataStartsEveryClaimedOrdinal(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	before := w.voterOrdinals()
	ids := map[int]string{}
	for i := 0; i < 3; i++ {
		ids[i] = w.etcd.byPeer(w.peerURL(i)).ID
	}
	// Delete: children and pods go (GC), claims and data stay. Re-create with a new UID.
	w.uid = "9b1d2c3e-0000-4000-8000-00000000000a"
	w.desired = map[string]map[string]map[string]any{}
	w.pods = map[int]*simPod{}
	w.leases = map[int]*simLease{}
	w.jobs = map[string]*simJob{}
	w.status = api.ClusterStatus{}
	w.spec.AdoptExistingData = true
	w.converge(80)
	require.Equal(t, before, w.voterOrdinals())
	for i := 0; i < 3; i++ {
		require.Equal(t, ids[i], w.etcd.byPeer(w.peerURL(i)).ID, "ordinal %d keeps its member ID", i)
	}
}

// spec.paused: a size change waits, no member is added, the status says Paused; unpaused, the change
// is made. A pod deleted while paused comes back as the same member (the StatefulSet recreates it).
func TestPausedFreezesChanges(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	w.setSpec(func(s *api.ClusterSpec) { s.Paused = true; s.Size = ptr(int32(5)) })
	for i := 0; i < 40; i++ { // it never converges to the new size: step through 200 s
		w.step(5 * time.Second)
	}
	require.Equal(t, []int{0, 1, 2}, w.voterOrdinals(), "no member is added while paused")
	require.Equal(t, api.PhasePaused, w.status.Phase)
	require.NotNil(t, w.status.Target)
	require.Equal(t, int32(3), w.status.Target.Size, "the recorded spec stays in force")
	w.setSpec(func(s *api.ClusterSpec) { s.Paused = false })
	w.converge(120)
	require.Equal(t, []int{0, 1, 2, 3, 4}, w.voterOrdinals())
	require.Equal(t, api.PhaseRunning, w.status.Phase)
}
