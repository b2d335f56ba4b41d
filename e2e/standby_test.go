//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/api"
)

// keyspaceAt is every key and value the client reads at rev (0: now).
func keyspaceAt(t *testing.T, cl *clientv3.Client, rev int64) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithFromKey()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	r, err := cl.Get(ctx, "\x00", opts...)
	require.NoError(t, err)
	out := make(map[string]string, len(r.Kvs))
	for _, kv := range r.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

// TestStandby is the warm standby of issue 44 (docs/design/21-standby.md) under the real Metacontroller:
// two namespaces stand for two regions, each with its own folder of the store. A primary with continuous
// backup under a writer (200 writes/s); a standby following it, whose lag is sampled; writes to the
// standby refused by its fence; promotion measured from `kubectl etcd promote` to Available with every
// member healthy; the promoted keyspace equal to the primary's at the promoted revision; the old primary
// writing afterwards, and none of it reaching the promoted cluster.
func TestStandby(t *testing.T) {
	beside(t)
	endpoint := startMinIO(t)
	dest := func(prefix string) string {
		return fmt.Sprintf("s3://%s/%s?endpoint=%s&region=us-east-1&use_path_style=true", e2eBucket, prefix, endpoint)
	}
	p := newScenario(t, "sbp")
	p.apply(map[string]any{"size": 3, "version": *etcdVersion,
		"backup": map[string]any{"destination": dest("sbp"), "credentialsSecret": p.credentialsSecret(), "continuous": map[string]any{}}})
	p.waitFor("the primary", stepTimeout, p.settled(3))
	p.waitFor("the primary's first restorable point", stepTimeout, func() bool {
		b := p.cluster().Status.Backup
		return b != nil && b.Continuous != nil && b.Continuous.Revision > 0
	})
	pcl, err := p.newClient([]string{p.clientEndpoint()})
	require.NoError(t, err)
	defer pcl.Close()
	const rate = 200
	w := startRPOWriter(pcl, rate, 4, 600*rate)
	defer w.Stop()

	s := newScenario(t, "sbs")
	from := fmt.Sprintf("s3://%s/sbp/%s/%s/latest?endpoint=%s&region=us-east-1&use_path_style=true", e2eBucket, p.ns, p.name, endpoint)
	s.apply(map[string]any{"size": 3, "version": *etcdVersion,
		"standby": map[string]any{"from": from, "credentialsSecret": s.credentialsSecret()},
		"backup":  map[string]any{"destination": dest("sbs"), "credentialsSecret": s.credentialsSecret(), "continuous": map[string]any{}}})
	seeded := s.waitFor("the standby", 2*stepTimeout, s.settled(3))
	s.waitFor("the applier's first report", stepTimeout, func() bool {
		sb := s.cluster().Status.Standby
		return sb != nil && sb.Revision > 0 && sb.Lag != nil
	})

	// The lag while the primary takes 200 writes/s: one sample every 2 s for a minute.
	var lags []time.Duration
	for range 30 {
		if sb := s.cluster().Status.Standby; sb != nil && sb.Lag != nil {
			lags = append(lags, sb.Lag.Duration)
		}
		time.Sleep(2 * time.Second)
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	require.NotEmpty(t, lags)
	p50, p99 := lags[len(lags)/2], lags[len(lags)*99/100]

	// A standby takes no writes: the shared client certificate reads, and its put is refused.
	scl, err := s.newClient([]string{s.clientEndpoint()})
	require.NoError(t, err)
	defer scl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err = scl.Put(ctx, "standby-write", "x")
	cancel()
	require.Error(t, err, "a write to the standby before promotion")
	require.Contains(t, err.Error(), "permission denied")
	require.NotEmpty(t, keyspaceAt(t, scl, 0), "it serves reads")

	// The writer stops; the standby catches up with the primary's last revision (uploaded within the
	// chunk interval).
	w.Stop()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	last, err := pcl.Get(ctx, "\x00", clientv3.WithKeysOnly(), clientv3.WithLimit(1))
	cancel()
	require.NoError(t, err)
	s.waitFor("the standby at the primary's last revision", stepTimeout, func() bool {
		sb := s.cluster().Status.Standby
		return sb != nil && sb.Revision >= last.Header.Revision
	})

	// Promotion, timed from the command to Available with every member healthy.
	asked := time.Now()
	code, _, _ := s.kubectlEtcd(s.ctx, "promote", s.name, "--timeout", stepTimeout.String())
	require.Equal(t, 0, code, "kubectl etcd promote")
	s.waitFor("the promoted standby settled", stepTimeout, s.settled(3))
	took := time.Since(asked)
	promoted := s.cluster().Status.Standby.Promoted
	require.NotNil(t, promoted)
	require.Equal(t, last.Header.Revision, promoted.Revision, "the standby ends at the primary's last revision")

	// Exactness: the promoted keyspace is the primary's at the promoted revision.
	require.Equal(t, keyspaceAt(t, pcl, promoted.Revision), keyspaceAt(t, scl, 0), "the promoted keyspace is the primary's at revision %d", promoted.Revision)

	// The fence is lifted: the promoted cluster takes writes.
	s.waitFor("a write to the promoted cluster", stepTimeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := scl.Put(ctx, "promoted-write", "x")
		return err == nil
	})

	// The old primary writes on and keeps uploading to its folder: none of it reaches the promoted one.
	for i := range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := pcl.Put(ctx, fmt.Sprintf("after-promotion/%03d", i), "x")
		cancel()
		require.NoError(t, err)
	}
	p.waitFor("the old primary's writes uploaded", 2*time.Minute, func() bool {
		c := p.cluster().Status.Backup.Continuous
		return c != nil && c.Revision >= last.Header.Revision+100 // the 100 puts, each one revision
	})
	time.Sleep(10 * time.Second) // what an applier, were one left, would take to apply them
	reached := 0
	for k := range keyspaceAt(t, scl, 0) {
		if strings.HasPrefix(k, "after-promotion/") {
			reached++
		}
	}
	require.Zero(t, reached, "the old primary's writes after the promotion on the promoted cluster")
	_, kept := s.cluster().Annotations[api.AnnPromote]
	require.True(t, kept, "the promote token stays on the object (a second promote would change nothing)")

	t.Logf("standby: seeded and settled in %s; lag p50 %s p99 %s; promotion %s (revision %d, the primary's newest seen %d)",
		seeded, p50, p99, took, promoted.Revision, promoted.PrimaryNewestRevision)
	results.add(t.Name(), fmt.Sprintf("| figure | value |\n|---|---|\n"+
		"| primary writer | %d writes/s through the client Service, 4 clients |\n"+
		"| standby created to Available with 3 members (seed restores the primary's newest snapshot) | %s |\n"+
		"| lag behind the newest chunk stored, p50 / p99 (30 samples, 2 s apart) | %s / %s |\n"+
		"| `kubectl etcd promote` to Available with every member healthy | %s |\n"+
		"| promoted keyspace equals the primary's get --rev %d | yes |\n"+
		"| old primary's writes after promotion on the promoted cluster | %d of 100 |\n",
		rate, seeded.Round(100*time.Millisecond), p50, p99, took.Round(100*time.Millisecond), promoted.Revision, reached))
}
