package sync

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// defragIntents lists the ordinals whose rendered Lease asks for a defragmentation.
func defragIntents(w *world) map[int]string { return leaseAnnotation(w, api.AnnDefrag) }

// leaseAnnotation is the hook-owned annotation key on the rendered member Leases, by ordinal, where set.
func leaseAnnotation(w *world, key string) map[int]string {
	out := map[int]string{}
	for i := range 9 {
		if v, _ := w.leaseIntent(i)[key].(string); v != "" {
			out[i] = v
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
	// The pass over, its value is recorded: the annotation stays, yet the schedule is what is due again.
	for range 3 {
		w.step(5 * time.Second)
	}
	data := w.desired[wire.KeyConfigMap][w.names().ConfigMap()]["data"].(map[string]any)
	require.Equal(t, "1", data[api.ConfigKeyDefragNowDone])
	require.Empty(t, defragIntents(w), "a completed on-demand pass is not repeated")
	w.step(16 * time.Hour)           // past the next 03:00
	w.defragAt = map[int]time.Time{} // the files fragmented again
	seen = map[int]bool{}
	for range 40 {
		w.step(5 * time.Second)
		for i, tok := range defragIntents(w) {
			require.Equal(t, "schedule:2026-01-02T03:00:00Z", tok)
			seen[i] = true
		}
	}
	require.Len(t, seen, 5, "the schedule's pass, not the completed on-demand one")
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
		tok, forced := steps.DefragPass(&facts.Facts{Now: at, Parent: &api.EtcdCluster{}}, steps.DefragInput{Spec: api.Defaulted(w.spec), HasSpec: true})
		require.Equal(t, tc.want, tok, tc.schedule)
		require.False(t, forced)
	}
}

// NOSPACE raised by two members while every file is at the quota: the member that did not raise it is
// defragmented first, then each raiser (the follower, then the leader), so that no member is left at
// the quota to raise it again once writes are let in; the same token recovers a second occurrence
// although every member reported it done. Data that fills the quota itself leaves the alarm raised.
func TestNoSpaceRecoveryPass(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(80)
	leader := -1
	for i := range 3 {
		if w.names().Pod(i) == w.status.Leader {
			leader = i
		}
	}
	follower, other := (leader+1)%3, (leader+2)%3
	pass := func(what string) []int {
		var order []int
		for range 20 {
			w.step(5 * time.Second)
			asked := defragIntents(w)
			require.LessOrEqual(t, len(asked), 1, "%s: one member at a time: %v", what, asked)
			for i, tok := range asked {
				require.Equal(t, api.NoSpacePass, tok)
				if len(order) == 0 || order[len(order)-1] != i {
					order = append(order, i)
				}
			}
		}
		return order
	}
	for occurrence := 1; occurrence <= 2; occurrence++ {
		// The files grew to the quota again (etcd's default, 2 GiB); compacted, 100 MiB are in use.
		w.dbSize, w.dbSizeInUse, w.defragAt = api.DefaultQuotaBackendBytes+1<<16, 100<<20, map[int]time.Time{}
		w.alarms = []string{api.AlarmNoSpace + "@" + w.data[leader], api.AlarmNoSpace + "@" + w.data[follower]}
		order := pass(fmt.Sprintf("occurrence %d", occurrence))
		require.Equal(t, []int{other, follower, leader}, order, "occurrence %d: the member at the quota that did not raise it, then the raisers, the leader last", occurrence)
		require.Empty(t, w.alarms)
		require.Nil(t, meta.FindStatusCondition(w.status.Conditions, api.CondDatabaseFull))
		require.Nil(t, meta.FindStatusCondition(w.status.Conditions, api.CondDefragmenting))
	}

	// A member whose file has room is not defragmented for another's alarm.
	w.dbSize, w.dbSizeInUse, w.defragAt = 500<<20, 100<<20, map[int]time.Time{}
	w.alarms = []string{api.AlarmNoSpace + "@" + w.data[follower]}
	require.Equal(t, []int{follower}, pass("one raiser"))
	require.Empty(t, w.alarms)

	// The data itself fills the quota: defragmenting gives nothing back, the alarm stays (a member at a
	// time is still asked: its agent retries, at most every few minutes) and DatabaseFull says so.
	w.dbSize, w.dbSizeInUse, w.defragAt = api.DefaultQuotaBackendBytes+1<<16, api.DefaultQuotaBackendBytes, map[int]time.Time{}
	w.alarms = []string{api.AlarmNoSpace + "@" + w.data[follower]}
	require.NotEmpty(t, pass("data at the quota"))
	require.Equal(t, []string{api.AlarmNoSpace + "@" + w.data[follower]}, w.alarms)
	c := meta.FindStatusCondition(w.status.Conditions, api.CondDatabaseFull)
	require.NotNil(t, c)
	require.Equal(t, metav1.ConditionTrue, c.Status)
}

// askOneHeld builds a settled 3-member world at version (empty: the default) whose files are mostly free,
// asks for a scheduled pass whose agents never execute it (noDefrag), and returns the world and the one
// member asked.
func askOneHeld(t *testing.T, version string) (*world, int) {
	t.Helper()
	w := newWorld(t, 3)
	if version != "" {
		w.spec.Version = version
	}
	w.converge(80)
	w.dbSize, w.dbSizeInUse = 1<<30, 300<<20
	w.noDefrag = true
	w.setSpec(withDefrag("0 3 * * *"))
	w.step(5 * time.Second)
	w.step(5 * time.Second)
	asked := defragIntents(w)
	require.Len(t, asked, 1)
	for i := range asked {
		return w, i
	}
	return w, -1
}

// The member the last answer asked keeps its turn before its agent says it started: a new leader that
// reorders the turns must not make the hook ask a second member beside it.
func TestDefragAskedMemberKeepsTurn(t *testing.T) {
	w, first := askOneHeld(t, "")
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

// A pass replaced while a member executes it (defrag-now changed; the same holds for a schedule firing
// again or NOSPACE): that member finishes the old pass with no other member asked beside it, then the
// new pass goes over every member, one at a time.
func TestDefragReplacedPassFinishesFirst(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(80)
	w.dbSize, w.dbSizeInUse = 1<<30, 300<<20
	w.slowDefrag = true
	w.parentAnn = map[string]string{api.AnnDefragNow: "1"}
	first := -1
	for range 4 {
		w.step(5 * time.Second)
		for i := range w.defragRunning {
			first = i
		}
		if first >= 0 {
			break
		}
	}
	require.GreaterOrEqual(t, first, 0, "a member started pass now:1")
	w.parentAnn = map[string]string{api.AnnDefragNow: "2"}
	w.step(5 * time.Second)
	require.Equal(t, map[int]string{first: "now:1"}, defragIntents(w), "the member executing now:1 keeps its turn, nobody else is asked")
	c := meta.FindStatusCondition(w.status.Conditions, api.CondDefragmenting)
	require.NotNil(t, c)
	require.Contains(t, c.Message, "finishes pass now:1 first")
	seen := map[int]bool{}
	for range 40 {
		w.step(5 * time.Second)
		asked := defragIntents(w)
		require.LessOrEqual(t, len(asked), 1, "one member at a time: %v", asked)
		require.LessOrEqual(t, len(w.defragRunning), 1, "one member executing at a time: %v", w.defragRunning)
		for i, tok := range asked {
			if tok == "now:2" {
				seen[i] = true
			}
		}
	}
	require.Len(t, seen, 3, "pass now:2 went over every member")
	for i := range 3 {
		require.Equal(t, "now:2", w.defragDone[i])
	}
}

// A member defragmenting (asked, its agent not done) holds the planned steps that would take a second
// member out of service beside it: a roll restarts no healthy pod, a grow permits no join; both go on
// once it is done, and the rest of the pass waits for them in turn.
func TestDefragHoldsRollAndGrow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*api.ClusterSpec)
		held   string
		done   func(w *world) bool
	}{
		{"roll", func(s *api.ClusterSpec) { s.Version = "3.6.16" }, "to finish defragmenting before restarting",
			func(w *world) bool { return w.status.CurrentVersion == "3.6.16" }},
		{"grow", func(s *api.ClusterSpec) { s.Size = ptr(int32(4)) }, "to finish defragmenting before demo-3 joins",
			func(w *world) bool { return len(w.etcd.members) == 4 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := askOneHeld(t, "3.6.15")
			uids := map[int]string{}
			for i, p := range w.pods {
				uids[i] = p.uid
			}
			w.setSpec(tc.change)
			for range 5 {
				w.step(5 * time.Second)
				for i, p := range w.pods {
					if uids[i] != "" {
						require.Equal(t, uids[i], p.uid, "no pod restarted while a member defragments")
					}
				}
				require.Len(t, w.etcd.members, 3, "no member added while a member defragments")
			}
			c := meta.FindStatusCondition(w.status.Conditions, api.CondProgressing)
			require.NotNil(t, c)
			require.Contains(t, c.Message, tc.held)
			w.noDefrag = false
			for range 60 {
				w.step(5 * time.Second)
				require.LessOrEqual(t, len(defragIntents(w)), 1)
			}
			require.True(t, tc.done(w), "the step went on once the member was done")
			require.GreaterOrEqual(t, len(w.defragDone), 3, "and the pass finished after it (a member that joined meanwhile takes part)")
		})
	}
}

// A NOSPACE alarm of a member removed since (etcd keeps it, and refuses writes for it): DatabaseFull
// says so, the first follower is asked, its agent disarms it, and the condition goes.
func TestNoSpaceAlarmOfARemovedMember(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(80)
	w.dbSize, w.dbSizeInUse = 100<<20, 50<<20
	w.alarms = []string{api.AlarmNoSpace + "@1234567890abcdef"}
	var asked map[int]string
	for range 4 {
		w.step(5 * time.Second)
		if asked = defragIntents(w); len(asked) > 0 {
			break
		}
	}
	require.NotNil(t, meta.FindStatusCondition(w.status.Conditions, api.CondDatabaseFull))
	require.Len(t, asked, 1)
	for i, tok := range asked {
		require.Equal(t, api.NoSpacePass, tok)
		require.NotEqual(t, w.status.Leader, w.names().Pod(i), "a follower is asked")
	}
	for range 4 {
		w.step(5 * time.Second)
	}
	require.Empty(t, w.alarms)
	require.Nil(t, meta.FindStatusCondition(w.status.Conditions, api.CondDatabaseFull))
	require.Empty(t, defragIntents(w))
}

// A member asked to defragment whose etcd is down never looks at the request: it keeps neither the
// turn nor the roll waiting for it (the roll now waits for the quorum rule only, as it would without
// any pass), and once the member is back the roll and then the pass go on.
func TestDefragAskedMemberDownHoldsNothing(t *testing.T) {
	w, first := askOneHeld(t, "3.6.15")
	w.down[first] = true
	w.noDefrag = false
	w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.6.16" })
	for range 3 {
		w.step(5 * time.Second)
	}
	c := meta.FindStatusCondition(w.status.Conditions, api.CondProgressing)
	require.NotNil(t, c)
	require.NotContains(t, c.Message, "finish defragmenting", "no step waits for a member that cannot defragment")
	require.Empty(t, defragIntents(w), "the turn is not kept by a member that is down")
	w.down[first] = false
	for range 60 {
		w.step(5 * time.Second)
		require.LessOrEqual(t, len(defragIntents(w)), 1)
	}
	require.Equal(t, "3.6.16", w.status.CurrentVersion)
	require.Len(t, w.defragDone, 3, "and the pass finished afterwards")
}
