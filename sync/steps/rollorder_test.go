package steps

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRollNext(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pending []int
		leader  int
		want    int
	}{
		{"nothing pending", nil, 0, -1},
		{"the highest first when the leader is not pending", []int{0, 1, 2}, -1, 2},
		{"the leader at the top is passed over", []int{0, 1, 2}, 2, 1},
		{"the leader in the middle is passed over", []int{2, 0, 1}, 1, 2},
		{"the leader's pod last", []int{2}, 2, 2},
		{"the leader's pod waits for every other", []int{0, 4}, 4, 0},
		{"a leader already rolled changes nothing", []int{0, 1}, 3, 1},
		{"leadership moved onto a pending pod mid-roll: that pod goes last", []int{0, 1, 2}, 0, 2},
		{"unknown leader: the highest", []int{1, 3}, -1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, RollNext(tc.pending, tc.leader))
		})
	}
}

// A whole roll under a leader that stays put replaces every pod once, the leader's last.
func TestRollNextWholeRoll(t *testing.T) {
	for leader := range 5 {
		pending := []int{0, 1, 2, 3, 4}
		var order []int
		for len(pending) > 0 {
			next := RollNext(pending, leader)
			order = append(order, next)
			for k, i := range pending {
				if i == next {
					pending = append(pending[:k], pending[k+1:]...)
					break
				}
			}
		}
		require.Len(t, order, 5)
		require.Equal(t, leader, order[4], "leader %d: order %v", leader, order)
	}
}
