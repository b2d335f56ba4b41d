package api

import (
	"errors"
	"fmt"
)

// RemovalAllowed is the quorum rule (docs/design/08-safety-rules.md §8.2) for removing one member,
// the one place both the hook (before it asks a member to leave) and the remove Job (before it
// removes) apply it: a learner may always go; a voter only if a quorum of the voters is healthy now and
// a quorum of the remaining ones would be healthy after, and never the last voter. voters and healthy
// count the voting members and those of them healthy; targetHealthy says whether the one removed is.
func RemovalAllowed(voters, healthy int, targetLearner, targetHealthy bool) error {
	if targetLearner {
		return nil
	}
	after := healthy
	if targetHealthy {
		after--
	}
	if voters <= 1 {
		return errors.New("refusing to remove the last voter")
	}
	if healthy < Quorum(voters) || after < Quorum(voters-1) {
		return fmt.Errorf("quorum rule: %d of %d voters healthy, %d would remain of %d (need %d and %d)",
			healthy, voters, after, voters-1, Quorum(voters), Quorum(voters-1))
	}
	return nil
}
