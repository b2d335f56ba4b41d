package steps

import (
	"maps"
	"slices"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// Leases are the hook's halves of the member Leases as the decision writes them, by ordinal: carried
// over from the observed ones and normalised, then set by the steps in order. They are an explicit
// input and output of each step that asks a member for something.
type Leases map[int]*api.Intent

// Ordinals are the ordinals that have a Lease, in order.
func (ls Leases) Ordinals() []int { return slices.Sorted(maps.Keys(ls)) }

// Lease is ordinal i's half, made empty if it has none yet.
func (ls Leases) Lease(i int) *api.Intent {
	lp := ls[i]
	if lp == nil {
		lp = &api.Intent{}
		ls[i] = lp
	}
	return lp
}

// SetIntent asks ordinal i to be a member or to leave, dated now unless it asked so already.
func (ls Leases) SetIntent(i int, intent string, now time.Time) {
	lp := ls.Lease(i)
	if lp.Kind != intent {
		lp.Kind = intent
		lp.Since = now.UTC().Format(time.RFC3339)
	}
}

// Permit lets ordinal i join as a member from now for window (its learner's promotion timeout).
func (ls Leases) Permit(i int, now time.Time, window time.Duration) {
	ls.SetIntent(i, api.IntentMember, now)
	ls.Lease(i).Join = api.NewJoinWindow(now, window)
}

// Joining: ordinal i holds a join permission whose deadline has not passed at now.
func (ls Leases) Joining(i int, now time.Time) bool {
	lp := ls[i]
	if i < 0 || lp == nil {
		return false
	}
	// Read as the agent reads it (api/join.go), like every other reading of a permission.
	open, _ := lp.Join.OpenAt(now)
	return open
}

// Clone is a copy of ls that a step may write without touching ls.
func (ls Leases) Clone() Leases {
	out := make(Leases, len(ls))
	for i, lp := range ls {
		c := *lp
		out[i] = &c
	}
	return out
}
