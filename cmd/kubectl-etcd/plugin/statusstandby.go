package plugin

import (
	"fmt"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// standbyLine is status.standby in one line: promoted (where it ended and what may be lost), stopped
// (why, and the object), or following (the revision held of the newest stored, and the lag).
func standbyLine(s *api.StandbyStatus) string {
	if p := s.Promoted; p != nil {
		return fmt.Sprintf("promoted at revision %d (token %q, %s; the primary's newest seen: %d)", p.Revision, p.Token, p.Time.UTC().Format(time.RFC3339), p.PrimaryNewestRevision)
	}
	line := fmt.Sprintf("following %s: revision %d of %d", dash(s.ClusterID), s.Revision, s.Newest)
	if s.Lag != nil {
		line += ", lag " + s.Lag.Duration.String()
	}
	if s.Stop != nil {
		line += fmt.Sprintf("; STOPPED at revision %d: %s %s", s.Stop.Revision, s.Stop.Reason, s.Stop.Object)
	} else if s.Message != "" {
		line += "; " + s.Message
	}
	return line
}
