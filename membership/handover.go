package membership

import (
	"context"
	"errors"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/api"
)

// Handing leadership over before a planned stop (issue 28, docs/design/07-steps.md §7.14).
//
// etcd's graceful stop hands leadership over itself, but only after it has closed its client
// connections: the clients reconnect to the other members, whose writes are forwarded to the stopping
// leader, and a leader drops the proposals forwarded to it while a transfer is in progress, without an
// answer (raft's stepLeader: "transfer leadership ... is in progress; dropping proposal"). The clients
// wait out their timeouts: the e2e suite's one failed write in a CA rotation and in a roll, each time
// when the member stopped was the leader and the writer's connection was on it. So a member stopped on
// purpose hands over first, while its connections still work and before its drain, and its stop is
// then a follower's.

// errNoTransferee: this member leads and no other voter is healthy to take over.
var errNoTransferee = errors.New("this member leads and no other voter is healthy to take over")

// handOverTimeout bounds a hand-over on a pod's way out (the pod's grace period covers it, the drain
// and etcd's stop: api.TerminationGraceSeconds).
const handOverTimeout = 5 * time.Second

// transferee is the healthy voter other than self that should lead next, "" when there is none. A
// leader change can drop the writes in flight (raft drops the proposals that reach a leader while it
// hands over, and a follower's while it knows no leader), so every planned operation should cause as
// few as it can: the highest rank first, when rank is given (a member the operation will not stop
// next), then the most of the log (the quickest to take over: raft sends it the missing entries before
// the election).
func transferee(members []api.Member, healthy map[string]*clientv3.StatusResponse, self string, rank func(api.Member) int) string {
	best, bestRank, bestIndex := "", 0, uint64(0)
	for _, m := range members {
		st := healthy[m.ID]
		if m.ID == self || m.Learner || st == nil {
			continue
		}
		r := 0
		if rank != nil {
			r = rank(m)
		}
		if best == "" || r > bestRank || r == bestRank && st.RaftIndex > bestIndex {
			best, bestRank, bestIndex = m.ID, r, st.RaftIndex
		}
	}
	return best
}

// ordinal is the number a member's name ends in (a pod's ordinal: etcd-2 is 2), -1 when none.
func ordinal(name string) int {
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	n, err := strconv.Atoi(name[i:])
	if err != nil {
		return -1
	}
	return n
}

// restartedBefore ranks first, for a pod being deleted, the members of a higher ordinal: a roll (the
// StatefulSet's partition) restarts the pods from the highest ordinal down, so those have restarted
// already and will not hand leadership on again in this roll. A leader that is the highest pod hands
// over twice in a roll, whatever it chooses; any other, once.
func restartedBefore(self string) func(api.Member) int {
	own := ordinal(self)
	return func(m api.Member) int {
		if own >= 0 && ordinal(m.Name) > own {
			return 1
		}
		return 0
	}
}

// staysLongest ranks, for a leaving member, the lowest ordinal first: a scale-down removes the pods
// from the highest ordinal down, so the lowest stays through any number of steps.
func staysLongest(self string) func(api.Member) int {
	own := ordinal(self)
	return func(m api.Member) int {
		if o := ordinal(m.Name); own >= 0 && o >= 0 && o < own {
			return own - o
		}
		return 0
	}
}

// handOver moves leadership from this member (self, the leader) to the best transferee among the
// healthy members, and returns it. Every step that stops or blocks a leader on purpose goes through it
// (a leave, a defragmentation, a restart, a pod's deletion).
func (a *Agent) handOver(ctx context.Context, members []api.Member, healthy map[string]*clientv3.StatusResponse, self string, rank func(api.Member) int) (string, error) {
	to := transferee(members, healthy, self, rank)
	if to == "" {
		return "", errNoTransferee
	}
	id, _ := api.ParseID(to)
	if err := a.Etcd.MoveLeader(ctx, a.Cfg.ClientURL, id); err != nil {
		return "", err
	}
	return to, nil
}

// handOverBeforeStop hands leadership over before a planned stop of etcd (why), ranked by rank, best effort: a stop
// without it is what etcd does anyway. It runs on a context of its own: on SIGTERM the agent's is done.
func (a *Agent) handOverBeforeStop(why string, rank func(api.Member) int) {
	ctx, cancel := context.WithTimeout(context.Background(), handOverTimeout)
	defer cancel()
	st, err := a.Etcd.Status(ctx, a.Cfg.ClientURL)
	if err != nil {
		a.Log.Warn("leadership not handed over before the stop: no status", "why", why, "error", err)
		return
	}
	if st.Leader != st.Header.MemberId || len(a.known) < 2 {
		return
	}
	to, err := a.handOver(ctx, a.known, a.Etcd.Health(ctx, a.known), api.FormatID(st.Header.MemberId), rank)
	if err != nil {
		a.Log.Warn("leadership not handed over before the stop", "why", why, "error", err)
		return
	}
	a.Log.Info("handed leadership over before the stop", "why", why, "to", to)
}
