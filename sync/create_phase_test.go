package sync

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

// A normal create of 1, 3, 5 and 9 members never reports the Degraded phase, a true Degraded condition
// or QuorumLost on any sync: the seed not having reported yet and learners on their way in are the normal
// course of a create (issue: a user watching `kubectl get -w` was told a new cluster was degraded).
func TestCreateNeverReportsDegraded(t *testing.T) {
	for _, size := range []int32{1, 3, 5, 9} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			w := newWorld(t, size)
			w.readyLag = true
			var phases []string
			for i := 0; i < 200; i++ {
				st := w.step(2 * time.Second).Status
				if len(phases) == 0 || phases[len(phases)-1] != st.Phase {
					phases = append(phases, st.Phase)
				}
				require.NotEqual(t, api.PhaseDegraded, st.Phase, "sync %d: %s", i, st.Message)
				require.NotContains(t, w.condition(api.CondDegraded), "True/", "sync %d: %s", i, st.Message)
				require.Empty(t, w.condition(api.CondQuorumLost), "sync %d", i)
				if st.Phase == api.PhaseRunning && w.stable() {
					break
				}
			}
			require.True(t, w.stable())
			require.Equal(t, api.PhaseRunning, phases[len(phases)-1], "phases %v", phases)
			require.Equal(t, api.PhaseCreating, phases[0], "phases %v", phases)
		})
	}
}

// Normal day-2 steps (grow 3→5, shrink 5→3, a rolling upgrade) never report the Degraded phase either:
// a learner on its way in, a pod the roll itself restarted, a removed member's volume being deleted are
// the course of the step (the e2e timeline saw Degraded at every join and every roll step).
func TestNormalStepsNeverReportDegraded(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Version = "3.6.16"
	w.readyLag = true
	w.converge(60)
	for _, change := range []struct {
		name string
		edit func(*api.ClusterSpec)
	}{
		{"grow to 5", func(s *api.ClusterSpec) { s.Size = ptr(int32(5)) }},
		{"shrink to 3", func(s *api.ClusterSpec) { s.Size = ptr(int32(3)) }},
		{"upgrade to 3.7.3", func(s *api.ClusterSpec) { s.Version = "3.7.3" }},
	} {
		w.setSpec(change.edit)
		var phases []string
		for i := 0; i < 200; i++ {
			st := w.step(2 * time.Second).Status
			if len(phases) == 0 || phases[len(phases)-1] != st.Phase {
				phases = append(phases, st.Phase)
			}
			require.NotEqual(t, api.PhaseDegraded, st.Phase, "%s, sync %d: %s (phases %v)", change.name, i, st.Message, phases)
			require.NotContains(t, w.condition(api.CondDegraded), "True/", "%s, sync %d: %s", change.name, i, st.Message)
			if st.Phase == api.PhaseRunning && w.stable() {
				break
			}
		}
		require.True(t, w.stable(), change.name)
		require.Equal(t, api.PhaseRunning, phases[len(phases)-1], "%s: phases %v", change.name, phases)
	}
}
