package membership

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/etcdhook/etcdhook/api"
)

// A member's database sizes reach its Lease, and a NOSPACE alarm is reported as an alarm of a member
// that stays healthy (raft works, reads are served): against real etcd with a 1 MiB quota, every
// version.
func TestMembershipDatabaseFullReported(t *testing.T) {
	forEachVersion(t, func(t *testing.T, v string) {
		c := newPlainCluster(t, v, 3)
		c.flags = []string{"--quota-backend-bytes=" + strconv.Itoa(4<<20)}
		c.bootstrap(nil, 3)
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
		c.waitFor("NOSPACE in every report", stepMax, func() bool {
			for i := range c.slots {
				r := c.leases.Report(c.slots[i].lease)
				if !r.Healthy || len(r.Alarms) == 0 || api.AlarmTypes(r.Alarms)[0] != api.AlarmNoSpace {
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
