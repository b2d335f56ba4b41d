//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// TestDefragmentation: a fragmented 3-member cluster (keys written, overwritten, deleted, compacted)
// is defragmented by its schedule (spec.maintenance.defrag, set once the files are fragmented: its
// latest fire time is due at once) under a writer: one member at a time, every member's file shrinks,
// the Defragmenting condition comes and goes, kubectl describe shows Defragmented events; write
// failures and p99 during the pass go to RESULTS.md. Then an on-demand pass (etcd.io/defrag-now)
// goes over every member although the files are compact, asked with kubectl etcd defrag.
func TestDefragmentation(t *testing.T) {
	beside(t)
	s := settledScenario(t, "defrag", 3)
	cl, err := s.newClient([]string{s.clientEndpoint()})
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Minute)
	defer cancel()
	val := strings.Repeat("f", 32<<10)
	var rev int64
	for round := 0; round < 2; round++ {
		for n := 0; n < 256; n++ { // 8 MiB a round
			resp, err := cl.Put(ctx, "frag/"+strconv.Itoa(n), val)
			require.NoError(t, err)
			rev = resp.Header.Revision
		}
	}
	_, err = cl.Delete(ctx, "frag/", clientv3.WithPrefix())
	require.NoError(t, err)
	_, err = cl.Compact(ctx, rev, clientv3.WithCompactPhysical())
	require.NoError(t, err)
	// bbolt frees a compaction's pages at the next write transaction: a few writes commit them on every
	// member (the writer below would too, but the sizes are read before it starts).
	for n := 0; n < 5; n++ {
		_, err = cl.Put(ctx, "after-compaction", strconv.Itoa(n))
		require.NoError(t, err)
		time.Sleep(200 * time.Millisecond)
	}
	// The agents report sizes when they move by a few percent: wait until every member shows the free
	// space the compaction left.
	before := map[string]int64{}
	s.waitFor("fragmented files reported", stepTimeout, func() bool {
		ms := s.cluster().Status.Members
		for _, m := range ms {
			if m.DBSize-m.DBSizeInUse < 4<<20 {
				return false
			}
			before[m.Name] = m.DBSize
		}
		return len(ms) == 3
	})

	w := s.startWriter("scheduled pass")
	asked := time.Now()
	withDefrag := spec(3, *etcdVersion)
	withDefrag["maintenance"] = map[string]any{"defrag": map[string]any{"schedule": "* * * * *", "minFreePercent": int64(25)}}
	s.apply(withDefrag)
	took := s.defragPass("schedule:", asked)
	// The sizes an agent reports after its pass come from a Status call of its own: one that timed out
	// leaves the old size for a look. Waited for, then judged.
	members := s.cluster().Status.Members
	s.waitFor("every member's report of a smaller file", time.Minute, func() bool {
		members = s.cluster().Status.Members
		for _, m := range members {
			if m.DBSize >= before[m.Name]-(2<<20) {
				return false
			}
		}
		return true
	})
	var sizes []string
	for _, m := range members {
		require.Less(t, m.DBSize, before[m.Name]-(2<<20), "%s's file shrank", m.Name)
		sizes = append(sizes, fmt.Sprintf("%s %.1f -> %.1f MiB", m.Name, float64(before[m.Name])/(1<<20), float64(m.DBSize)/(1<<20)))
	}
	s.checkEvents("Defragmented")
	w.Finish(fmt.Sprintf("defragmentation pass by schedule (spec.maintenance.defrag, every minute, minFreePercent 25) over 3 members, one at a time: %s (%s)\n\n",
		took.Round(100*time.Millisecond), strings.Join(sizes, ", ")))

	// On demand, with the plugin as operations.md shows it (etcd.io/defrag-now=<the time>): every member,
	// although each file is compact now (the schedule asks nobody again). The pass is judged by the
	// test's own watch; the plugin must set the value and end with success. (Its "done" proves little
	// here: it counts a member defragmented within the minute before the request, as every member was
	// by the scheduled pass.)
	asked = time.Now()
	defrag := s.kubectlEtcdMeanwhile(s.ctx, "defrag", s.name)
	s.defragPass("now:", asked)
	code, out, _ := defrag()
	require.Equal(t, 0, code, "kubectl etcd defrag")
	require.Contains(t, out, "done: every member of "+s.ns+"/"+s.name+" defragmented")

	// The same settled cluster serves the network spec's check (no cluster of its own in CI).
	s.checkMetricsNamespace(withDefrag)
}

// defragPass waits until a pass whose token starts with prefix has gone over every member (each
// reports a defragmentation since asked, the Defragmenting condition gone) and checks that the
// condition named that pass while it was shown and that the hook never asked two members at once.
func (s *scenario) defragPass(prefix string, asked time.Time) time.Duration {
	t := s.t
	most := 0
	seen := false
	took := s.waitFor("the pass over", stepTimeout, func() bool {
		ec := s.cluster()
		c := condition(ec, api.CondDefragmenting)
		if c != nil {
			seen = true
			require.Contains(t, c.Message, "pass "+prefix, c.Message)
		}
		// At most one member at a time, from one List (one snapshot of every Lease; three GETs could
		// straddle the hook moving the turn and count both members): the members executing a pass
		// (their agents report etcd.io/defragging) and those asked for a pass they have not reported
		// done. Metacontroller updates the Leases one by one, so the member that finished may still carry
		// its done pass's token for a moment beside the next member's: that is not two at once.
		leases, err := s.e.kube.CoordinationV1().Leases(s.ns).List(s.ctx, metav1.ListOptions{})
		if err == nil {
			executing, pending := 0, 0
			for _, l := range leases.Items {
				a := l.Annotations
				if a[api.AnnDefragging] != "" {
					executing++
				}
				if a[api.AnnDefrag] != "" && a[api.AnnDefrag] != a[api.AnnDefragDone] {
					pending++
				}
			}
			most = max(most, executing, pending)
		}
		if c != nil {
			return false
		}
		for _, m := range ec.Status.Members {
			// The agents' clock is this machine's (localkube); lastDefragTime has whole seconds. No slack:
			// the second pass follows the first by seconds, whose times must not count.
			if m.LastDefragTime == nil || m.LastDefragTime.Time.Before(asked.Truncate(time.Second)) {
				return false
			}
		}
		return len(ec.Status.Members) == 3
	})
	require.True(t, seen, "the Defragmenting condition was shown during the pass")
	require.LessOrEqual(t, most, 1, "never two members asked at once")
	return took
}
