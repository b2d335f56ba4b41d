package sync

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

func TestChanges(t *testing.T) {
	cond := func(typ string, on bool, reason, msg string) metav1.Condition {
		s := metav1.ConditionFalse
		if on {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg}
	}
	join3 := cond(api.CondProgressing, true, "MembershipChange", "demo-3 to join the cluster")
	join4 := cond(api.CondProgressing, true, "MembershipChange", "demo-4 to join the cluster")
	stable := cond(api.CondProgressing, false, "Stable", "")
	full := cond(api.CondDatabaseFull, true, "NoSpaceAlarm", "etcd raised NOSPACE")
	ready := cond(api.CondAvailable, true, "QuorumHealthy", "3 of 3")
	readyMore := cond(api.CondAvailable, true, "QuorumHealthy", "3 of 4")
	for _, tc := range []struct {
		name          string
		before, after []metav1.Condition
		want          []Change
	}{
		{"nothing changed", []metav1.Condition{join3, ready}, []metav1.Condition{join3, ready}, nil},
		{"a first status", nil, []metav1.Condition{join3, ready},
			[]Change{{api.CondProgressing, "started", "MembershipChange", "demo-3 to join the cluster"}, {api.CondAvailable, "True", "QuorumHealthy", "3 of 3"}}},
		{"one step after another: the first finished, the next started",
			[]metav1.Condition{join3}, []metav1.Condition{join4},
			[]Change{{api.CondProgressing, "finished", "MembershipChange", "demo-3 to join the cluster"}, {api.CondProgressing, "started", "MembershipChange", "demo-4 to join the cluster"}}},
		{"the last step finished", []metav1.Condition{join4}, []metav1.Condition{stable},
			[]Change{{api.CondProgressing, "finished", "MembershipChange", "demo-4 to join the cluster"}}},
		{"stable stays stable", []metav1.Condition{stable}, []metav1.Condition{stable}, nil},
		{"a message of another condition is not a change", []metav1.Condition{ready}, []metav1.Condition{readyMore}, nil},
		{"dropped", []metav1.Condition{full}, nil, []Change{{api.CondDatabaseFull, "dropped", "NoSpaceAlarm", "etcd raised NOSPACE"}}},
		{"a step condition dropped", []metav1.Condition{cond(api.CondDefragmenting, true, "MemberDefragmenting", "demo-1 defragments")}, nil,
			[]Change{{api.CondDefragmenting, "finished", "MemberDefragmenting", "demo-1 defragments"}}},
		{"turned False", []metav1.Condition{full}, []metav1.Condition{cond(api.CondDatabaseFull, false, "NoAlarm", "")},
			[]Change{{api.CondDatabaseFull, "False", "NoAlarm", ""}}},
		{"an outage is Available turning False, not a condition cleared", []metav1.Condition{ready}, []metav1.Condition{cond(api.CondAvailable, false, "QuorumLost", "")},
			[]Change{{api.CondAvailable, "False", "QuorumLost", ""}}},
		{"a new reason", []metav1.Condition{cond(api.CondAvailable, false, "QuorumLost", "")}, []metav1.Condition{cond(api.CondAvailable, false, "Bootstrapping", "")},
			[]Change{{api.CondAvailable, "reason", "Bootstrapping", ""}}},
		{"a defragmentation's count moved, the member did not: no step changed",
			[]metav1.Condition{cond(api.CondDefragmenting, true, "MemberDefragmenting", "pass p: 1 done, 2 to go; demo-1 defragments")},
			[]metav1.Condition{cond(api.CondDefragmenting, true, "MemberDefragmenting", "pass p: 1 done, 3 to go; demo-1 defragments")}, nil},
	} {
		require.Equal(t, tc.want, Changes(tc.before, tc.after), tc.name)
	}
}
