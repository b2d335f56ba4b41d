package sync

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

func TestQuorumRule(t *testing.T) {
	mk := func(voters, healthy int, targetHealthy, learner bool) bool {
		var members []*facts.Member
		for i := 0; i < voters; i++ {
			members = append(members, &facts.Member{Member: api.Member{ID: api.FormatID(uint64(i + 1))}, Healthy: i < healthy})
		}
		target := members[voters-1]
		if targetHealthy {
			target = members[0]
		}
		if learner {
			target = &facts.Member{Member: api.Member{ID: "l", Learner: true}}
		}
		f := &facts.Facts{Truth: facts.TruthOf(members)}
		return steps.QuorumAllowsRemoving(f, target)
	}
	for _, tc := range []struct {
		voters, healthy int
		targetHealthy   bool
		learner         bool
		ok              bool
	}{
		{3, 3, true, false, true},   // leave from a healthy 3
		{3, 2, true, false, false},  // leave a healthy one while one is down: 1 of 2 left
		{3, 2, false, false, true},  // remove the dead one: 2 of 2 left
		{2, 1, false, false, false}, // 2 voters, 1 down: no removal (docs/design/11-failure-sequences.md §11)
		{2, 2, true, false, true},   // 2 -> 1 when both healthy
		{1, 1, true, false, false},  // never the last voter
		{5, 3, false, false, true},  // 3 of 5, remove a dead: 3 of 4
		{4, 2, false, false, false}, // 2 of 4 is no quorum
		{3, 1, false, true, true},   // a learner always
	} {
		require.Equal(t, tc.ok, mk(tc.voters, tc.healthy, tc.targetHealthy, tc.learner), "%+v", tc)
	}
}

func TestBackoff(t *testing.T) {
	require.Equal(t, 30e9, float64(steps.Backoff(1)))
	require.Equal(t, 60e9, float64(steps.Backoff(2)))
	require.Equal(t, 600e9, float64(steps.Backoff(9)))
}
