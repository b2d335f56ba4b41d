package sync

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

func withRecovery(mode string) func(*api.ClusterSpec) {
	return func(s *api.ClusterSpec) { s.Recovery = &api.RecoverySpec{QuorumLoss: mode} }
}

// recoverIntents are the etcd.io/recover values the rendered Leases carry, by ordinal.
func recoverIntents(w *world) map[int]string { return leaseAnnotation(w, api.AnnRecover) }

// 3 members, two lost for good, FromSurvivor: nothing before deadMemberSeconds; then the survivor
// restarts alone on its data (same cluster ID) and the others rejoin one at a time as learners.
func TestRecoverFromSurvivor(t *testing.T) {
	w := newWorld(t, 3)
	w.setSpec(withRecovery(api.QuorumLossFromSurvivor))
	w.converge(60)
	id, survivorID := w.etcd.clusterID, w.data[0]
	w.loseVolumes(1, 2)
	for range 50 { // 250 s: below deadMemberSeconds (300 s)
		w.step(5 * time.Second)
		require.Empty(t, recoverIntents(w), "nothing before the lost members count as lost")
	}
	require.NotNil(t, w.status.Recovery)
	require.Equal(t, api.RecoveryWaiting, w.status.Recovery.Phase)
	require.Contains(t, w.status.Recovery.Message, "count as lost after 5m0s")
	seen := map[string]bool{}
	stepAtMostUntil(w, 40, func() bool {
		if rs := w.status.Recovery; rs != nil {
			seen[rs.Phase] = true
		}
		for i, v := range recoverIntents(w) {
			require.Equal(t, 0, i, "only the survivor is asked: no other member holds data")
			require.Equal(t, api.RecoveryToken(survivorID, 100)+" survivor "+survivorID, v)
		}
		// The lost members are listed voters until the survivor restarts alone.
		return seen[api.RecoveryRecovered] && len(w.voterOrdinals()) == 3
	})
	require.True(t, seen[api.RecoveryForcing], "phases seen: %v", seen)
	require.Equal(t, id, w.etcd.clusterID, "the same cluster: its data and ID")
	require.Equal(t, survivorID, w.data[0], "the survivor keeps its member ID")
	require.Len(t, w.voterOrdinals(), 3)
	w.converge(40)
	require.Nil(t, w.status.Recovery, "over once the cluster has its size")
	require.Empty(t, recoverIntents(w))
}

// The survivor's restart takes several looks, its Lease unrenewed meanwhile until it goes stale: the
// plan keeps asking it (never withdraws the intent, never plans anew) until it runs alone.
func TestRecoverSurvivorKeepsItsTurnWhileRestarting(t *testing.T) {
	w := newWorld(t, 3)
	w.setSpec(withRecovery(api.QuorumLossFromSurvivor))
	w.converge(60)
	w.loseVolumes(1, 2)
	w.forceSteps = 10 // 50 s: past the Lease's 30 s
	asked := 0
	stepAtMostUntil(w, 100, func() bool {
		if v, ok := recoverIntents(w)[0]; ok {
			asked++
			require.Contains(t, v, " survivor ")
		} else if asked > 0 && w.recovered[0] == "" {
			t.Fatalf("the survivor's intent was withdrawn while it restarted")
		}
		if w.forcing[0] {
			require.Equal(t, api.RecoveryForcing, w.status.Recovery.Phase)
		}
		return w.recovered[0] != ""
	})
	require.NotEmpty(t, w.recovered[0])
	require.Greater(t, asked, 3, "asked at every look of the restart")
}

// 5 members, three lost: of the two holding data the one with the higher revision survives; the other
// is fenced first and the survivor is asked only once it set its data aside.
func TestRecoverFencesTheOtherFirst(t *testing.T) {
	w := newWorld(t, 5)
	w.setSpec(withRecovery(api.QuorumLossFromSurvivor))
	w.converge(80)
	w.loseVolumes(0, 2, 3)
	w.revision[1], w.revision[4] = 120, 130
	fenced, forced, n := -1, -1, 0
	stepAtMostUntil(w, 120, func() bool {
		n++
		in := recoverIntents(w)
		if v, ok := in[1]; ok && fenced < 0 {
			rc, err := api.ParseRecoverIntent(v)
			require.NoError(t, err)
			require.Equal(t, api.RecoverFence, rc.Role)
			fenced = n
		}
		if v, ok := in[4]; ok && forced < 0 {
			rc, err := api.ParseRecoverIntent(v)
			require.NoError(t, err)
			require.Equal(t, api.RecoverSurvivor, rc.Role)
			require.Equal(t, "", w.data[1], "the other set its data aside before the survivor was asked")
			forced = n
		}
		return forced >= 0 && w.status.Recovery == nil && len(w.voterOrdinals()) == 5
	})
	require.GreaterOrEqual(t, fenced, 0)
	require.Greater(t, forced, fenced, "fenced first")
	require.Len(t, w.etcd.members, 5)
	require.Nil(t, w.status.Recovery)
}

// Manual (the default): the plan is shown and nothing is done until etcd.io/recover-apply names it; a
// value that is not the plan is refused.
func TestRecoverManualNeedsTheToken(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	survivorID := w.data[0]
	w.loseVolumes(1, 2)
	w.parentAnn = map[string]string{api.AnnRecoverApply: "deadbeef@1"}
	for range 80 {
		w.step(5 * time.Second)
	}
	require.Empty(t, recoverIntents(w))
	rs := w.status.Recovery
	require.NotNil(t, rs)
	require.Equal(t, api.RecoveryPlanned, rs.Phase)
	require.Equal(t, "demo-0", rs.Survivor)
	require.Equal(t, api.RecoveryToken(survivorID, 100), rs.Token)
	require.Contains(t, rs.Message, "is not this plan")
	require.Len(t, rs.Members, 3)
	require.Equal(t, "revision 100, raft term 3", rs.Members[0].Holds)
	require.Equal(t, "no data (lost for good)", rs.Members[1].Holds)

	w.parentAnn = map[string]string{api.AnnRecoverApply: rs.Token}
	stepAtMostUntil(w, 60, func() bool { return w.status.Recovery == nil && len(w.voterOrdinals()) == 3 })
	require.Nil(t, w.status.Recovery)
	require.Len(t, w.etcd.members, 3)
}

// One member lost and one merely down (its data may come back): a quorum could come back, nothing is
// planned beyond waiting, whatever the mode.
func TestRecoverNeverWhileAQuorumMayReturn(t *testing.T) {
	w := newWorld(t, 3)
	w.setSpec(withRecovery(api.QuorumLossFromSurvivor))
	w.converge(60)
	w.loseVolumes(2)
	w.down[1] = true
	for range 100 {
		w.step(5 * time.Second)
		require.Empty(t, recoverIntents(w))
	}
	require.NotNil(t, w.status.Recovery)
	require.Equal(t, api.RecoveryWaiting, w.status.Recovery.Phase)
	require.Contains(t, w.status.Recovery.Message, "fewer than a quorum")
}
