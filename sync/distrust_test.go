package sync

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// Inputs that a correct Metacontroller, API server and agent never produce: hand edits, skewed clocks,
// wiped records. Each case failed before the fix it names.

func desiredSTS(w *world) map[string]any {
	return w.desired[wire.KeyStatefulSet][w.name]["spec"].(map[string]any)
}

// quorumLostWorld: a settled 3-member cluster whose every agent died five minutes ago (no member list).
func quorumLostWorld(t *testing.T) *world {
	w := newWorld(t, 3)
	w.converge(60)
	for i := range w.pods {
		w.down[i] = true
	}
	w.now = w.now.Add(5 * time.Minute)
	return w
}

func renderedReplicas(t *testing.T, resp *Response) int {
	for _, c := range resp.Children {
		m := c.(map[string]any)
		if m["kind"] == "StatefulSet" {
			return int(m["spec"].(map[string]any)["replicas"].(float64))
		}
	}
	t.Fatal("no StatefulSet rendered")
	return 0
}

// A member name far above the maximum size in status.members (a hand edit) under quorum loss used to
// set the replica floor: 100,001 children. The ordinal is ignored.
func TestDistrustHugeOrdinalInStatus(t *testing.T) {
	w := quorumLostWorld(t)
	w.status.Members = append(w.status.Members, api.MemberStatus{Name: "demo-100000", ID: "1", Role: api.RoleVoter})
	resp, err := Compute(w.request(), w.now, w.opts)
	require.NoError(t, err)
	require.LessOrEqual(t, renderedReplicas(t, resp), api.MaxSize)
	require.Less(t, len(resp.Children), 40)
}

// kubectl scale to 200000 under quorum loss used to be kept as the floor. It is capped and reported.
func TestDistrustHugeReplicas(t *testing.T) {
	w := quorumLostWorld(t)
	desiredSTS(w)["replicas"] = 200000
	resp, err := Compute(w.request(), w.now, w.opts)
	require.NoError(t, err)
	require.LessOrEqual(t, renderedReplicas(t, resp), api.MaxSize)
	w.status = *resp.Status
	require.Equal(t, "True/ImpossibleInput", w.condition(api.CondInputIgnored))
}

// A renewTime an hour in the future (agent clock ahead, or a hand edit) made that Lease fresh for an
// hour and its report the freshest, outvoting the others. It is now stale and reported.
func TestDistrustRenewTimeFromTheFuture(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	l := w.leases[2]
	l.renewed = w.now.Add(time.Hour)
	l.report.Members = []api.Member{w.etcd.members[0]} // a bogus, shorter member list
	resp, err := Compute(w.request(), w.now, w.opts)
	require.NoError(t, err)
	w.status = *resp.Status
	require.Equal(t, "True/ImpossibleInput", w.condition(api.CondInputIgnored))
	require.Equal(t, 3, renderedReplicas(t, resp))
	for _, m := range resp.Status.Members {
		if m.Name == "demo-2" {
			require.False(t, m.Healthy, "a report from the future is not a healthy report")
		}
	}
}

// A fresh healthy voter whose list has fewer members than another fresh healthy voter's (a stale agent
// cache, a hand edit): lowering decisions take the union, so replicas and the budget do not drop.
func TestUnionOfFreshReportsForLowering(t *testing.T) {
	w := newWorld(t, 5)
	w.converge(100)
	// The newest report (ordinal 0) lists only members 0..2; ordinal 1's slightly older one lists all.
	l := w.leases[0]
	l.renewed = w.now
	var short []api.Member
	for _, m := range w.etcd.members {
		if i := w.ordinalOf(m); i <= 2 {
			short = append(short, m)
		}
	}
	l.report.Members = short
	w.leases[1].renewed = w.now.Add(-time.Second)
	w.setSpec(size(3)) // a shrink: only the union keeps members 3 and 4's pods and the budget
	resp, err := Compute(w.request(), w.now, w.opts)
	require.NoError(t, err)
	require.Equal(t, 5, renderedReplicas(t, resp))
	for _, c := range resp.Children {
		m := c.(map[string]any)
		if m["kind"] == "PodDisruptionBudget" {
			require.EqualValues(t, 3, m["spec"].(map[string]any)["minAvailable"])
		}
	}
}

// Status wiped, ConfigMap deleted, Leases recreated empty and the StatefulSet scaled to 1: the claims of
// ordinals 1 and 2, labelled with this cluster's UID, still prove it was bootstrapped: no seed.
func TestBootstrapLatchCountsOwnClaims(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	w.status = api.ClusterStatus{}
	delete(w.desired, wire.KeyConfigMap)
	desiredSTS(w)["replicas"] = 1
	for i := range w.leases {
		delete(w.leases, i)
	}
	for i := range w.pods {
		if i > 0 {
			delete(w.pods, i)
		}
	}
	w.down[0] = true
	resp, err := Compute(w.request(), w.now, w.opts)
	require.NoError(t, err)
	require.True(t, resp.Status.Bootstrapped)
	for _, c := range resp.Children {
		m := c.(map[string]any)
		if m["kind"] == "Lease" {
			ann, _ := m["metadata"].(map[string]any)["annotations"].(map[string]any)
			require.NotEqual(t, api.BootstrapSeed, ann[api.AnnBootstrap], "no seed mark after bootstrap")
		}
	}
}

// No member reports a version (all containers restarting) and status is wiped: the versions last run,
// from the hook's record, still refuse a downgrade across a minor, which is not recorded as applied.
func TestVersionFloorFromRecord(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	w.status = api.ClusterStatus{}
	for _, l := range w.leases {
		l.report = api.Report{ClusterUID: w.uid, Role: api.RoleNone}
	}
	w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.5.21" })
	resp, err := Compute(w.request(), w.now, w.opts)
	require.NoError(t, err)
	w.status = *resp.Status
	require.Equal(t, "True/UpgradeRefused", w.condition(api.CondInvalidSpec))
	for _, c := range resp.Children {
		m := c.(map[string]any)
		if m["kind"] == "ConfigMap" {
			require.Contains(t, m["data"].(map[string]any)[api.ConfigKeySpec], `"version":"`+api.DefaultVersion+`"`)
		}
	}
}

func leaseAnnotations(w *world, i int) map[string]any {
	return w.desired[wire.KeyLease][w.names().Lease(i)]["metadata"].(map[string]any)["annotations"].(map[string]any)
}

func renderedLeaseAnn(resp *Response, name string) map[string]any {
	for _, c := range resp.Children {
		m := c.(map[string]any)
		if md := m["metadata"].(map[string]any); m["kind"] == "Lease" && md["name"] == name {
			return md["annotations"].(map[string]any)
		}
	}
	return nil
}

// The hook owns the intent half of every Lease and re-derives it: hand-edited values are never passed
// through (a leave on a wanted member, an unknown intent, two join permissions, an endless permission).
func TestHandEditedIntentsNormalised(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	leaseAnnotations(w, 0)[api.AnnIntent] = api.IntentLeave // a wanted, healthy member
	leaseAnnotations(w, 1)[api.AnnIntent] = "memebr"        // a typo
	leaseAnnotations(w, 2)[api.AnnJoinPermitted] = w.now.UTC().Format(time.RFC3339)
	leaseAnnotations(w, 2)[api.AnnJoinDeadline] = w.now.Add(1000 * time.Hour).UTC().Format(time.RFC3339)
	resp, err := Compute(w.request(), w.now, w.opts)
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		ann := renderedLeaseAnn(resp, w.names().Lease(i))
		require.Equal(t, api.IntentMember, ann[api.AnnIntent], "ordinal %d", i)
		require.Nil(t, ann[api.AnnJoinPermitted], "ordinal %d", i)
	}
	w.status = *resp.Status
	require.Equal(t, "True/ImpossibleInput", w.condition(api.CondInputIgnored))
	// Converges with no membership change at all.
	w.apply(resp)
	w.converge(20)
	require.Equal(t, []int{0, 1, 2}, w.voterOrdinals())
}

// Two leave intents on members (a hand edit beside a scale 5 -> 3): never more than one leaver in any
// answer, and the cluster still converges to the three lowest ordinals.
func TestTwoLeavesNormalisedToOne(t *testing.T) {
	w := newWorld(t, 5)
	w.converge(100)
	w.setSpec(size(3))
	leaseAnnotations(w, 3)[api.AnnIntent] = api.IntentLeave
	leaseAnnotations(w, 4)[api.AnnIntent] = api.IntentLeave
	for n := 0; n < 60; n++ {
		resp := w.step(5 * time.Second)
		leaves := 0
		for i := 0; i < 5; i++ {
			if w.etcd.byPeer(w.peerURL(i)) != nil && renderedLeaseAnn(resp, w.names().Lease(i))[api.AnnIntent] == api.IntentLeave {
				leaves++
			}
		}
		require.LessOrEqual(t, leaves, 1, "sync %d", n)
		if resp.Status.Phase == api.PhaseRunning && w.stable() {
			break
		}
	}
	require.Equal(t, []int{0, 1, 2}, w.voterOrdinals())
}

// A healthy voter renews its unchanged report only every api.HealthyRenewSeconds (its pod's readiness
// is its heartbeat): such a Lease is fresh while the pod is Ready, and judged by the interval of a
// member in trouble as soon as it is not.
func TestHealthyVoterRenewsRarely(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	w.leases[2].renewed = w.now.Add(-170 * time.Second)
	healthy := func() bool {
		resp, err := Compute(w.request(), w.now, w.opts)
		require.NoError(t, err)
		for _, m := range resp.Status.Members {
			if m.Name == w.names().Pod(2) {
				return m.Healthy
			}
		}
		t.Fatal("member 2 not in status")
		return false
	}
	require.True(t, healthy(), "a 170 s old healthy voter report with its pod Ready is current")
	w.pods[2].ready = false
	require.False(t, healthy(), "with the pod not Ready the report is judged stale")
}

// Dead needs both clocks: deadMemberSeconds without a renewal and without a Ready pod. A healthy
// voter's Lease is routinely older than deadMemberSeconds, so a readiness blip alone must not make it
// dead (and replaced).
func TestReadinessBlipIsNotDeath(t *testing.T) {
	w := newWorld(t, 5)
	w.setSpec(func(s *api.ClusterSpec) { s.Timeouts.DeadMemberSeconds = ptr(int32(60)) })
	w.converge(80)
	deadJob := func() bool {
		resp, err := Compute(w.request(), w.now, w.opts)
		require.NoError(t, err)
		for _, c := range resp.Children {
			m := c.(map[string]any)
			if m["kind"] == "Job" && m["metadata"].(map[string]any)["annotations"].(map[string]any)[api.AnnJobReason] == "dead" {
				return true
			}
		}
		return false
	}
	p := w.pods[2]
	w.leases[2].renewed = w.now.Add(-300 * time.Second)
	p.ready, p.readyWas, p.readyUID, p.readyAt = false, false, p.uid, w.now.Add(-5*time.Second)
	require.False(t, deadJob(), "not Ready for 5 s: not dead, however old the Lease")
	p.readyAt = w.now.Add(-61 * time.Second)
	require.True(t, deadJob(), "not Ready and not renewed for deadMemberSeconds: dead")
}

// A roll deletes ready pods. A healthy voter renews its Lease every api.HealthyRenewSeconds (180 s), so
// with deadMemberSeconds below that its Lease is routinely older than deadMemberSeconds; the moment its
// pod is being deleted, or gone before the StatefulSet makes the next, must not make it dead: before,
// a sync in that moment removed the member and a new one joined in its place (TestUpgradeEtcdhook,
// deadMemberSeconds 120). It is dead once the renewal its report promised is overdue.
func TestRolledPodIsNotDeath(t *testing.T) {
	w := newWorld(t, 3)
	w.setSpec(func(s *api.ClusterSpec) { s.Timeouts.DeadMemberSeconds = ptr(int32(60)) })
	w.converge(80)
	deadJob := func() bool {
		resp, err := Compute(w.request(), w.now, w.opts)
		require.NoError(t, err)
		for _, c := range resp.Children {
			m := c.(map[string]any)
			if m["kind"] == "Job" && m["metadata"].(map[string]any)["annotations"].(map[string]any)[api.AnnJobReason] == "dead" {
				return true
			}
		}
		return false
	}
	require.True(t, w.leases[2].report.IsVoter() && w.leases[2].report.Healthy, "etcd-2 reports a healthy voter")
	w.leases[2].renewed = w.now.Add(-150 * time.Second)
	p := w.pods[2]
	p.deletingAt = w.now
	require.False(t, deadJob(), "a ready pod asked to go now is not ready for 0 s")
	delete(w.pods, 2)
	require.False(t, deadJob(), "no pod, but the Lease's healthy report is not overdue (renewed 150 s ago, due every 180 s)")
	w.leases[2].renewed = w.now.Add(-211 * time.Second)
	require.True(t, deadJob(), "no pod and the healthy report's renewal overdue: dead")
	w.pods[2] = p
	p.deletingAt = w.now.Add(-61 * time.Second)
	require.True(t, deadJob(), "asked to go 61 s ago, still there, the renewal overdue: dead (a pod stuck terminating on a lost node)")
	p.deletingAt = w.now.Add(-30 * time.Second)
	require.False(t, deadJob(), "asked to go 30 s ago: not ready for less than deadMemberSeconds")
}

// A restart in place asked by a hand edit the agents ignore (not a CA fingerprint list, not a scheme)
// holds no other step: the hook reads the Lease's steps as the agents do (api.ParseIntent). Before, a
// member asked to "restart" to trust "not-a-fingerprint" counted as restarting for ever, and a due
// defragmentation pass waited behind it.
func TestHandEditedRestartsHoldNothing(t *testing.T) {
	for _, edit := range []struct{ key, value string }{{api.AnnCARestart, "not-a-fingerprint"}, {api.AnnPeerScheme, "ftp"}} {
		w := newWorld(t, 3)
		w.converge(60)
		w.dbSize, w.dbSizeInUse = 1<<30, 300<<20
		w.step(5 * time.Second)
		w.setSpec(withDefrag("0 3 * * *"))
		leaseAnnotations(w, 2)[edit.key] = edit.value
		resp, err := Compute(w.request(), w.now, w.opts)
		require.NoError(t, err)
		w.status = *resp.Status
		require.Equal(t, "True/MemberDefragmenting", w.condition(api.CondDefragmenting), "%s=%s holds no pass", edit.key, edit.value)
	}
}
