package membership

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
)

// The seed's attempts: a terminal cause ends them at once, naming the spec.restore field; one that may
// pass backs off (5 s doubling to 5 minutes) and says when it gives up; past restoreGiveUp it ends too.
func TestSeedRestoreAttempts(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	field := func(p backup.Point) func(error) string { return func(err error) string { return RefusedField(err, p) } }
	transient := errors.New("dial tcp 10.0.0.9:443: connect: connection refused")

	for _, tc := range []struct {
		name  string
		err   error
		point backup.Point
		want  string
	}{
		{"empty folder", fmt.Errorf("%w: no complete snapshot of ns/x under s3://b/ns/x/", backup.ErrNoSnapshot), backup.Point{}, "spec.restore.from: no such snapshot"},
		{"revision not reached", fmt.Errorf("%w: the backups reach revision 9", backup.ErrPointNotReached), backup.Point{Revision: 12}, "spec.restore.toRevision: no such snapshot for that point"},
		{"time before every snapshot", fmt.Errorf("%w: all later", backup.ErrPointNotReached), backup.Point{Time: at}, "spec.restore.toTime: "},
		{"damaged chain", fmt.Errorf("%w: chunk x is truncated", backup.ErrSnapshotDamaged), backup.Point{Revision: 3}, "spec.restore.from: snapshot damaged"},
		{"no key", fmt.Errorf("chunk y: %w", backup.ErrNoKey), backup.Point{}, "spec.restore.encryption: "},
		{"credentials", fmt.Errorf("s3://b refused the credentials: %w: AccessDenied", backup.ErrCredentials), backup.Point{}, "spec.restore.credentialsSecret: "},
		{"no bucket", fmt.Errorf("s3://b: bucket b does not exist: %w", backup.ErrNoBucket), backup.Point{}, "spec.restore.from: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s seedRestore
			reason, msg, wait := s.failed(tc.err, at, field(tc.point))
			require.Equal(t, api.ReasonRestoreRefused, reason)
			require.Contains(t, msg, tc.want)
			require.Zero(t, wait)
			require.Equal(t, msg, s.refused, "kept: the pod repeats it and never tries again")
		})
	}

	t.Run("transient, then given up", func(t *testing.T) {
		var s seedRestore
		now := at
		var waits []time.Duration
		for {
			reason, msg, wait := s.failed(transient, now, field(backup.Point{}))
			if reason == api.ReasonRestoreRefused {
				require.Contains(t, msg, "gave up after ")
				require.Contains(t, msg, "connection refused")
				break
			}
			require.Equal(t, api.ReasonRestoreFailed, reason)
			require.Contains(t, msg, fmt.Sprintf("attempt %d failed, retrying at %s, until 2026-01-01T13:00:00Z", s.failures, now.Add(wait).Format(time.RFC3339)))
			waits = append(waits, wait)
			now = now.Add(wait)
		}
		require.Equal(t, []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second}, waits[:6])
		for _, w := range waits[6:] {
			require.Equal(t, 5*time.Minute, w)
		}
		require.GreaterOrEqual(t, now.Sub(at), restoreGiveUp)
		require.Less(t, now.Sub(at), restoreGiveUp+5*time.Minute, "ends at the first attempt past the bound")
	})
}
