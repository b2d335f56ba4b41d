package api

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// What the hook writes, the agent reads back as it was: both sides share one definition.
func TestIntentRoundTrip(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	fp := strings.Repeat("ab", 32)
	for _, in := range []Intent{
		{},
		{Kind: IntentMember, Since: "2026-11-26T11:00:00Z"},
		{Kind: IntentMember, Since: "2026-11-26T11:00:00Z", Seed: true, Join: NewJoinWindow(now, 10*time.Minute), Defrag: "now:t1",
			Renewal: RenewalMark("r"), CARotation: CARotationIntent{Mark: RenewalMark("c"), Phase: CAPhaseSign}, CARestart: fp, PeerScheme: "https"},
		{Kind: IntentLeave, Since: "2026-11-26T11:00:00Z", CARotation: CARotationIntent{Mark: RenewalMark("c"), Phase: CAPhaseTrust, Carry: RenewalMark("d")}},
	} {
		got, problems := ParseIntent(in.Annotations())
		require.Empty(t, problems)
		require.Equal(t, in, got)
	}
}

// A value the hook could not have written is left out and named; an unknown kind is kept for the
// reader to judge.
func TestParseIntentDistrustsHandEdits(t *testing.T) {
	in, problems := ParseIntent(map[string]string{
		AnnIntent: "drain", AnnRenewal: "renew-please", AnnCARotation: "x sign", AnnCARestart: "not-a-fingerprint",
		AnnPeerScheme: "ftp", AnnAuthDeclared: "not-a-hash", AnnJoinPermitted: "yesterday", AnnJoinDeadline: "tomorrow",
	})
	require.Equal(t, Intent{Kind: "drain"}, in)
	require.Len(t, problems, 6)
	for i, want := range []string{AnnRenewal + ` "renew-please" is not a renewal mark`, AnnCARotation,
		AnnCARestart + ` "not-a-fingerprint" is not a list of CA fingerprints`, AnnPeerScheme,
		AnnAuthDeclared + ` "not-a-hash" is not an auth hash`, "join"} {
		require.Contains(t, problems[i], want)
	}
}
