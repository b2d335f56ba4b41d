package api

import (
	"fmt"
	"time"
)

// MaxJoinWindow is the longest join permission a hook writes (MaxLearnerPromotionSeconds, the validation
// bound of spec.timeouts.learnerPromotionSeconds) plus room for clock skew between the hook and the API
// server. A longer window is a hand edit or a bug, and would let a join start long after the hook stopped
// counting it.
const MaxJoinWindow = MaxLearnerPromotionSeconds*time.Second + 5*time.Minute

// JoinWindow is a join permission on a member Lease (AnnJoinPermitted, AnnJoinDeadline): the agent may
// start a join from From until, not at, Until. The hook counts a member as joining exactly while the agent
// may join, so both sides read the window with ParseJoinWindow and OpenAt, and nothing else.
type JoinWindow struct {
	From, Until time.Time
}

// NewJoinWindow is the window the hook writes at now for a step bounded by d.
func NewJoinWindow(now time.Time, d time.Duration) JoinWindow {
	return JoinWindow{From: now.UTC().Truncate(time.Second), Until: now.Add(d).UTC().Truncate(time.Second)}
}

// Annotations renders the window as the two annotation values.
func (w JoinWindow) Annotations() (permitted, deadline string) {
	return w.From.UTC().Format(time.RFC3339), w.Until.UTC().Format(time.RFC3339)
}

// IsZero: no usable permission.
func (w JoinWindow) IsZero() bool { return w.From.IsZero() || w.Until.IsZero() }

// Same: the two windows are the same permission.
func (w JoinWindow) Same(o JoinWindow) bool { return w.From.Equal(o.From) && w.Until.Equal(o.Until) }

// ParseJoinWindow reads the two annotation values ("" when absent). A window is usable only when both
// ends parse, it ends after it starts and it is no longer than MaxJoinWindow; otherwise it is zero and
// problem says why (empty when neither annotation is set).
func ParseJoinWindow(permitted, deadline string) (w JoinWindow, problem string) {
	if permitted == "" && deadline == "" {
		return JoinWindow{}, ""
	}
	from, err1 := time.Parse(time.RFC3339, permitted)
	until, err2 := time.Parse(time.RFC3339, deadline)
	if err1 != nil || err2 != nil {
		return JoinWindow{}, fmt.Sprintf("join permission %q until %q does not parse: ignored", permitted, deadline)
	}
	switch window := until.Sub(from); {
	case window <= 0:
		return JoinWindow{}, fmt.Sprintf("join permission ends (%s) before it starts (%s): ignored", deadline, permitted)
	case window > MaxJoinWindow:
		return JoinWindow{}, fmt.Sprintf("join permission of %s is longer than any the hook writes: ignored", window)
	}
	return JoinWindow{From: from, Until: until}, ""
}

// OpenAt says whether a join may start at now. A deadline further ahead of now than any window the
// hook writes is refused (a window moved into the future by hand), and problem says so.
func (w JoinWindow) OpenAt(now time.Time) (open bool, problem string) {
	if w.IsZero() {
		return false, ""
	}
	if w.Until.Sub(now) > MaxJoinWindow {
		return false, fmt.Sprintf("join permission until %s ends further ahead than any the hook writes: ignored", w.Until.Format(time.RFC3339))
	}
	return now.Before(w.Until), ""
}
