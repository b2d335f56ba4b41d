package membership

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// A roll in the hook's order (steps.RollNext: the highest pod that does not lead, the leader's own pod
// last, re-decided at every step from who leads now) changes the leader once, whatever its size, also
// when leadership is moved onto a pod not yet rolled in the middle of the roll: the order adapts and
// that pod goes last (docs/design/07-steps.md §7.11). The changes are counted from etcd's own status
// (how far the raft term moved: every election, also a transfer, takes a new term; pre-vote keeps a
// restarted follower from starting one). Each pod is stopped gracefully and started again, as a pod
// the roll replaces; the continuous writer checks that no acknowledged write is lost.
func TestMembershipRollLeaderLast(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d members", n), func(t *testing.T) {
			underWrites(t, n, n, func(t *testing.T, c *tcluster, w *twriter) {
				w.Step("roll, leader last")
				term := c.raftTerm()
				c.rollInOrder(-1)
				require.Equal(t, uint64(1), c.raftTerm()-term, "a roll changes the leader once")

				w.Step("roll, leader moved mid-roll")
				term = c.raftTerm()
				moved := c.rollInOrder(1)
				require.Equal(t, uint64(1), c.raftTerm()-term-moved, "the roll's own leader changes beside the %d made by hand", moved)

				// The partition's order for contrast (the highest pod first, whoever leads), with the
				// leader on the top pod: it stops first and etcd hands over to a pod still to roll, which
				// leads when its own turn comes.
				top := len(c.slots) - 1
				w.Step("leader moved to the top pod")
				if l := c.leaderSlot(); l != top {
					c.moveLeader(l, top)
				}
				w.Step("roll, highest first, leader on top")
				term = c.raftTerm()
				for i := top; i >= 0; i-- {
					c.restart(i)
				}
				changes := c.raftTerm() - term
				t.Logf("highest first with the leader on top: %d leader changes", changes)
				require.GreaterOrEqual(t, changes, uint64(2), "the partition's order changes the leader more than once")
			})
		})
	}
}

// rollInOrder restarts every slot once in steps.RollNext's order and returns how many leader changes
// the test made by hand: after moveAfter steps (-1 never) it moves leadership onto the lowest slot still
// to roll that does not lead (none when every slot left leads).
func (c *tcluster) rollInOrder(moveAfter int) uint64 {
	c.t.Helper()
	pending := c.live()
	var moved uint64
	for step := 0; len(pending) > 0; step++ {
		leader := c.leaderSlot()
		if step == moveAfter {
			if to := slices.IndexFunc(pending, func(i int) bool { return i != leader }); to >= 0 {
				c.moveLeader(leader, pending[to])
				moved++
				leader = pending[to]
			}
		}
		next := steps.RollNext(pending, leader)
		c.restart(next)
		pending = slices.DeleteFunc(pending, func(i int) bool { return i == next })
	}
	return moved
}

// restart stops slot i gracefully and starts it again, as a pod a roll replaces, and waits until it is
// back: its own etcd answering, not only the others' view of it (see TestMembershipTLSSwitch).
func (c *tcluster) restart(i int) {
	c.t.Helper()
	all := c.live()
	require.NoError(c.t, c.stop(i))
	c.start(i, 0)
	c.waitFor(c.slots[i].name+" back as a healthy voter", stepMax, func() bool { return c.running(i) && c.voters(all...) })
}

// leaderSlot is the slot that leads now.
func (c *tcluster) leaderSlot() int {
	c.t.Helper()
	l := c.leader()
	for i := range c.slots {
		if c.memberID(i) == l {
			return i
		}
	}
	c.t.Fatalf("leader %s is no slot's member", l)
	return -1
}

// moveLeader hands leadership from slot from to slot to, and waits until every slot follows it.
func (c *tcluster) moveLeader(from, to int) {
	c.t.Helper()
	id, err := api.ParseID(c.memberID(to))
	require.NoError(c.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(c.t, c.etcd(0).MoveLeader(ctx, c.slots[from].clientURL, id))
	c.waitFor(c.slots[to].name+" to lead", stepMax, func() bool { return c.tryLeader(to) == c.memberID(to) })
}

// raftTerm is the highest raft term the running slots report, once every one answers.
func (c *tcluster) raftTerm() uint64 {
	c.t.Helper()
	var term uint64
	c.waitFor("every slot's status", stepMax, func() bool {
		term = 0
		for i, s := range c.slots {
			if s.agent == nil {
				continue
			}
			st, err := c.etcd(0).Status(context.Background(), c.slots[i].clientURL)
			if err != nil {
				return false
			}
			term = max(term, st.RaftTerm)
		}
		return term > 0
	})
	return term
}
