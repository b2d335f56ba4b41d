package writer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The table names each step's first failed write, so that a count of failures says what they were.
func TestTableNamesFirstFailure(t *testing.T) {
	w := &Writer{stats: map[string]*stats{}}
	w.Step("steady")
	w.stats["steady"].ok, w.stats["steady"].lat = 2, []time.Duration{time.Millisecond, 2 * time.Millisecond}
	w.Step("roll")
	w.stats["roll"].began = time.Date(2026, 11, 28, 0, 42, 8, 350e6, time.UTC)
	w.stats["roll"].ok, w.stats["roll"].lat = 1, []time.Duration{time.Millisecond}
	w.stats["roll"].failed, w.stats["roll"].firstErr, w.stats["roll"].firstAt = 2, "context deadline exceeded", 1500*time.Millisecond
	w.stats["roll"].termBefore, w.stats["roll"].termAfter = 4, 5
	w.stats["roll"].memberBefore, w.stats["roll"].memberAfter = 0xa, 0xb
	w.stats["roll"].elections = 1
	w.Step("resize")
	w.stats["resize"].began = time.Date(2026, 11, 28, 1, 0, 0, 0, time.FixedZone("CET", 3600))
	w.stats["resize"].failed, w.stats["resize"].firstErr, w.stats["resize"].firstAt = 1, "context deadline exceeded", time.Second
	w.stats["resize"].termBefore, w.stats["resize"].termAfter = 5, 5
	w.stats["resize"].memberBefore, w.stats["resize"].memberAfter = 0xb, 0xb
	w.stats["roll"].took, w.stats["steady"].took = time.Second, time.Second
	got := w.Table()
	require.Contains(t, got, "| roll | 1s | 1 | 2 | 1 | 1ms | 1ms |")
	require.Contains(t, got, "first failed write in roll, 1.5s into the step (sent 00:42:09.850 UTC): `context deadline exceeded` (raft term 4 before it, 5 after: leadership moved; answered by member a before it, b after: the connection moved)")
	require.Contains(t, got, "first failed write in resize, 1s into the step (sent 00:00:01.000 UTC): `context deadline exceeded` (raft term 5 before and after it: no election; answered by member b before and after it)")
	require.NotContains(t, got, "first failed write in steady", "a step without failures names none")
}
