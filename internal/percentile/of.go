// Package percentile holds the one percentile the project reports (load test, e2e writers).
package percentile

import (
	"math"
	"slices"
	"time"
)

// Of is the nearest-rank p-th percentile (0 < p <= 100) of d: the smallest value with at least
// p % of the values at or below it; 0 for none. d is not reordered.
func Of(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	rank := int(math.Ceil(float64(len(s)) * p / 100))
	return s[min(max(rank, 1), len(s))-1]
}
