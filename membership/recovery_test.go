package membership

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

// Recovery from the freshest survivor against real etcd, every version (docs/design/19-recovery.md):
// the hook's part is played by the test, as it would write the Leases.

// loseForGood kills the slots and wipes their volumes, then starts their agents again: pods and claims
// re-created, no data. They wait to join.
func (c *tcluster) loseForGood(slots ...int) {
	for _, i := range slots {
		c.kill(i)
	}
	for _, i := range slots {
		c.wipe(i)
		c.intent(i, api.IntentMember, false, 0) // no join permission left from the grow
		c.start(i, 0)
	}
	for _, i := range slots {
		c.waitFor("slot "+itoa(i)+" to wait to join", stepMax, func() bool {
			r := c.leases.Report(c.slots[i].lease)
			return r.MemberID == "" && r.Reason() == api.ReasonWaitingForJoin
		})
	}
}

// leaderlessReport waits until slot i reports its revision and raft term (it knows no leader).
func (c *tcluster) leaderlessReport(i int) api.Report {
	var r api.Report
	c.waitFor("slot "+itoa(i)+" to report its revision without a leader", stepMax, func() bool {
		r = c.leases.Report(c.slots[i].lease)
		return r.Revision > 0 && r.RaftTerm > 0 && r.LeaderID == ""
	})
	return r
}

// forceSurvivor plays the hook's survivor step on slot i and waits for a one-member cluster.
func (c *tcluster) forceSurvivor(i int, token string) time.Duration {
	start := time.Now()
	c.leases.SetRecover(c.slots[i].lease, api.RecoverIntent{Token: token, Role: api.RecoverSurvivor, MemberID: c.leases.Report(c.slots[i].lease).MemberID})
	c.waitFor("slot "+itoa(i)+" to run as a one-member cluster", stepMax, func() bool {
		r := c.leases.Report(c.slots[i].lease)
		return r.Healthy && r.Role == api.RoleLeader && len(r.Members) == 1 && r.Recovered == token
	})
	return time.Since(start)
}

// rejoin lets each slot join, one at a time, as the hook's grow does.
func (c *tcluster) rejoin(slots ...int) {
	for _, i := range slots {
		c.intent(i, api.IntentMember, false, permit)
		want := append(c.votersNow(), i)
		c.waitFor("slot "+itoa(i)+" to rejoin", stepMax, func() bool { return c.voters(want...) })
		c.intent(i, api.IntentMember, false, 0)
	}
}

// votersNow are the slots whose reports say healthy voter.
func (c *tcluster) votersNow() []int {
	var out []int
	for i := range c.slots {
		if r := c.leases.Report(c.slots[i].lease); r.Healthy && r.IsVoter() {
			out = append(out, i)
		}
	}
	return out
}

// survivorKeeps counts the writer's acknowledged keys readable now; the missing ones must be the
// newest (writer.Kept).
func survivorKeeps(t *testing.T, c *tcluster, w *twriter) (present, missing int) {
	cl := c.client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	present, missing, err := w.Kept(ctx, cl)
	require.NoError(t, err)
	require.NotZero(t, present)
	return present, missing
}

// 5 members, 3 lost for good under a writer: of the two that hold data the freshest (revision, then
// term) survives and the other is fenced first (its data set aside, never deleted); then, as if its old
// disk came back mid-recovery, the fenced member's data is put back and its agent started: it is moved
// aside again, never runs beside the survivor, and joins as a learner like the others. Every acknowledged
// write the survivor held is there, the missing ones are the newest; a restart of the survivor afterwards
// does not force again.
func TestMembershipRecoverFencesTheOthers(t *testing.T) {
	// The versions side by side: each is five members mostly waiting on etcd's timers, and the three in
	// turn cost CI four minutes (docs/design/19-recovery.md §19.5).
	forEachVersionParallel(t, func(t *testing.T, v string) {
		c := newCluster(t, v, 5)
		var w *twriter
		c.bootstrap(&w, 5)
		w.Step("quorum lost")
		time.Sleep(time.Second)
		c.loseForGood(2, 3, 4)
		r0, r1 := c.leaderlessReport(0), c.leaderlessReport(1)
		survivor, other := 0, 1
		if r1.Revision > r0.Revision || r1.Revision == r0.Revision && r1.RaftTerm > r0.RaftTerm {
			survivor, other = 1, 0
		}
		rs, ro := c.leases.Report(c.slots[survivor].lease), c.leases.Report(c.slots[other].lease)
		token := api.RecoveryToken(rs.MemberID, rs.Revision)
		c.leases.SetRecover(c.slots[other].lease, api.RecoverIntent{Token: token, Role: api.RecoverFence, MemberID: ro.MemberID})
		c.waitFor("the other to be fenced", stepMax, func() bool {
			r := c.leases.Report(c.slots[other].lease)
			return r.Recovered == token && r.MemberID == ""
		})
		asides, err := filepath.Glob(c.slots[other].dataDir() + ".removed-*")
		require.NoError(t, err)
		require.Len(t, asides, 1, "the fenced member's data is kept aside")
		took := c.forceSurvivor(survivor, token)
		w.Step("recovered")

		// The old disk comes back: the fenced data, put back under a stopped agent.
		c.kill(other)
		require.NoError(t, os.RemoveAll(c.slots[other].dataDir()))
		require.NoError(t, os.Rename(asides[0], c.slots[other].dataDir()))
		c.leases.SetRecover(c.slots[other].lease, api.RecoverIntent{})
		c.start(other, 0)
		c.waitFor("the returning data to be moved aside", stepMax, func() bool {
			r := c.leases.Report(c.slots[other].lease)
			return r.MemberID == "" && r.Reason() == api.ReasonWaitingForJoin
		})
		ms := c.members()
		require.Len(t, ms, 1, "the survivor stays alone: the returning member never joined its old membership")
		require.Equal(t, rs.MemberID, ms[0].ID)
		rest := slices.DeleteFunc([]int{0, 1, 2, 3, 4}, func(i int) bool { return i == survivor })
		c.rejoin(rest...)
		present, missing := survivorKeeps(t, c, w)
		// The survivor never forces twice: a restart on its data finds the token in its binding.
		df, err := ReadData(c.slots[survivor].dataDir())
		require.NoError(t, err)
		require.Equal(t, token, df.Binding.Recovered)
		c.kill(survivor)
		c.start(survivor, 0)
		c.waitFor("five voters after the survivor's restart", stepMax, func() bool { return c.voters(0, 1, 2, 3, 4) })
		cl := c.client()
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := cl.MemberList(ctx)
		require.NoError(t, err)
		require.Len(t, st.Members, 5, "the restart did not force a one-member cluster again")
		record(t, fmt.Sprintf("5 members, 3 lost for good: survivor slot %d (revision %d, term %d; the other at %d, term %d) forced in %s after the other was fenced; acknowledged writes kept %d, missing %d\n",
			survivor, rs.Revision, rs.RaftTerm, ro.Revision, ro.RaftTerm, took.Round(10*time.Millisecond), present, missing))
	})
}
