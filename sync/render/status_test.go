package render

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// A message over the bound is cut on a character boundary and says how much was left out
// (TestStatusMessagesAreBounded in package sync checks a whole answer).
func TestBoundMessage(t *testing.T) {
	long := strings.Repeat("é", 3000) // 6000 bytes: cut inside a two-byte character
	msg := boundMessage(long)
	require.LessOrEqual(t, len(msg), MaxMessageBytes)
	require.True(t, utf8.ValidString(msg), "cut on a character boundary")
	require.Contains(t, msg, "more bytes")
	require.Equal(t, "short", boundMessage("short"))
}
