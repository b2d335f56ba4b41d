package backup

import (
	"fmt"
	"time"
)

// Point is where a restore ends (issue 27): the keyspace at a revision, or at a time (the newest
// revision the backups hold at or before it). The zero Point is the newest the source holds: a named
// snapshot as it is, or a destination's newest snapshot and the chain of revisions after it.
type Point struct {
	Revision int64
	Time     time.Time
}

// IsZero says whether p names no point (the newest).
func (p Point) IsZero() bool { return p.Revision == 0 && p.Time.IsZero() }

// Check refuses a point that names both a revision and a time, or a revision below 1.
func (p Point) Check() error {
	switch {
	case p.Revision != 0 && !p.Time.IsZero():
		return fmt.Errorf("names both revision %d and time %s: one point only", p.Revision, p.Time.Format(time.RFC3339))
	case p.Revision < 0:
		return fmt.Errorf("revision %d: revisions start at 1", p.Revision)
	}
	return nil
}

// String is the point as the logs and Events name it.
func (p Point) String() string {
	switch {
	case p.Revision > 0:
		return fmt.Sprintf("revision %d", p.Revision)
	case !p.Time.IsZero():
		return "time " + p.Time.UTC().Format(time.RFC3339Nano)
	}
	return "the newest point"
}

// Reaches says whether m's snapshot is at or before p (a candidate to start a restore to p from).
func (p Point) Reaches(m Manifest) bool {
	switch {
	case p.Revision > 0:
		return m.Revision <= p.Revision
	case !p.Time.IsZero():
		return !m.Time.After(p.Time)
	}
	return true
}
