package writer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPercentile(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	require.Equal(t, 50*time.Millisecond, percentile(lat, 0.5))
	require.Equal(t, 99*time.Millisecond, percentile(lat, 0.99))
	require.Equal(t, time.Duration(0), percentile(nil, 0.5))
	require.Equal(t, 100*time.Millisecond, lat[0], "the input is not reordered")
}
