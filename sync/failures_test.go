package sync

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// The failure sequences of docs/design/11-failure-sequences.md §11 that the hook decides, each driven through the test world.

func (w *world) leaseAnn(i int) map[string]any { return w.leaseIntent(i) }

func (w *world) jobNames(prefix string) []string {
	var out []string
	for name := range w.desired[wire.KeyJob] {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	return out
}

func (w *world) condition(typ string) string {
	for _, c := range w.status.Conditions {
		if c.Type == typ {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return ""
}

// Size 4 -> 3: the removed etcd exits and the kubelet restarts the container at once; the agent must
// find intent leave and park. The hook keeps intent leave until the pod is gone.
func TestFailureLeaveThenImmediateRestart(t *testing.T) {
	w := newWorld(t, 4)
	w.converge(60)
	ids := w.etcd.members
	w.setSpec(func(s *api.ClusterSpec) { s.Size = ptr(int32(3)) })
	w.stsLag = true // the pod of ordinal 3 lingers: its container keeps restarting
	left := false
	for n := 0; n < 12; n++ {
		w.step(5 * time.Second)
		if w.etcd.byPeer(w.peerURL(3)) == nil {
			left = true
		}
		if left {
			ann := w.leaseAnn(3)
			require.NotNil(t, ann, "the Lease of a leaving pod stays while the pod exists")
			require.Equal(t, api.IntentLeave, ann[api.AnnIntent])
			require.Nil(t, ann[api.AnnJoinPermitted])
			// A container restart: same pod, data gone from memory of etcd; the agent reads its intent.
			w.data[3] = ""
			require.Nil(t, w.etcd.byPeer(w.peerURL(3)), "a restarted leaver must park, not rejoin")
		}
	}
	require.True(t, left)
	w.stsLag = false
	w.converge(40)
	require.Equal(t, []int{0, 1, 2}, w.voterOrdinals())
	require.Equal(t, ids[:3], w.etcd.members[:3])
}

// All pods restart together: every agent starts etcd on its data without waiting; the hook removes
// nothing and changes no replica count while no voter reports.
func TestFailureAllPodsRestartTogether(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	before := append([]api.Member(nil), w.etcd.members...)
	for _, i := range sortedKeys(w.pods) {
		p := w.pods[i]
		p.uid, p.ready = w.newUID("pod"), false
		w.pods[i] = p
	}
	w.now = w.now.Add(10 * time.Minute) // every Lease is stale
	resp := w.sync()
	require.Equal(t, api.PhaseDegraded, resp.Status.Phase)
	require.Equal(t, "True/NoHealthyVoter", w.condition(api.CondQuorumLost))
	require.Equal(t, 3, w.replicas())
	require.Empty(t, w.jobNames(w.name+"-rm-"))
	w.converge(40)
	require.Empty(t, w.jobNames(w.name+"-rm-"))
	for k := range before {
		require.Equal(t, before[k].ID, w.etcd.members[k].ID, "members came back with their data")
	}
}

// A 2-voter cluster (every 1 -> 3 grow passes through it) loses one voter: no removal is attempted.
func TestFailureTwoVotersLoseOne(t *testing.T) {
	w := newWorld(t, 1)
	w.converge(30)
	w.setSpec(func(s *api.ClusterSpec) { s.Size = ptr(int32(3)) })
	for n := 0; n < 20 && len(w.voterOrdinals()) < 2; n++ {
		w.step(5 * time.Second)
	}
	require.Equal(t, []int{0, 1}, w.voterOrdinals())
	w.noJobs = true
	w.down[1] = true
	for n := 0; n < 30; n++ {
		w.step(time.Minute)
		require.Empty(t, w.jobNames(w.name+"-rm-"), "no removal without quorum")
		require.GreaterOrEqual(t, w.replicas(), 2)
	}
	require.Equal(t, "True/NoHealthyVoter", w.condition(api.CondQuorumLost))
	w.down[1] = false
	w.noJobs = false
	w.converge(60)
	require.Equal(t, []int{0, 1, 2}, w.voterOrdinals())
}

// Member at ordinal 2 dead and removed, user lowers size: replicas must not drop onto live ordinal 3.
func TestFailureDeadMemberRemovedThenSizeLowered(t *testing.T) {
	w := newWorld(t, 5)
	w.converge(80)
	w.down[2] = true
	removed := false
	for n := 0; n < 20 && !removed; n++ {
		w.step(time.Minute)
		removed = w.etcd.byPeer(w.peerURL(2)) == nil
	}
	require.True(t, removed, "a dead voter is removed when quorum allows")
	w.setSpec(func(s *api.ClusterSpec) { s.Size = ptr(int32(3)) })
	for n := 0; n < 40; n++ {
		w.step(5 * time.Second)
		for _, i := range w.voterOrdinals() {
			require.Greater(t, w.replicas(), i)
		}
	}
	require.Equal(t, []int{0, 1}, w.voterOrdinals(), "3 and 4 left; 2 waits for its pod")
	require.Equal(t, 3, w.replicas())
	w.down[2] = false
	w.converge(40)
	require.Equal(t, []int{0, 1, 2}, w.voterOrdinals())
}

// kubectl scale of the StatefulSet by hand: the hook restores replicas; volumes are kept and the pods
// come back with their data (same member IDs, no remove or volume Jobs).
func TestFailureKubectlScaleByHand(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	before := append([]api.Member(nil), w.etcd.members...)
	w.sts()["spec"].(map[string]any)["replicas"] = float64(1)
	w.stsGen++
	w.controllers()
	require.Len(t, w.pods, 1)
	w.converge(40)
	require.Equal(t, 3, w.replicas())
	require.Len(t, w.pvcs, 3)
	require.Empty(t, w.jobNames(w.name+"-"))
	for k := range before {
		require.Equal(t, before[k].ID, w.etcd.members[k].ID)
	}
}

// Version bump while a member is down: no pod restarts until quorum allows it; then the roll completes.
func TestFailureVersionBumpWhileMemberDown(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Version = "3.6.15"
	w.converge(60)
	uids := map[int]string{}
	for i, p := range w.pods {
		uids[i] = p.uid
	}
	w.down[1] = true
	w.step(5 * time.Second)
	w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.6.16" })
	for n := 0; n < 20; n++ {
		w.step(5 * time.Second)
		require.Equal(t, 3, w.partition(), "no pod may restart while one voter of three is down")
		for i, p := range w.pods {
			require.Equal(t, uids[i], p.uid)
		}
	}
	require.Equal(t, api.PhaseDegraded, w.status.Phase)
	w.down[1] = false
	w.converge(80)
	for _, p := range w.pods {
		require.Equal(t, "quay.io/coreos/etcd:v3.6.16", p.image)
	}
	require.Equal(t, "3.6.16", w.status.CurrentVersion)
}

// A bad image tag: the first updated pod never becomes healthy, the roll stops there, and reverting
// the version replaces that pod; no member is lost.
func TestFailureBadImageReverted(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Version = "3.6.16"
	w.converge(60)
	ids := append([]api.Member(nil), w.etcd.members...)
	w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.6.17" })
	w.badImage = "quay.io/coreos/etcd:v3.6.17"
	for n := 0; n < 8; n++ {
		w.step(5 * time.Second)
	}
	require.Equal(t, 2, w.partition(), "the roll stops at the broken pod")
	require.Equal(t, w.badImage, w.pods[2].image)
	require.Equal(t, "quay.io/coreos/etcd:v3.6.16", w.pods[1].image)
	w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.6.16" })
	w.converge(60)
	for _, p := range w.pods {
		require.Equal(t, "quay.io/coreos/etcd:v3.6.16", p.image)
	}
	require.Equal(t, ids, w.etcd.members)
}

// EtcdCluster deleted and re-created with the same name: the new cluster refuses the old volumes, and
// deletes none of them.
func TestFailureRecreatedWithSameName(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	oldUID := w.uid
	// Deletion: children are garbage collected, volumes stay (Retain).
	w.desired = map[string]map[string]map[string]any{}
	w.pods, w.leases, w.jobs = map[int]*simPod{}, map[int]*simLease{}, map[string]*simJob{}
	w.status = api.ClusterStatus{}
	w.stsGen, w.stsSeen, w.stsSpec = 0, 0, ""
	w.uid = "2d4b9c61-7e0a-4f3b-8c2d-5a6e9f1b3c47"
	w.etcd = simEtcd{nextID: 0x1234}
	for n := 0; n < 10; n++ {
		w.step(5 * time.Second)
	}
	require.Equal(t, api.PhaseFailed, w.status.Phase)
	require.Equal(t, "True/VolumeOfAnotherCluster", w.condition(api.CondForeignData))
	require.Equal(t, 1, w.replicas(), "nothing grows before the seed bootstraps")
	require.Len(t, w.pvcs, 3)
	require.Empty(t, w.jobNames(w.name+"-"))
	for _, c := range w.pvcs {
		require.Equal(t, oldUID, c.clusterUID)
	}
}

// Status wiped: the cluster is still bootstrapped and nothing starts "new".
func TestFailureStatusWiped(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	w.status = api.ClusterStatus{}
	delete(w.desired[wire.KeyConfigMap], w.name+"-config")
	resp := w.sync()
	require.True(t, resp.Status.Bootstrapped)
	require.Equal(t, "cdf818194e3a8c32", resp.Status.ClusterID)
	for i := 0; i < 3; i++ {
		require.Nil(t, w.leaseAnn(i)[api.AnnBootstrap])
	}
	w.converge(20)
	require.Equal(t, []int{0, 1, 2}, w.voterOrdinals())
}

// A learner that never catches up is removed after its deadline, and the join is retried.
func TestFailureLearnerNeverCatchesUp(t *testing.T) {
	w := resizing(t, 3, 4)
	w.noPromote[3] = true
	var first string
	for n := 0; n < 6; n++ {
		w.step(5 * time.Second)
		if m := w.etcd.byPeer(w.peerURL(3)); m != nil && first == "" {
			first = m.ID
		}
	}
	require.NotEmpty(t, first)
	var removal string
	for n := 0; n < 15 && removal == ""; n++ {
		w.step(time.Minute)
		for _, name := range w.jobNames(w.name + "-rm-" + first) {
			removal = name
		}
	}
	require.NotEmpty(t, removal, "the stuck learner is removed after learnerPromotionSeconds")
	require.Equal(t, "stuck-learner", w.desired[wire.KeyJob][removal]["metadata"].(map[string]any)["annotations"].(map[string]any)[api.AnnJobReason])
	require.Equal(t, "False/StepDeadlineExceeded", w.condition(api.CondProgressing))
	w.noPromote[3] = false
	w.converge(40)
	m := w.etcd.byPeer(w.peerURL(3))
	require.NotNil(t, m)
	require.NotEqual(t, first, m.ID, "the retried join has a new member ID")
	require.Equal(t, []int{0, 1, 2, 3}, w.voterOrdinals())
}
