package sync

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/etcdhook/etcdhook/api"
)

// defragIntents lists the ordinals whose rendered Lease asks for a defragmentation.
func defragIntents(w *world) map[int]string {
	out := map[int]string{}
	for i := range 9 {
		if tok, _ := w.leaseIntent(i)[api.AnnDefrag].(string); tok != "" {
			out[i] = tok
		}
	}
	return out
}

// A whole pass, each member taking two steps: never two members asked at once, the followers before the
// leader, every member done once, then nothing is asked until the next pass (a new defrag-now value).
func TestDefragPassOneAtATimeLeaderLast(t *testing.T) {
	w := newWorld(t, 5)
	w.converge(120)
	w.dbSize, w.dbSizeInUse = 1<<30, 300<<20
	w.slowDefrag = true
	w.setSpec(withDefrag("0 3 * * *"))
	leader := w.status.Leader
	var order []int
	for range 40 {
		w.step(5 * time.Second)
		asked := defragIntents(w)
		require.LessOrEqual(t, len(asked), 1, "at most one member defragments at a time: %v", asked)
		for i := range asked {
			if len(order) == 0 || order[len(order)-1] != i {
				order = append(order, i)
			}
		}
	}
	require.Len(t, order, 5, "every member once, in turn: %v", order)
	require.Equal(t, leader, w.names().Pod(order[4]), "the leader last")
	require.Len(t, w.defragDone, 5)
	require.Empty(t, defragIntents(w))
	require.Nil(t, meta.FindStatusCondition(w.status.Conditions, api.CondDefragmenting), "the pass is over")
	for _, m := range w.status.Members {
		require.NotNil(t, m.LastDefragTime, m.Name)
		require.Equal(t, m.DBSizeInUse, m.DBSize, "the file shrank to what is in use")
	}

	// The files are compact now: the same schedule asks nobody again; defrag-now does, all of them.
	w.parentAnn = map[string]string{api.AnnDefragNow: "1"}
	seen := map[int]bool{}
	for range 40 {
		w.step(5 * time.Second)
		for i, tok := range defragIntents(w) {
			require.Equal(t, "now:1", tok)
			seen[i] = true
		}
	}
	require.Len(t, seen, 5)
}

// The schedule's latest time is found whatever its period: minutes, daily, monthly.
func TestDefragPassToken(t *testing.T) {
	at := time.Date(2026, 3, 17, 12, 34, 56, 0, time.UTC)
	for _, tc := range []struct{ schedule, want string }{
		{"*/5 * * * *", "schedule:2026-03-17T12:30:00Z"},
		{"0 3 * * *", "schedule:2026-03-17T03:00:00Z"},
		{"0 3 * * 0", "schedule:2026-03-15T03:00:00Z"},
		{"@monthly", "schedule:2026-03-01T00:00:00Z"},
		{"0 0 1 1 *", "schedule:2026-01-01T00:00:00Z"},
	} {
		w := newWorldAt(t, 3, at)
		w.spec.Maintenance.Defrag = &api.DefragSpec{Schedule: tc.schedule}
		p := &plan{f: &facts{now: at, parent: &api.EtcdCluster{}}, spec: api.Defaulted(w.spec), hasSpec: true}
		tok, forced := p.defragPass()
		require.Equal(t, tc.want, tok, tc.schedule)
		require.False(t, forced)
	}
}

// NOSPACE raised by two members: each raiser in turn (the follower first, the leader last) is asked
// with the recovery's token until its alarm is gone, the others not at all; the same token recovers a
// second occurrence although every member reported it done.
func TestNoSpaceRecoveryPass(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(80)
	leader := -1
	for i := range 3 {
		if w.names().Pod(i) == w.status.Leader {
			leader = i
		}
	}
	follower := (leader + 1) % 3
	for occurrence := 1; occurrence <= 2; occurrence++ {
		w.alarms = []string{api.AlarmNoSpace + "@" + w.data[leader], api.AlarmNoSpace + "@" + w.data[follower]}
		var order []int
		for range 20 {
			w.step(5 * time.Second)
			asked := defragIntents(w)
			require.LessOrEqual(t, len(asked), 1, "one member at a time: %v", asked)
			for i, tok := range asked {
				require.Equal(t, api.NoSpacePass, tok)
				if len(order) == 0 || order[len(order)-1] != i {
					order = append(order, i)
				}
			}
		}
		require.Equal(t, []int{follower, leader}, order, "occurrence %d: the raisers only, the leader last", occurrence)
		require.Empty(t, w.alarms)
		require.Nil(t, meta.FindStatusCondition(w.status.Conditions, api.CondDatabaseFull))
	}
}

// The member the last answer asked keeps its turn before its agent says it started: a new leader that
// reorders the turns must not make the hook ask a second member beside it.
func TestDefragAskedMemberKeepsTurn(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(80)
	w.dbSize, w.dbSizeInUse = 1<<30, 300<<20
	w.noDefrag = true
	w.setSpec(withDefrag("0 3 * * *"))
	w.step(5 * time.Second)
	w.step(5 * time.Second)
	asked := defragIntents(w)
	require.Len(t, asked, 1)
	var first int
	for i := range asked {
		first = i
	}
	w.etcd.leader = w.data[first] // leadership moves to the asked member: it would now go last
	for range 3 {
		w.step(5 * time.Second)
		require.Equal(t, map[int]string{first: "schedule:2026-01-01T03:00:00Z"}, defragIntents(w), "the turn stays")
	}
	w.noDefrag = false
	for range 10 {
		w.step(5 * time.Second)
		require.LessOrEqual(t, len(defragIntents(w)), 1)
	}
	require.Len(t, w.defragDone, 3)
}
