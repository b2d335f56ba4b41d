package sync

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

func TestBootstrapAndGrowToThree(t *testing.T) {
	// Statically (every member at once, the default for a fresh creation) and from a seed and joins.
	for _, seed := range []bool{false, true} {
		w := newWorld(t, 3)
		w.opts.SeedBootstrap = seed
		w.converge(60)
		require.Equal(t, []int{0, 1, 2}, w.voterOrdinals(), "seed %t", seed)
		require.Equal(t, 3, w.replicas())
		require.Equal(t, api.PhaseRunning, w.status.Phase)
		require.Len(t, w.status.Members, 3)
		require.NotEmpty(t, w.status.Leader)
		require.Equal(t, "cdf818194e3a8c32", w.status.ClusterID)
	}
}

func TestScaleUpAndDown(t *testing.T) {
	w := newWorld(t, 1)
	w.converge(30)
	for _, size := range []int32{3, 5, 3, 1} {
		w.setSpec(func(s *api.ClusterSpec) { s.Size = ptr(size) })
		w.converge(80)
		require.Len(t, w.voterOrdinals(), int(size), "size %d", size)
		require.Equal(t, int(size), w.replicas())
		require.Len(t, w.pvcs, int(size), "volumes of removed members are deleted")
	}
	_ = time.Second
}
