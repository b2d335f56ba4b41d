package membership

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

const (
	permit  = 5 * time.Minute
	stepMax = 90 * time.Second
)

func forEachVersion(t *testing.T, run func(t *testing.T, version string)) {
	for _, v := range etcdVersions {
		t.Run(v, func(t *testing.T) { run(t, v) })
	}
}

// forEachVersionParallel is forEachVersion with the versions run side by side (go test's -parallel
// bounds how many): for a test whose clusters mostly wait, and that shares nothing but the port cursor.
func forEachVersionParallel(t *testing.T, run func(t *testing.T, version string)) {
	for _, v := range etcdVersions {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			run(t, v)
		})
	}
}

// underWrites runs scenario on every etcd version against a cluster of n slots bootstrapped to grown
// voters under the continuous writer, then checks that no acknowledged write was lost.
func underWrites(t *testing.T, n, grown int, scenario func(t *testing.T, c *tcluster, w *twriter)) {
	forEachVersionParallel(t, func(t *testing.T, v string) {
		c := newCluster(t, v, n)
		var w *twriter
		c.bootstrap(&w, grown)
		scenario(t, c, w)
		w.Verify(t)
	})
}

// bootstrap starts the seed (slot 0) and grows to n members, one learner at a time, as the hook would.
func (c *tcluster) bootstrap(w **twriter, n int) {
	c.intent(0, api.IntentMember, true, 0)
	c.start(0, 0)
	c.waitFor("seed", stepMax, func() bool { return c.voters(0) })
	c.intent(0, api.IntentMember, false, 0) // the hook drops the seed mark once bootstrapped
	if w != nil {
		*w = startWriter(c, "grow 1->2")
	}
	for i := 1; i < n; i++ {
		if w != nil && i > 1 {
			(*w).Step("grow " + itoa(i) + "->" + itoa(i+1))
		}
		c.grow(i)
	}
}

// newestEtcd is the etcd version of the tests that run on one version only.
var newestEtcd = etcdVersions[len(etcdVersions)-1]

// bootstrapped is a cluster of n slots on etcd version v, bootstrapped to n voters without a writer.
func bootstrapped(t testing.TB, v string, n int) *tcluster {
	c := newCluster(t, v, n)
	c.bootstrap(nil, n)
	return c
}

// grow permits slot i to join, starts it and, once it is a voter, drops the permission as the hook does
// (a permission left behind would let the slot join again by itself after a later loss of its data).
func (c *tcluster) grow(i int) time.Duration {
	c.intent(i, api.IntentMember, false, permit)
	c.start(i, 0)
	want := c.live()
	took := c.waitFor("member "+itoa(i)+" to join", stepMax, func() bool { return c.voters(want...) })
	c.intent(i, api.IntentMember, false, 0)
	return took
}

// loseData wipes slot i's volume under a killed agent and restarts it (the seed with the seed mark
// still set when seedMark): the agent must ask to rejoin rather than start anew, and once the hook
// permits it, the member is back as a voter. It returns the time from the restart to a healthy voter.
func (c *tcluster) loseData(i int, seedMark bool) time.Duration {
	c.t.Helper()
	c.kill(i)
	c.wipe(i)
	c.intent(i, api.IntentMember, seedMark, 0)
	start := time.Now()
	c.start(i, 0)
	c.waitFor("m"+itoa(i)+" to ask to rejoin", stepMax, func() bool {
		return c.leases.Report(c.slots[i].lease).Reason() == api.ReasonWaitingForJoin
	})
	c.intent(i, api.IntentMember, false, permit) // the hook permits the replacement
	want := c.live()
	c.waitFor("m"+itoa(i)+" back", stepMax, func() bool { return c.voters(want...) })
	return time.Since(start)
}

func itoa(i int) string { return string(rune('0' + i)) }

// removeJob runs `etcdhook member remove` against the running members.
func (c *tcluster) removeJob(id, peerURL, reason string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return RemoveMember(ctx, c.etcd(2*time.Second), c.log, RemoveRequest{ID: id, PeerURL: peerURL, Reason: reason, Endpoints: c.liveEndpoints()})
}

// 1. Seed bootstrap; grow 1->3->5 with learner and promote; shrink 5->3->1 with member remove.
func TestMembershipGrowShrink(t *testing.T) {
	underWrites(t, 5, 5, func(t *testing.T, c *tcluster, w *twriter) {
		cid := c.leases.Report(c.slots[0].lease).ClusterID
		// The member and cluster IDs the agent reads from etcd's WAL are etcd's own.
		df, err := ReadData(c.slots[2].dataDir())
		require.NoError(t, err)
		require.Equal(t, c.memberID(2), api.FormatID(df.MemberID))
		require.Equal(t, cid, api.FormatID(df.ClusterID))
		require.Equal(t, c.parent, df.Binding.ClusterUID)
		for i := 4; i >= 1; i-- {
			w.Step("shrink " + itoa(i+1) + "->" + itoa(i))
			// The ID before the intent: the agent may remove itself before the ID is read.
			id := c.memberID(i)
			require.NotEmpty(t, id)
			c.intent(i, api.IntentLeave, false, 0)
			c.removeUntilDone(id, c.slots[i].peerURL, "leave")
			c.waitFor("shrink", stepMax, func() bool { return c.voters(c.except(i)...) })
			c.waitFor("the removed member to park", stepMax, func() bool { return c.parked(i) })
			require.NoError(t, c.stop(i))
		}
		require.Equal(t, cid, c.leases.Report(c.slots[0].lease).ClusterID)
	})
}

// 2. Data loss on a voter (wipe + restart): recovered by the agent under a new member ID.
func TestMembershipDataLossRecovery(t *testing.T) {
	underWrites(t, 3, 3, func(t *testing.T, c *tcluster, w *twriter) {
		w.Step("data loss on m1")
		old := c.memberID(1)
		took := c.loseData(1, false)
		w.Step("after recovery")
		require.NotEqual(t, old, c.memberID(1), "a member with lost data never reuses its old ID")
		record(t, "data-loss recovery (restart to healthy voter): "+took.Round(10*time.Millisecond).String()+"\n")
	})
}

// 3. Stale data dir of a removed member (scale down, then up with the volume kept): moved aside, rejoined.
func TestMembershipStaleDataDir(t *testing.T) {
	underWrites(t, 4, 4, func(t *testing.T, c *tcluster, w *twriter) {
		w.Step("scale down 4->3, volume kept")
		old := c.memberID(3)
		c.intent(3, api.IntentLeave, false, 0)
		c.waitFor("m3 to leave by itself", stepMax, func() bool { return c.voters(0, 1, 2) })
		require.NoError(t, c.stop(3))
		w.Step("scale up 3->4 on the stale volume")
		c.grow(3)
		require.NotEqual(t, old, c.memberID(3))
		_, err := os.Stat(c.slots[3].dataDir() + ".removed-1")
		require.NoError(t, err, "the stale data is kept aside once")
	})
}

// 4. The seed loses its data after bootstrap: it never starts a second cluster, it rejoins.
func TestMembershipSeedDataLoss(t *testing.T) {
	underWrites(t, 3, 3, func(t *testing.T, c *tcluster, w *twriter) {
		cid := c.leases.Report(c.slots[1].lease).ClusterID
		w.Step("seed data loss")
		c.loseData(0, true) // even a stale seed mark must not start a new cluster
		require.Equal(t, cid, c.leases.Report(c.slots[0].lease).ClusterID, "one cluster, not two")
	})
}

// 5. The agent is killed between MemberAddAsLearner and etcd start, and between start and promote.
func TestMembershipCrashWindows(t *testing.T) {
	underWrites(t, 5, 2, func(t *testing.T, c *tcluster, w *twriter) {
		w.Step("crash after add, before start")
		e := c.etcd(2 * time.Second)
		id, _, err := e.AddLearner(context.Background(), []string{c.slots[0].clientURL, c.slots[1].clientURL}, c.slots[2].peerURL)
		require.NoError(t, err)
		c.grow(2)
		require.Equal(t, api.FormatID(id), c.memberID(2), "the learner added but never started is reused")
		w.Step("crash after start, before promote")
		c.intent(3, api.IntentMember, false, permit)
		c.start(3, time.Hour) // this agent never looks again: it cannot promote
		c.waitFor("m3 to run as a learner", stepMax, func() bool {
			for _, m := range c.tryMembers() {
				if m.PeerURL == c.slots[3].peerURL && m.Learner && m.Started {
					return true
				}
			}
			return false
		})
		c.kill(3)
		c.start(3, 0)
		c.waitFor("m3 promoted after restart", stepMax, func() bool { return c.voters(0, 1, 2, 3) })
		w.Step("crash during join discovery (member/ without a WAL)")
		s := c.slots[4]
		require.NoError(t, WriteBinding(s.dataDir(), Binding{ClusterUID: c.parent, PeerURL: s.peerURL}))
		require.NoError(t, os.MkdirAll(filepath.Join(s.dataDir(), "member", "snap"), 0o755))
		c.grow(4)
		_, err = os.Stat(s.dataDir() + ".removed-1")
		require.NoError(t, err, "the half-initialised directory is moved aside")
	})
}

// 6. A removal that would break quorum is refused (also with two voters, one down); a dead member can
// be removed; removing the leader moves leadership first.
func TestMembershipQuorumRule(t *testing.T) {
	underWrites(t, 3, 3, func(t *testing.T, c *tcluster, w *twriter) {
		w.Step("m2 down; removals checked")
		m1, m2 := c.memberID(1), c.memberID(2)
		c.kill(2)
		// Were m2 the leader, m0 and m1 would be electing for a moment, and a Job that finds no leader
		// refuses: the removals below are judged against a quorum that has settled.
		c.waitFor("m0 and m1 following a live leader", stepMax, func() bool {
			l := c.tryLeader(0)
			return l != "" && l != m2 && l == c.tryLeader(1)
		})
		// The Job's answer, not a member list read that timed out (a plain error): asked again until it
		// answers; it stops at once on a removal done, which the assertion then refuses.
		var err error
		c.waitFor("the Job's answer on m1", stepMax, func() bool {
			err = c.removeJob(m1, c.slots[1].peerURL, "leave")
			return err == nil || errors.Is(err, ErrRefused)
		})
		require.ErrorIs(t, err, ErrRefused, "removing a healthy voter while another is down breaks quorum")
		c.removeUntilDone(m2, c.slots[2].peerURL, "dead") // a dead member may go
		c.waitFor("two voters", stepMax, func() bool { return c.voters(0, 1) })
		w.Step("two voters, one down")
		c.kill(1)
		require.Error(t, c.removeJob(m1, c.slots[1].peerURL, "dead"), "no removal without quorum")
		c.start(1, 0)
		// running: the killed agent's last report still says healthy voter.
		c.waitFor("m1 back", stepMax, func() bool { return c.running(1) && c.voters(0, 1) })
		w.Step("remove the leader")
		c.wipe(2)
		c.grow(2)
		ids := []string{c.memberID(0), c.memberID(1), c.memberID(2)}
		var leader string
		li := -1
		c.waitFor("a leader among the three", stepMax, func() bool {
			leader = c.tryLeader(0)
			li = slices.Index(ids, leader)
			return li >= 0
		})
		c.intent(li, api.IntentLeave, false, 0)
		// Should leadership move before the Job reads it (the leaving agent moves it too), the member
		// removed is a follower by then: the step still ends with the old leader out and a new one.
		c.removeUntilDone(leader, c.slots[li].peerURL, "leave")
		rest := c.except(li)
		c.waitFor("two voters without the old leader", stepMax, func() bool { return c.voters(rest...) })
		// A removed leader keeps running for a moment: the survivors elect a new one after it.
		c.waitFor("a new leader", stepMax, func() bool { l := c.tryLeader(rest[0]); return l != "" && l != leader })
		require.NoError(t, c.stop(li))
	})
}

// 6b. Intent leave: the member removes itself and, restarted, parks; all members killed at once come
// back with their data; a data directory of another cluster is refused.
func TestMembershipLeaveParkRestartForeign(t *testing.T) {
	underWrites(t, 5, 4, func(t *testing.T, c *tcluster, w *twriter) {
		w.Step("m3 leaves by intent")
		c.intent(3, api.IntentLeave, false, 0)
		c.waitFor("m3 gone", stepMax, func() bool { return c.voters(0, 1, 2) })
		c.waitFor("m3 parked", stepMax, func() bool { return c.parked(3) })
		w.Step("m3 container restarts")
		c.kill(3)
		c.start(3, 0)
		// The restarted agent decides, then parks: its state says so (its report said left already).
		c.waitFor("m3 parked again", stepMax, func() bool { st, _ := c.slots[3].agent.State(); return st == "parked" })
		c.waitFor("the three voters, m3 not among them", stepMax, func() bool { return c.voters(0, 1, 2) })
		require.Equal(t, api.RoleLeft, c.leases.Report(c.slots[3].lease).Role)
		require.NoError(t, c.stop(3))
		w.Step("all members killed and restarted")
		for i := 0; i < 3; i++ {
			c.kill(i)
		}
		for i := 0; i < 3; i++ {
			c.start(i, 0)
		}
		// Each new agent's etcd answering: the killed members' last reports still say healthy.
		c.waitFor("all back", stepMax, func() bool { return c.running(0, 1, 2) && c.voters(0, 1, 2) })
		w.Step("foreign data refused")
		s := c.slots[4]
		require.NoError(t, os.MkdirAll(filepath.Join(s.dataDir(), "member", "wal"), 0o755))
		require.NoError(t, WriteBinding(s.dataDir(), Binding{ClusterUID: "another-cluster", ClusterID: "aaaaaaaaaaaaaaaa"}))
		c.intent(4, api.IntentMember, false, permit)
		c.start(4, 0)
		c.waitFor("ForeignData", stepMax, func() bool {
			return c.leases.Report(s.lease).Reason() == api.ReasonForeignData
		})
		state, running := s.agent.State()
		require.False(t, running, "etcd must not start on another cluster's data (%s)", state)
		// A wait, not one read: m4's etcd never runs, so waiting cannot hide a join.
		c.waitFor("the three voters, m4 not among them", stepMax, func() bool { return c.voters(0, 1, 2) })
	})
}

func TestRemoveMemberIsIdempotent(t *testing.T) {
	c := bootstrapped(t, newestEtcd, 2)
	id := c.memberID(1)
	c.intent(1, api.IntentLeave, false, 0)
	c.removeUntilDone(id, c.slots[1].peerURL, "leave")
	require.NoError(t, c.removeJob(id, c.slots[1].peerURL, "leave"), "removing a removed member succeeds")
	err := c.removeJob(c.memberID(0), "http://wrong:2380", "leave")
	require.True(t, errors.Is(err, ErrRefused), "a peer URL that does not match refuses: %v", err)
}
