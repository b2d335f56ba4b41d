package backup

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParsePoint(t *testing.T) {
	at := time.Date(2026, 11, 27, 7, 30, 0, 500, time.UTC)
	for _, c := range []struct {
		in      string
		want    Point
		problem string
	}{
		{in: "", want: Point{}},
		{in: " 12345 ", want: Point{Revision: 12345}},
		{in: "2026-11-27T07:30:00.0000005Z", want: Point{Time: at}},
		{in: "2026-11-27T08:30:00.0000005+01:00", want: Point{Time: at}},
		{in: "0", problem: "revisions start at 1"},
		{in: "-4", problem: "revisions start at 1"},
		{in: "yesterday", problem: "neither a revision"},
		{in: "2026-11-27 07:30", problem: "neither a revision"},
	} {
		got, err := ParsePoint(c.in)
		if c.problem != "" {
			assert.ErrorContains(t, err, c.problem, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
		again, err := ParsePoint(got.Value())
		require.NoError(t, err)
		assert.Equal(t, got, again, "Value reads back as the same point")
	}
	assert.Equal(t, "2026-11-27T07:30:00.0000005Z", Point{Time: at.In(time.FixedZone("x", 3600))}.Value(), "one spelling per instant")
}
