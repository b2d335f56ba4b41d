package membership

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/api"
)

// quotaCluster is three plaintext members of etcd version v, bootstrapped, with a backend quota of
// quota bytes (small enough to fill in a test) and their events recorded.
func quotaCluster(t *testing.T, v string, quota int) *tcluster {
	c := newPlainCluster(t, v, 3)
	c.events = &MemRecorder{}
	c.flags = []string{"--quota-backend-bytes=" + strconv.Itoa(quota)}
	c.bootstrap(nil, 3)
	return c
}

// A member's database sizes reach its Lease, and a NOSPACE alarm is reported as an alarm of a member
// that stays healthy (raft works, reads are served): against real etcd with a 1 MiB quota, every
// version.
func TestMembershipDatabaseFullReported(t *testing.T) {
	forEachVersionParallel(t, func(t *testing.T, v string) {
		c := quotaCluster(t, v, 4<<20)
		ids := map[string]bool{}
		for i := range c.slots {
			ids[c.memberID(i)] = true
		}
		cl := c.client()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// Fill until etcd refuses: 64 KiB values, bounded in count.
		val := strings.Repeat("x", 64<<10)
		var full error
		for n := 0; n < 400 && full == nil; n++ {
			_, full = cl.Put(ctx, "fill/"+strconv.Itoa(n), val)
		}
		require.ErrorIs(t, full, rpctypes.ErrNoSpace, "a 4 MiB quota must fill within 400 writes of 64 KiB")
		// Every member reports the alarm (the alarm list is the cluster's), its sizes, and stays healthy.
		// The size too is waited for: a member that saw the alarm before it applied the last writes
		// reports a smaller file for a look (a cold CI run at 18117a4 caught 2.7 MB on v3.6.16).
		c.waitFor("NOSPACE and a full file in every report", stepMax, func() bool {
			for i := range c.slots {
				r := c.leases.Report(c.slots[i].lease)
				if !r.Healthy || len(r.Alarms) == 0 || api.AlarmTypes(r.Alarms)[0] != api.AlarmNoSpace || r.DBSize <= 3<<20 {
					return false
				}
			}
			return true
		})
		r := c.leases.Report(c.slots[0].lease)
		require.Greater(t, r.DBSize, int64(3<<20), "the reported size is the full database's")
		require.LessOrEqual(t, r.DBSizeInUse, r.DBSize)
		for _, a := range r.Alarms {
			_, raisedBy, _ := strings.Cut(a, "@")
			require.True(t, ids[raisedBy], "alarm %q names a member of the cluster %v", a, ids)
		}
		// The members that raised the alarm say so, once each.
		raised := map[string]int{}
		for _, e := range c.events.Events() {
			if e.Reason == EventAlarmRaised {
				require.True(t, e.Warning)
				require.Contains(t, e.Note, "raised NOSPACE")
				raised[e.Note]++
			}
		}
		require.NotEmpty(t, raised, "AlarmRaised posted")
		for note, n := range raised {
			require.Equal(t, 1, n, "posted once: %s", note)
		}
		// Reads are still served, and etcd's own readiness (what the pod's readiness probe forwards to)
		// stays ready: the pods are not taken out of the Services.
		_, err := cl.Get(ctx, "fill/0")
		require.NoError(t, err)
		resp, err := http.Get(c.slots[1].clientURL + "/readyz")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "/readyz under NOSPACE")
	})
}

func TestStatusHealthy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		errors int
		alarms []string
		leader uint64
		want   bool
	}{
		{"no errors, a leader", 0, nil, 1, true},
		{"no leader", 0, nil, 0, false},
		{"NOSPACE only: raft works", 2, []string{"NOSPACE@a", "NOSPACE@b"}, 1, true},
		{"NOSPACE and no leader", 2, []string{"NOSPACE@a", "NOSPACE@b"}, 0, false},
		{"CORRUPT", 1, []string{"CORRUPT@a"}, 1, false},
		{"NOSPACE plus an error that is not an alarm", 2, []string{"NOSPACE@a"}, 1, false},
		{"errors but the alarm list unread", 1, nil, 1, false},
	} {
		require.Equal(t, tc.want, statusHealthy(tc.errors, tc.alarms, tc.leader), tc.name)
	}
}

// defragPass asks each slot in order to defragment for token, as the hook does (one at a time, the
// next once the previous reports the token done), and returns the reports.
func (c *tcluster) defragPass(token string, order []int) []api.Report {
	var out []api.Report
	for _, i := range order {
		lease := c.slots[i].lease
		c.leases.SetDefrag(lease, token)
		c.waitFor("slot "+itoa(i)+" to defragment", stepMax, func() bool {
			r := c.leases.Report(lease)
			if r.Error != "" {
				c.t.Logf("slot %d: %s", i, r.Error)
			}
			return r.DefragDone == token
		})
		c.leases.SetDefrag(lease, "")
		out = append(out, c.leases.Report(lease))
	}
	return out
}

// writeRounds writes 64 keys of 64 KiB under prefix (4 MiB), rounds times over: history to compact. The
// revision of its last write.
func writeRounds(ctx context.Context, t *testing.T, cl *clientv3.Client, prefix string, rounds int) int64 {
	val := strings.Repeat("v", 64<<10)
	var rev int64
	for range rounds {
		for n := 0; n < 64; n++ {
			resp, err := cl.Put(ctx, prefix+strconv.Itoa(n), val)
			require.NoError(t, err)
			rev = resp.Header.Revision
		}
	}
	return rev
}

// The space pass (docs/design/15-maintenance.md §15.6) against real etcd, every version: asked while
// a member's file is past 70% of the quota with an eighth of it to give back, the agent defragments
// and its report says the file is below the line; asked again when nothing is left to give back, it
// does not defragment; and every report carries the quota etcd runs with.
func TestMembershipSpacePass(t *testing.T) {
	const quota = 16 << 20
	forEachVersionParallel(t, func(t *testing.T, v string) {
		c := quotaCluster(t, v, quota)
		cl := c.client()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		// 12 MiB of history over 4 MiB of keys, then compacted: past the 11.2 MiB line, 8 MiB free.
		rev := writeRounds(ctx, t, cl, "space/", 3)
		_, err := cl.Compact(ctx, rev, clientv3.WithCompactPhysical())
		require.NoError(t, err)
		token := api.SpacePass(api.DefaultSpaceActAtPercent)
		wants := func(r api.Report) bool {
			return api.SpaceWantsDefrag(r.DBSize, r.DBSizeInUse, quota, api.DefaultSpaceActAtPercent)
		}
		c.waitFor("every report past the line with room to give back", stepMax, func() bool {
			if _, err := cl.Put(ctx, "nudge", "1"); err != nil { // bbolt frees pages at the next write
				return false
			}
			for _, s := range c.slots {
				if !wants(c.leases.Report(s.lease)) {
					return false
				}
			}
			return true
		})
		for i, s := range c.slots {
			r := c.leases.Report(s.lease)
			require.Equal(t, int64(quota), r.QuotaBytes, "slot %d reports its quota", i)
			before := r.DBSize
			c.leases.SetDefrag(s.lease, token)
			c.waitFor("slot "+itoa(i)+" below the line", stepMax, func() bool { return !wants(c.leases.Report(s.lease)) })
			after := c.leases.Report(s.lease)
			require.Less(t, after.DBSize, before-(4<<20), "slot %d gave the free pages back", i)
			require.Less(t, after.DBSize*100, int64(quota)*api.DefaultSpaceActAtPercent, "slot %d below the line", i)
			last := after.LastDefrag
			require.NotEmpty(t, last)
			// Asked again with nothing to give back: the agent looks and does nothing.
			time.Sleep(1500 * time.Millisecond) // five looks
			require.Equal(t, last, c.leases.Report(s.lease).LastDefrag, "slot %d not defragmented again", i)
			c.leases.SetDefrag(s.lease, "")
		}
		got, err := cl.Get(ctx, "space/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		require.NoError(t, err)
		require.Equal(t, int64(64), got.Count, "every key kept")
	})
}

// Defragmentation through the Lease, against real etcd, every version: a fragmented file shrinks on
// each member in turn, the leader hands leadership over before its own, every acknowledged write
// stays readable; and a cluster full at its quota (NOSPACE) is recovered by the same pass: compacted,
// defragmented, its alarms disarmed, writes accepted again.
func TestMembershipDefragmentation(t *testing.T) {
	forEachVersionParallel(t, func(t *testing.T, v string) {
		c := quotaCluster(t, v, 16<<20)
		cl := c.client()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		// Fragment: write 4 MiB, overwrite it once, delete it, compact (8 MiB of a 16 MiB quota).
		rev := writeRounds(ctx, t, cl, "frag/", 2)
		_, err := cl.Delete(ctx, "frag/", clientv3.WithPrefix())
		require.NoError(t, err)
		_, err = cl.Compact(ctx, rev, clientv3.WithCompactPhysical())
		require.NoError(t, err)
		_, err = cl.Put(ctx, "kept", "1")
		require.NoError(t, err)

		// Exactly one report says leader: after an election under load one can be a look behind.
		leader := -1
		c.waitFor("one leader reported", stepMax, func() bool {
			n := 0
			for i := range c.slots {
				if r := c.leases.Report(c.slots[i].lease); r.Role == api.RoleLeader {
					leader, n = i, n+1
				}
			}
			return n == 1
		})
		var order []int
		for i := range c.slots {
			if i != leader {
				order = append(order, i)
			}
		}
		order = append(order, leader)
		before := map[int]int64{}
		c.waitFor("every file fragmented (the compaction's frees committed)", stepMax, func() bool {
			// A member compacts when the compaction reaches its log, perhaps after the last write: bbolt
			// releases the pages a transaction freed only when a later write transaction begins, so
			// without another write a member's frees can stay pending (counted in use) for good. The
			// CI run at 2f35424 timed out here on v3.6.16 under load.
			if _, err := cl.Put(ctx, "nudge", "1"); err != nil {
				return false
			}
			for i, s := range c.slots {
				st, err := c.etcd(2*time.Second).Status(ctx, s.clientURL)
				if err != nil || st.DbSize-st.DbSizeInUse < 1<<20 {
					return false
				}
				before[i] = st.DbSize
			}
			return true
		})
		reports := c.defragPass("schedule:t1", order)
		for k, r := range reports {
			i := order[k]
			require.Less(t, r.DBSize, before[i]-(1<<20), "slot %d's file shrank by the free pages", i)
			require.NotEmpty(t, r.LastDefrag)
		}
		// The report written with the outcome still has the role read before; the next look has the new one.
		c.waitFor("the former leader to report a follower", stepMax, func() bool {
			return c.leases.Report(c.slots[leader].lease).Role == api.RoleVoter
		})
		got, err := cl.Get(ctx, "kept")
		require.NoError(t, err)
		require.Len(t, got.Kvs, 1)

		// Full: NOSPACE. The same pass compacts, defragments, disarms; writes are accepted again.
		val := strings.Repeat("y", 64<<10)
		var full error
		for n := 0; n < 600 && full == nil; n++ {
			_, full = cl.Put(ctx, "fill/"+strconv.Itoa(n%50), val) // overwrites: history, not data, fills it
		}
		require.ErrorIs(t, full, rpctypes.ErrNoSpace)
		// The recovery's token is the same at every occurrence (api.NoSpacePass): the second time the
		// cluster fills, the members recover again although they reported that token done.
		const quota = 16 << 20
		for occurrence := 1; occurrence <= 2; occurrence++ {
			if occurrence == 2 {
				full = nil
				for n := 0; n < 600 && full == nil; n++ {
					_, full = cl.Put(ctx, "fill/"+strconv.Itoa(n%50), val)
				}
				require.ErrorIs(t, full, rpctypes.ErrNoSpace, "full again")
			}
			// Every member's report, not one: the turns below read each member's own report, and one still
			// from before the alarm says that member is done (the CI run at e78db46, cold and loaded, found
			// no turn at all on v3.5.35 and left the alarm armed).
			c.waitFor("NOSPACE reported by every member", stepMax, func() bool {
				for _, s := range c.slots {
					if len(c.leases.Report(s.lease).Alarms) == 0 {
						return false
					}
				}
				return true
			})
			// The hook's turns (sync.decideDefrag): each member whose file is at the quota and that did
			// not raise the alarm, then each raiser; followers before the leader. A member is done when
			// its file is below the quota line and its own alarm is gone.
			done := func(i int) bool {
				r := c.leases.Report(c.slots[i].lease)
				return !slices.Contains(r.Alarms, api.AlarmNoSpace+"@"+c.memberID(i)) && !api.OverQuota(r.DBSize, quota)
			}
			var turns []int
			// Like the hook, which asks again at the next sync, a pass that finds no turn while an alarm is
			// still armed reads the reports again: one may be a look behind.
			deadline := time.Now().Add(stepMax)
			for len(turns) < 2*len(c.slots) {
				alarms, err := cl.AlarmList(ctx)
				require.NoError(t, err)
				raiser := map[string]bool{}
				for _, a := range alarms.Alarms {
					raiser[api.FormatID(a.MemberID)] = true
				}
				next := -1
				for pass := 0; pass < 4 && next < 0; pass++ {
					for i := range c.slots {
						r := c.leases.Report(c.slots[i].lease)
						if !done(i) && raiser[c.memberID(i)] == (pass >= 2) && (r.Role == api.RoleLeader) == (pass%2 == 1) {
							next = i
							break
						}
					}
				}
				if next < 0 && len(alarms.Alarms) > 0 && time.Now().Before(deadline) {
					time.Sleep(200 * time.Millisecond)
					continue
				}
				if next < 0 {
					break
				}
				turns = append(turns, next)
				lease := c.slots[next].lease
				c.leases.SetDefrag(lease, api.NoSpacePass)
				c.waitFor("slot "+itoa(next)+" to recover", stepMax, func() bool { return done(next) })
				c.leases.SetDefrag(lease, "")
			}
			t.Logf("occurrence %d: turns %v", occurrence, turns)
			alarms, err := cl.AlarmList(ctx)
			require.NoError(t, err)
			require.Empty(t, alarms.Alarms, "every member's NOSPACE alarm is disarmed (occurrence %d)", occurrence)
			for i, s := range c.slots {
				// Status answers, then its answer is judged: one call that timed out on a loaded machine
				// says nothing of the file.
				var st *clientv3.StatusResponse
				c.waitFor("slot "+itoa(i)+"'s status", stepMax, func() bool {
					var err error
					st, err = c.etcd(2*time.Second).Status(ctx, s.clientURL)
					return err == nil
				})
				require.False(t, api.OverQuota(st.DbSize, quota), "slot %d's file has room: %d bytes (occurrence %d)", i, st.DbSize, occurrence)
			}
			// Writes are accepted again, through every member: none is left at the quota to raise it anew.
			for i, s := range c.slots {
				one := c.clientOf(s.clientURL)
				_, err = one.Put(ctx, "after/"+itoa(i), "ok")
				one.Close()
				require.NoError(t, err, "writes are accepted again through slot %d (occurrence %d)", i, occurrence)
			}
			_, err = cl.Delete(ctx, "fill/", clientv3.WithPrefix())
			require.NoError(t, err)
		}
		reasons := map[string]int{}
		for _, e := range c.events.Events() {
			reasons[e.Reason]++
		}
		require.GreaterOrEqual(t, reasons[EventAlarmRaised], 2, "a raise per occurrence at least: %v", reasons)
		c.waitFor("AlarmDisarmed posted", stepMax, func() bool {
			n := 0
			for _, e := range c.events.Events() {
				if e.Reason == EventAlarmDisarmed {
					n++
				}
			}
			return n >= 2
		})
		require.GreaterOrEqual(t, reasons[EventDefragmented], 5, "%v", reasons)
	})
}
