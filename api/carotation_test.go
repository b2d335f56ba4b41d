package api

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The rotation annotations are read back as written; values the hook or an agent could not have
// written are refused.
func TestCARotationAnnotations(t *testing.T) {
	fp := func(c string) string { return strings.Repeat(c, 64) }
	m, m2 := RenewalMark("a"), RenewalMark("b")
	for _, r := range []CARotationIntent{{}, {Mark: m, Phase: CAPhaseTrust}, {Mark: m, Phase: CAPhaseDrop, Carry: m2}} {
		got, err := ParseCARotation(r.String())
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
	for _, bad := range []string{"x trust", m + " later", m + " sign x", m, m + " sign " + m2 + " " + m2} {
		_, err := ParseCARotation(bad)
		require.Error(t, err, bad)
	}
	for _, s := range []CASecretState{{}, {Current: fp("a")}, {Current: fp("a"), CurrentMark: m, CurrentCarry: m2, Next: fp("b"), NextMark: m2}} {
		got, ok := ParseCASecretState(s.String())
		require.True(t, ok, s.String())
		require.Equal(t, s, got)
	}
	for _, bad := range []string{"abc", fp("a") + "," + fp("a"), fp("a") + "/xyz", fp("a") + "//" + m, fp("a") + "," + fp("b") + "," + fp("c")} {
		_, ok := ParseCASecretState(bad)
		require.False(t, ok, bad)
	}
	s := CASecretState{Current: fp("b"), CurrentMark: m, CurrentCarry: m2, Next: fp("a")}
	require.Equal(t, fp("a")+","+fp("b"), s.Trust(), "sorted")
	require.True(t, s.Serves(m))
	require.True(t, s.Serves(m2))
	require.False(t, s.Serves(""))
}
