// Package membership is the etcd side of etcdhook: the agent that wraps etcd in every member pod, and
// the one-shot member operations the hook's Jobs run. Decisions are pure functions (decide.go); the
// runtime around them is thin and talks to etcd through client/v3 and to Kubernetes through a LeaseStore.
package membership

import (
	"context"
	"errors"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Outcome classifies an error from a membership call (docs/design/08-safety-rules.md §8.14).
type Outcome int

const (
	// Failed: nothing retries it; the caller reports and stops.
	Failed Outcome = iota
	// Retry: etcd refused for now (5-second rule, learner catching up, one learner at a time).
	Retry
	// Done: the effect already holds (added, removed, promoted).
	Done
	// Unknown: the call timed out; it may still commit. Re-read the member list.
	Unknown
)

func (o Outcome) String() string {
	return [...]string{"failed", "retry", "done", "unknown"}[o]
}

// Op is a membership call.
type Op int

const (
	OpAdd Op = iota
	OpRemove
	OpPromote
	OpUpdate
)

// Classify maps an error of op to what the caller should do. ErrMemberNotFound means "retry after a
// second" on add (the new ID collides with a removed one when issued in the same second) but "done" on
// remove and promote.
func Classify(op Op, err error) Outcome {
	switch {
	case err == nil:
		return Done
	case isTimeout(err):
		return Unknown
	case errors.Is(err, rpctypes.ErrUnhealthy):
		return Retry
	case isLearnerEndpoint(err):
		return Retry // sent to a learner: try another endpoint
	}
	switch op {
	case OpAdd:
		switch {
		case errors.Is(err, rpctypes.ErrTooManyLearners), errors.Is(err, rpctypes.ErrMemberNotFound):
			return Retry
		case errors.Is(err, rpctypes.ErrPeerURLExist), errors.Is(err, rpctypes.ErrMemberExist):
			return Done
		}
	case OpRemove:
		if errors.Is(err, rpctypes.ErrMemberNotFound) {
			return Done
		}
	case OpPromote:
		switch {
		case errors.Is(err, rpctypes.ErrMemberLearnerNotReady):
			return Retry
		case errors.Is(err, rpctypes.ErrMemberNotLearner), errors.Is(err, rpctypes.ErrMemberNotFound):
			return Done
		}
	}
	return Failed
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rpctypes.ErrTimeout) ||
		errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail) || errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost) ||
		errors.Is(err, rpctypes.ErrLeaderChanged) || errors.Is(err, rpctypes.ErrNoLeader) {
		return true
	}
	if s, ok := status.FromError(err); ok && s.Code() == codes.DeadlineExceeded {
		return true
	}
	return false
}

// isLearnerEndpoint: the call reached a learner (3.5 answers Unavailable, 3.6 FailedPrecondition, both
// with this text; the client has no error value for it).
func isLearnerEndpoint(err error) bool {
	return strings.Contains(err.Error(), "rpc not supported for learner")
}
