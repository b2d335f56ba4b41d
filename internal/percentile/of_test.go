package percentile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPercentileNearestRank(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		var out []time.Duration
		for _, v := range vs {
			out = append(out, time.Duration(v)*time.Millisecond)
		}
		return out
	}
	var hundred []time.Duration
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		d    []time.Duration
		p    float64
		want int
	}{
		{hundred, 50, 50}, {hundred, 99, 99}, {hundred, 100, 100}, {hundred, 0.5, 1},
		{ms(15, 20, 35, 40, 50), 30, 20}, {ms(15, 20, 35, 40, 50), 40, 20}, {ms(15, 20, 35, 40, 50), 50, 35},
		{ms(15, 20, 35, 40, 50), 100, 50}, {ms(7), 99, 7}, {ms(3, 1, 2), 50, 2},
	} {
		require.Equal(t, time.Duration(tc.want)*time.Millisecond, Of(tc.d, tc.p), "p%v of %v", tc.p, tc.d)
	}
	require.Zero(t, Of(nil, 50))
	require.Equal(t, 100*time.Millisecond, hundred[0], "the input is not reordered")
}
