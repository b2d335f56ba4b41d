package steps

import "github.com/etcdhook/etcdhook/sync/facts"

// RollNext is the pod a roll replaces next among pending (the ordinals not yet on the update revision,
// in any order): the highest that does not lead, the leader's own pod last; -1 when none is pending.
// leader is the leading member's ordinal (-1 unknown). Re-decided at every step from who leads now, so
// the order holds when leadership moves during the roll: a follower's stop changes no leader, and once
// only the leader's pod is left every peer is rolled, so etcd's own transfer at its graceful stop lands
// on a rolled member: one leader change per roll, none when the leader's pod does not roll
// (docs/design/07-steps.md §7.11).
func RollNext(pending []int, leader int) int {
	next := -1
	for _, i := range pending {
		if i == leader {
			continue
		}
		next = max(next, i)
	}
	if next < 0 {
		for _, i := range pending {
			if i == leader {
				return i
			}
		}
	}
	return next
}

// LeaderOrdinal is the ordinal of the member the freshest member list names as leader (-1 when it names
// none, or the leader has no ordinal).
func LeaderOrdinal(f *facts.Facts) int {
	for _, m := range f.Truth.Members {
		if m.ID == f.Truth.LeaderID && m.ID != "" {
			return m.Ordinal
		}
	}
	return -1
}
