package api

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The recovery intent as the hook writes it reads back; anything else is refused, never half-read.
func TestParseRecoverIntent(t *testing.T) {
	in := RecoverIntent{Token: RecoveryToken("8e9e05c521647a5e", 1234), Role: RecoverSurvivor, MemberID: "8e9e05c521647a5e"}
	got, err := ParseRecoverIntent(in.String())
	require.NoError(t, err)
	require.Equal(t, in, got)
	none, err := ParseRecoverIntent("")
	require.NoError(t, err)
	require.Zero(t, none)
	for _, bad := range []string{
		"8e9e05c521647a5e@1234 survivor",                // no member
		"8e9e05c521647a5e@1234 leader 8e9e05c521647a5e", // no such role
		"x@1 fence 8e9e05c521647a5e",                    // not a member ID in the token
		"8e9e05c521647a5e@-1 fence 8e9e05c521647a5e",
		"8e9e05c521647a5e fence 8e9e05c521647a5e", // no revision
		"8e9e05c521647a5e@1 fence zz",
		"8e9e05c521647a5e@1 fence 8e9e05c521647a5e extra",
	} {
		_, err := ParseRecoverIntent(bad)
		require.Error(t, err, bad)
	}
	ann := Intent{Kind: IntentMember, Recover: in}.Annotations()
	parsed, problems := ParseIntent(ann)
	require.Empty(t, problems)
	require.Equal(t, in, parsed.Recover)
	_, problems = ParseIntent(map[string]string{AnnIntent: IntentMember, AnnRecover: "force everything"})
	require.Len(t, problems, 1)
}

func TestQuorumLossMode(t *testing.T) {
	s := Defaulted(ClusterSpec{})
	require.Equal(t, QuorumLossManual, s.QuorumLossMode())
	s.Backup = &BackupSpec{Destination: "s3://b", CredentialsSecret: "c", RestoreOnQuorumLoss: true}
	require.Equal(t, QuorumLossFromBackup, s.QuorumLossMode(), "the field from before spec.recovery")
	require.Empty(t, validateRecovery(s))
	s.Recovery = &RecoverySpec{QuorumLoss: QuorumLossFromSurvivor}
	require.Equal(t, QuorumLossFromSurvivor, s.QuorumLossMode())
	ps := validateRecovery(s)
	require.Len(t, ps, 1)
	require.Contains(t, ps[0].Message, "contradicts spec.backup.restoreOnQuorumLoss")
	s.Backup = nil
	require.Empty(t, validateRecovery(s))
	s.Recovery.QuorumLoss = QuorumLossFromBackup
	require.Contains(t, validateRecovery(s)[0].Message, "needs spec.backup")
	s.Recovery.QuorumLoss = "Automatic"
	require.Equal(t, "InvalidRecovery", validateRecovery(s)[0].Reason)
}
