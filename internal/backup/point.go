package backup

import (
	"fmt"
	"strconv"
	"strings"
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

// ParsePoint reads a point as the etcd.io/restore-to annotation gives it: a revision (decimal, from
// 1) or a time (RFC 3339). Empty is the zero point (the newest).
func ParsePoint(s string) (Point, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Point{}, nil
	}
	if rev, err := strconv.ParseInt(s, 10, 64); err == nil {
		if rev < 1 {
			return Point{}, fmt.Errorf("revision %d: revisions start at 1", rev)
		}
		return Point{Revision: rev}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return Point{}, fmt.Errorf("is neither a revision (a positive integer) nor an RFC 3339 time")
	}
	return Point{Time: t.UTC()}, nil
}

// Value is the point as ParsePoint reads it ("" for the zero point): one spelling per point, so that a
// value kept in a record compares equal to the same point asked again.
func (p Point) Value() string {
	switch {
	case p.Revision > 0:
		return strconv.FormatInt(p.Revision, 10)
	case !p.Time.IsZero():
		return p.Time.UTC().Format(time.RFC3339Nano)
	}
	return ""
}
