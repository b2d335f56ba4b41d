package api

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRemovalAllowed(t *testing.T) {
	for _, tc := range []struct {
		voters, healthy        int
		learner, targetHealthy bool
		ok                     bool
	}{
		{1, 0, true, false, true},   // a learner always
		{1, 1, false, true, false},  // never the last voter
		{3, 3, false, true, true},   // 2 of 2 remain
		{3, 2, false, false, true},  // the dead one goes: 2 of 2 remain
		{3, 2, false, true, false},  // a healthy one of 2 healthy: 1 of 2 would remain
		{5, 3, false, false, true},  // 3 of 4 remain
		{5, 3, false, true, false},  // 2 of 4 would remain
		{4, 3, false, true, true},   // 2 of 3 remain
		{2, 2, false, true, true},   // 1 of 1 remains
		{2, 1, false, false, false}, // two voters, one healthy: no quorum to act on
		{3, 1, false, false, false}, // no quorum now
	} {
		err := RemovalAllowed(tc.voters, tc.healthy, tc.learner, tc.targetHealthy)
		require.Equal(t, tc.ok, err == nil, "%+v: %v", tc, err)
	}
}
