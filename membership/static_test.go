package membership

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

// setStatic writes the hook's Lease half of a static creation of n members on slot i (intent member,
// etcd.io/bootstrap static/n, no permission), or with n 0 takes the mark away.
func (c *tcluster) setStatic(i, n int) {
	c.intent(i, api.IntentMember, false, 0)
	v := ""
	if n > 0 {
		v = api.StaticBootstrap(n)
	}
	c.leases.setAnnotations(c.slots[i].lease, map[string]string{api.AnnBootstrap: v})
}

// A static creation (docs/design/07-steps.md §7.1) on every etcd version: members that start together
// form one cluster; a member restarted before the cluster formed starts again on its own data; a member
// that comes up after the others formed starts as the listed voter it is; a member that loses its data
// after it ran never starts "new" again, whatever its Lease still says, and rejoins under a permission.
func TestMembershipStaticBootstrap(t *testing.T) {
	forEachVersionParallel(t, func(t *testing.T, v string) {
		c := newCluster(t, v, 3)
		c.static = 3
		for i := range c.slots {
			c.setStatic(i, 3)
		}
		c.start(0, 0)
		c.waitFor("m0 to start etcd from the static initial cluster", stepMax, func() bool {
			_, err := os.Stat(c.slots[0].dataDir() + "/member/wal")
			return err == nil
		})
		c.kill(0) // before any other member runs: no quorum, no cluster ID anywhere yet
		require.Empty(t, c.leases.Report(c.slots[0].lease).ClusterID)
		c.start(0, 0)
		c.start(1, 0)
		c.waitFor("m0 and m1 to form the cluster", stepMax, func() bool {
			return c.leases.Report(c.slots[0].lease).ClusterID != "" && c.leases.Report(c.slots[1].lease).IsVoter()
		})
		cid := c.leases.Report(c.slots[0].lease).ClusterID
		listed := c.members()
		require.Len(t, listed, 3, "the static initial cluster lists every member from the start")
		c.start(2, 0)
		c.waitFor("m2 to start as its listed voter", stepMax, func() bool { return c.voters(0, 1, 2) })
		for i := range c.slots {
			require.Equal(t, cid, c.leases.Report(c.slots[i].lease).ClusterID, "m%d: one cluster", i)
		}
		for _, m := range listed {
			if m.PeerURL == c.slots[2].peerURL {
				require.Equal(t, m.ID, c.memberID(2), "m2 started as the member the initial cluster listed")
			}
		}

		// Data lost after the member ran: the static mark is still there (a stale Lease), yet etcd
		// must not start "new" beside the cluster; the agent asks to rejoin, as any member.
		c.kill(2)
		c.wipe(2)
		c.setStatic(2, 3)
		c.start(2, 0)
		c.waitFor("m2 to ask to rejoin", stepMax, func() bool {
			return c.leases.Report(c.slots[2].lease).Reason() == api.ReasonWaitingForJoin
		})
		c.intent(2, api.IntentMember, false, permit)
		c.waitFor("m2 back", stepMax, func() bool { return c.voters(0, 1, 2) })
		require.Equal(t, cid, c.leases.Report(c.slots[2].lease).ClusterID, "one cluster, not two")
	})
}

// The Lease alone cannot make a member start from a static initial cluster: agent.json must record the
// same creation; nor can a seed mark on a cluster agent.json records as static (one hand edit is not
// enough to start a cluster a second way).
func TestMembershipStaticNeedsTheRecord(t *testing.T) {
	c := newPlainCluster(t, newestEtcd, 2)
	c.static = 3 // agent.json says static/3
	c.setStatic(0, 2)
	c.setStatic(1, 2)
	c.start(0, 0)
	c.waitFor("m0 to refuse the static start", stepMax, func() bool {
		r := c.leases.Report(c.slots[0].lease)
		return r.Reason() == api.ReasonWaitingForSeed
	})
	_, err := os.Stat(c.slots[0].dataDir() + "/member")
	require.True(t, os.IsNotExist(err), "etcd never ran: %v", err)
	c.kill(0)
	// Nor does a seed mark start a cluster that agent.json records as created statically.
	c.intent(0, api.IntentMember, true, 0)
	c.start(0, 0)
	c.waitFor("m0 to ignore the seed mark", stepMax, func() bool {
		r := c.leases.Report(c.slots[0].lease)
		return r.Reason() == api.ReasonWaitingForSeed
	})
	_, err = os.Stat(c.slots[0].dataDir() + "/member")
	require.True(t, os.IsNotExist(err), "etcd never ran: %v", err)
	c.kill(0)
	c.setStatic(0, 2)
	c.static = 2
	c.start(0, 0)
	c.start(1, 0)
	took := c.waitFor("both to form the cluster", stepMax, func() bool { return c.voters(0, 1) })
	t.Logf("static creation of 2: %s", took.Round(10*time.Millisecond))
}
