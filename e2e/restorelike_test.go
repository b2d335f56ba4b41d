//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/api"
)

// sibling is another EtcdCluster, name, in s's namespace (a restore --like copies a cluster of the same
// namespace); it goes with the namespace.
func (s *scenario) sibling(name string) *scenario {
	return &scenario{t: s.t, e: s.e, ns: s.ns, name: name, ctx: s.ctx}
}

// keyspaceAt is every key and value under prefix as the cluster served them at revision rev (rev 0:
// now), through the client Service: etcd's own get --rev.
func (s *scenario) keyspaceAt(prefix string, rev int64) (map[string]string, int64) {
	out := map[string]string{}
	var at int64
	s.withServiceClient(30*time.Second, func(ctx context.Context, cl *clientv3.Client) {
		opts := []clientv3.OpOption{clientv3.WithPrefix()}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := cl.Get(ctx, prefix, opts...)
		require.NoError(s.t, err)
		for _, kv := range resp.Kvs {
			out[string(kv.Key)] = string(kv.Value)
		}
		at = resp.Header.Revision
	})
	return out, at
}

// TestRestoreLikeSource runs the README's restore commands as a user would, against a source whose only
// backups are continuous (no schedule: the writer took the first snapshot itself, so
// status.backup.lastSnapshot is empty): `kubectl etcd restore NEW --like SRC` restores SRC's newest point,
// `--to-revision R` and `--to-time T` the points asked, each equal to SRC's own `get --rev` there; and a
// restore naming nothing ends Failed within one sync of the seed's report, the plugin exiting 1 at once.
func TestRestoreLikeSource(t *testing.T) {
	beside(t)
	endpoint := startMinIO(t)
	src := newScenario(t, "like")
	dest := fmt.Sprintf("s3://%s/like?endpoint=%s&region=us-east-1&use_path_style=true", e2eBucket, endpoint)
	src.apply(map[string]any{"size": int64(1), "version": *etcdVersion, "storage": map[string]any{"size": "1Gi"},
		"backup": map[string]any{"destination": dest, "credentialsSecret": src.credentialsSecret(), "continuous": map[string]any{"chunkInterval": "2s"}}})
	src.waitFor("the source cluster", stepTimeout, src.settled(1))

	// Writes in three batches, a time marked between the first two; each batch's revisions recorded.
	rng := rand.New(rand.NewPCG(42, uint64(time.Now().UnixNano())))
	var revs []int64
	var marked time.Time
	var markedRev int64
	cl, err := src.newClient([]string{src.clientEndpoint()})
	require.NoError(t, err)
	defer cl.Close()
	for batch := range 3 {
		for i := range 60 {
			ctx, cancel := context.WithTimeout(src.ctx, 5*time.Second)
			key := fmt.Sprintf("/like/%02d", rng.IntN(40)) // overwrites and deletes: a point is more than a count
			var rev int64
			if i%7 == 6 {
				r, err := cl.Delete(ctx, key)
				require.NoError(t, err)
				rev = r.Header.Revision
			} else {
				r, err := cl.Put(ctx, key, fmt.Sprintf("b%d-i%d", batch, i))
				require.NoError(t, err)
				rev = r.Header.Revision
			}
			cancel()
			revs = append(revs, rev)
		}
		if batch == 0 {
			// A time well apart from the writes on either side: the writer stamps a revision when it
			// receives it.
			src.waitFor("the writer to cover the first batch", 2*time.Minute, func() bool {
				c := src.cluster().Status.Backup.Continuous
				return c != nil && c.Revision >= revs[len(revs)-1]
			})
			time.Sleep(2 * time.Second)
			marked, markedRev = time.Now().UTC(), revs[len(revs)-1]
			time.Sleep(2 * time.Second)
		}
	}
	last := revs[len(revs)-1]
	src.waitFor("the writer to cover every write", 2*time.Minute, func() bool {
		c := src.cluster().Status.Backup.Continuous
		return c != nil && c.Revision >= last
	})
	require.Empty(t, src.cluster().Status.Backup.LastSnapshot, "no schedule: status names no snapshot, which --like refused before")
	toRev := revs[60+rng.IntN(60)] // a revision inside the second batch

	restore := func(name string, args ...string) (*scenario, time.Duration) {
		dst := src.sibling(name)
		ctx, cancel := context.WithTimeout(src.ctx, stepTimeout+time.Minute)
		defer cancel()
		start := time.Now()
		code, out, errOut := dst.kubectlEtcd(ctx, append([]string{"restore", name, "--like", src.name, "--timeout", stepTimeout.String()}, args...)...)
		require.Equal(t, 0, code, "kubectl etcd restore %s --like %s %v: %s", name, src.name, args, errOut)
		require.Contains(t, out, "restored: ")
		took := time.Since(start)
		dst.waitFor("the restored cluster", stepTimeout, dst.settled(1))
		return dst, took
	}
	var lines []string
	for _, tc := range []struct {
		name string
		args []string
		want int64 // the revision of SRC the copy must equal; 0: the newest point
	}{
		{"copy-newest", nil, 0},
		{"copy-rev", []string{"--to-revision", fmt.Sprint(toRev)}, toRev},
		{"copy-time", []string{"--to-time", marked.Format(time.RFC3339Nano)}, markedRev},
	} {
		dst, took := restore(tc.name, tc.args...)
		rs := dst.cluster().Status.Restore
		require.NotNil(t, rs)
		require.Equal(t, "Restored", rs.Phase)
		require.True(t, strings.HasPrefix(rs.Source, fmt.Sprintf("s3://%s/like/%s/%s/latest", e2eBucket, src.ns, src.name)), "SRC's folder: %s", rs.Source)
		want := tc.want
		if want == 0 {
			want = rs.Revision
			require.GreaterOrEqual(t, want, last, "the newest point reaches every write the writer had covered")
		}
		require.Equal(t, want, rs.Revision, "%s: the revision restored", tc.name)
		wantKeys, _ := src.keyspaceAt("/like/", want)
		got, _ := dst.keyspaceAt("/like/", 0)
		require.Equal(t, wantKeys, got, "%s: the keyspace equals SRC's get --rev %d", tc.name, want)
		lines = append(lines, fmt.Sprintf("| `kubectl etcd restore %s --like %s %s` | revision %d, %d keys equal to SRC's `get --rev` | %s |",
			tc.name, src.name, strings.Join(tc.args, " "), want, len(got), took.Round(100*time.Millisecond)))
	}

	// A restore naming nothing: terminal at the seed's first attempt; the plugin's wait ends at once.
	bad := src.sibling("nothing")
	empty := fmt.Sprintf("s3://%s/like/nobody/here/latest?endpoint=%s&region=us-east-1&use_path_style=true", e2eBucket, endpoint)
	ctx, cancel := context.WithTimeout(src.ctx, stepTimeout)
	defer cancel()
	start := time.Now()
	code, _, errOut := bad.kubectlEtcd(ctx, "restore", bad.name, "--from", empty, "--credentials-secret", src.credentialsSecret(), "--size", "1", "--timeout", stepTimeout.String())
	took := time.Since(start)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "spec.restore.from: no such snapshot")
	ec := bad.cluster()
	require.Equal(t, api.PhaseFailed, ec.Status.Phase)
	require.Equal(t, "Failed", ec.Status.Restore.Phase)
	c := condition(ec, api.CondRestoreFailed)
	require.NotNil(t, c)
	require.Equal(t, api.ReasonRestoreRefused, c.Reason)
	// Ended: the seed does not try again (its report stays; no second RestoreFailed Event from it).
	bad.checkEvents("RestoreFailed")
	time.Sleep(15 * time.Second) // past the first backoff (5 s) a retry would have taken
	require.Equal(t, api.PhaseFailed, bad.cluster().Status.Phase)
	require.Equal(t, int32(1), bad.eventCount("RestoreFailed"), "one attempt")
	lines = append(lines, fmt.Sprintf("| `kubectl etcd restore %s --from <a folder with no snapshot>/latest` | exit 1, phase Failed, RestoreFailed/RestoreRefused naming spec.restore.from | %s |",
		bad.name, took.Round(100*time.Millisecond)))
	results.add(t.Name(), "| command (source: continuous backup only, no schedule) | result | command to exit |\n|---|---|---|\n"+strings.Join(lines, "\n")+"\n")
}
