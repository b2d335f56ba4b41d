package membership

import (
	"context"
	"errors"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/api"
)

// Handing leadership over (issue 28, docs/design/07-steps.md §7.14). A defragmenting leader would block
// the cluster's writes, and a leaving one is removed: both hand over first, through handOver.
//
// A planned stop (a pod deleted, a restart in place) does not: etcd's graceful stop hands over itself,
// after it has closed its client connections, and that costs the clients less. A leader change drops
// the proposals in flight (raft drops those reaching a leader while it hands over, and a follower's
// while it knows no leader). Handed over while its connections are open, the leader's own clients get
// "raft proposal dropped" at once: BenchmarkLeaderChange measured 0.29 failed writes a change for a
// client on the leader against 0.08 for one elsewhere (a write every 20 ms), and the CI tier with the
// hand-over before every planned stop failed 3 and 2 writes in rolls and peer moves where etcd's own
// transfer had failed 0 to 2 (docs/performance.md).

// errNoTransferee: this member leads and no other voter is healthy to take over.
var errNoTransferee = errors.New("this member leads and no other voter is healthy to take over")

// transferee is the healthy voter other than self that should lead next (ID "" when there is none). A
// leader change can drop the writes in flight (raft drops the proposals that reach a leader while it
// hands over, and a follower's while it knows no leader), so every planned operation should cause as
// few as it can: the highest rank first, when rank is given (a member the operation will not stop
// next), then the most of the log (the quickest to take over: raft sends it the missing entries before
// the election).
func transferee(members []api.Member, healthy map[string]*clientv3.StatusResponse, self string, rank func(api.Member) int) api.Member {
	var best api.Member
	bestRank, bestIndex := 0, uint64(0)
	for _, m := range members {
		st := healthy[m.ID]
		if m.ID == self || m.Learner || st == nil {
			continue
		}
		r := 0
		if rank != nil {
			r = rank(m)
		}
		if best.ID == "" || r > bestRank || r == bestRank && st.RaftIndex > bestIndex {
			best, bestRank, bestIndex = m, r, st.RaftIndex
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
// healthy members, and returns it (a leave, a defragmentation; the remove Job chooses the same way).
func (e *env) handOver(ctx context.Context, members []api.Member, healthy map[string]*clientv3.StatusResponse, self string, rank func(api.Member) int) (string, error) {
	to := transferee(members, healthy, self, rank)
	if to.ID == "" {
		return "", errNoTransferee
	}
	id, _ := api.ParseID(to.ID)
	if err := e.etcd.MoveLeader(ctx, e.cfg.ClientURL, id); err != nil {
		return "", err
	}
	return to.ID, nil
}
