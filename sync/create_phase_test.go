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
