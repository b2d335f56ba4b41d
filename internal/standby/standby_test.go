package standby

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"gocloud.dev/blob"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/etcdhook/etcdhook/internal/backup/delta"
	"github.com/etcdhook/etcdhook/internal/testsupport"
)

// A standby seeded from the primary's full snapshot follows the primary's continuous backup while the
// primary writes (puts, deletes, range deletes, transactions, leases granted, expiring and revoked, a
// compaction) and a new full snapshot starts a new chain under it: it holds exactly the primary's
// keyspace at the revision it reached (`get --rev`: values, create and mod revisions, versions, leases),
// the leases under their IDs, and says so. Stopped and started again, it skips what it holds. Primary
// and standby are processes of each etcd version.
func TestStandbyFollowsThePrimary(t *testing.T) {
	forEachVersion(t, func(t *testing.T, version string) {
		ctx := context.Background()
		primary := startOn(t, version, filepath.Join(t.TempDir(), "primary"), "primary", freeURL(t))
		b := openBucket(t, filepath.Join(t.TempDir(), "bucket"))
		id := clusterID(t, primary)
		old, err := primary.Grant(ctx, 60)
		require.NoError(t, err)
		_, err = primary.Put(ctx, "held", "before the snapshot", clientv3.WithLease(old.ID))
		require.NoError(t, err)
		writeKeys(t, primary, "seed", 30)

		m1 := fullSnapshot(t, primary, b)
		f1 := follow(t, primary, b, m1, 2048)
		standby := seedOn(t, version, b, m1, "standby")
		require.Equal(t, m1.Revision, revisionOf(t, standby), "seeded at the snapshot's revision, no bump")

		p := &progress{}
		stop := run(applier(b, id, standby, p))

		// Every kind of write, while the applier follows.
		kept, err := primary.Grant(ctx, 60)
		require.NoError(t, err)
		short, err := primary.Grant(ctx, 2)
		require.NoError(t, err)
		revoked, err := primary.Grant(ctx, 60)
		require.NoError(t, err)
		for i := range 40 {
			k := fmt.Sprintf("k%02d", i%25)
			switch i % 8 {
			case 0:
				_, err = primary.Delete(ctx, k)
			case 1:
				_, err = primary.Txn(ctx).Then(clientv3.OpPut(k, fmt.Sprint("t", i)), clientv3.OpDelete(fmt.Sprintf("k%02d", (i+3)%25)), clientv3.OpPut("txn", fmt.Sprint(i))).Commit()
			case 2:
				_, err = primary.Delete(ctx, "k1", clientv3.WithPrefix())
			case 3:
				_, err = primary.Put(ctx, "lease/kept", fmt.Sprint(i), clientv3.WithLease(kept.ID))
			case 4:
				_, err = primary.Put(ctx, fmt.Sprintf("lease/revoked/%d", i), "x", clientv3.WithLease(revoked.ID))
			case 5:
				_, err = primary.Put(ctx, "lease/short", "x", clientv3.WithLease(short.ID))
			default:
				_, err = primary.Put(ctx, k, fmt.Sprint("v", i))
			}
			require.NoError(t, err)
		}
		_, err = primary.Revoke(ctx, revoked.ID)
		require.NoError(t, err)
		require.Eventually(t, func() bool { // the short lease expires on the primary: its deletes are in the stream
			r, err := primary.Get(ctx, "lease/short")
			return err == nil && len(r.Kvs) == 0
		}, 15*time.Second, 100*time.Millisecond)
		mid := writeKeys(t, primary, "mid", 20)
		_, err = primary.Compact(ctx, mid)
		require.NoError(t, err)

		// A new full snapshot: the writer goes on in the old chain until it notices, then starts the new
		// one. The standby continues in the new chain without a gap.
		m2 := fullSnapshot(t, primary, b)
		after := writeKeys(t, primary, "after", 30)
		f1.waitStored(t, m1.Revision, after)
		f1.stop()
		f2 := follow(t, primary, b, m2, 2048)
		end := writeKeys(t, primary, "new chain", 40)
		f2.waitStored(t, m2.Revision, end)

		require.Eventually(t, func() bool { return p.get().Revision == end }, 60*time.Second, 20*time.Millisecond, "the standby reaches %d", end)
		require.NoError(t, stop(), "stopped by its context: no error")
		require.Equal(t, end, requireSame(t, primary, standby))
		last := p.get()
		require.Equal(t, Progress{Revision: end, Time: last.Time, Newest: end, NewestTime: last.Time, Chain: m2.ChainDir(), ChainStart: m2.Revision, ClusterID: id}, last,
			"in the new chain, caught up: no lag")
		require.False(t, last.Time.IsZero(), "the time the primary's writer received the revision")

		// The leases under the primary's IDs, kept alive: held and kept have keys; the short one's keys
		// are gone as on the primary.
		for _, l := range []clientv3.LeaseID{old.ID, kept.ID} {
			ttl, err := standby.TimeToLive(ctx, l)
			require.NoError(t, err)
			require.EqualValues(t, 60, ttl.GrantedTTL, "lease %x", l)
		}

		// Stopped, the primary writing on; started again, it goes on from the standby's revision.
		more := writeKeys(t, primary, "resumed", 25)
		f2.waitStored(t, m2.Revision, more)
		p2 := &progress{}
		stop = run(applier(b, id, standby, p2))
		require.Eventually(t, func() bool { return p2.get().Revision == more }, 60*time.Second, 20*time.Millisecond)
		require.NoError(t, stop())
		p2.mu.Lock()
		require.Equal(t, last.Revision, p2.first.Revision, "resumed from the standby's revision")
		require.Equal(t, last.Time, p2.first.Time, "its time read from the chain again")
		p2.mu.Unlock()
		require.Equal(t, more, requireSame(t, primary, standby))
	})
}

// A standby written to by anyone but its applier is not the primary's history any more: the next
// revision lands elsewhere, or the revision it holds is not the one recorded (an applier starting on
// it checks that first). Either stops at the last revision it applied.
func TestStandbyDiverged(t *testing.T) {
	ctx := context.Background()
	primary := startEtcd(t, filepath.Join(t.TempDir(), "primary"), "primary")
	b := openBucket(t, filepath.Join(t.TempDir(), "bucket"))
	id := clusterID(t, primary)
	writeKeys(t, primary, "seed", 10)
	m := fullSnapshot(t, primary, b)
	f := follow(t, primary, b, m, 1024)
	end := writeKeys(t, primary, "after", 30)
	f.waitStored(t, m.Revision, end)

	// On start: an applier finds a standby revision that is not the one recorded.
	standby := seed(t, b, m, "standby")
	r, err := standby.Put(ctx, "k03", "not the primary's")
	require.NoError(t, err)
	require.Equal(t, m.Revision+1, r.Header.Revision)
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = applier(b, id, standby, nil).Follow(fctx)
	var stopped *Stopped
	require.ErrorAs(t, err, &stopped)
	require.ErrorIs(t, err, ErrDiverged)
	require.Equal(t, m.Revision+1, stopped.Reached, "nothing applied on a revision that is not the primary's")
	require.Equal(t, m.Revision+1, revisionOf(t, standby))

	// While following: the applier caught up, someone writes, the applier's next pass finds it.
	standby = seed(t, b, m, "standby2")
	a := applier(b, id, standby, nil)
	a.begin(ctx)
	_, err = a.pass(ctx)
	require.NoError(t, err)
	require.Equal(t, end, revisionOf(t, standby))
	f.waitStored(t, m.Revision, writeKeys(t, primary, "later", 5))
	_, err = standby.Put(ctx, "k03", "not the primary's")
	require.NoError(t, err)
	_, err = a.pass(ctx)
	require.ErrorAs(t, err, &stopped)
	require.ErrorIs(t, err, ErrDiverged)
	require.Equal(t, end+1, stopped.Reached)

	// A revision that lands elsewhere than its number (a write in between) is refused by the same
	// transaction that applies it.
	err = delta.Apply(ctx, delta.ClientTarget(standby), delta.Revision{Rev: end + 5, Ops: []delta.Op{{Type: delta.Put, Key: []byte("x"), Value: []byte("y")}}},
		map[int64]bool{}, func(int64) error { return nil })
	require.ErrorIs(t, err, ErrDiverged)
}

// A chain that cannot be followed stops the standby at the last complete revision, with the reason and
// the object: a chunk missing, a chunk of another cluster, a broken chunk, a newer chain that starts
// after the standby's revision while the one before ended short of it (a gap), and the primary's
// newest snapshot of another etcd cluster (the primary restored or re-created). The standby then holds
// exactly the primary's keyspace at that revision: nothing partial was applied.
func TestStandbyStops(t *testing.T) {
	ctx := context.Background()
	primary := startEtcd(t, filepath.Join(t.TempDir(), "primary"), "primary")
	baseDir := filepath.Join(t.TempDir(), "bucket")
	base := openBucket(t, baseDir)
	id := clusterID(t, primary)
	writeKeys(t, primary, "seed", 10)
	m1 := fullSnapshot(t, primary, base)
	f1 := follow(t, primary, base, m1, 64) // small chunks: several of them
	for i := range 6 {
		_, err := primary.Txn(ctx).Then(clientv3.OpPut("txn/a", fmt.Sprint(i)), clientv3.OpDelete("k01")).Commit()
		require.NoError(t, err)
		writeKeys(t, primary, fmt.Sprint("round", i), 8)
	}
	end := revisionOf(t, primary)
	f1.waitStored(t, m1.Revision, end)
	f1.stop()
	spans, _, err := f1.chain.List(ctx, m1.Revision)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(spans), 4)
	const k = 2 // the chunk tampered with
	before := spans[k-1].Last

	// stopsAt runs an applier of b into a standby seeded from m1 until it stops, and checks where.
	stopsAt := func(t *testing.T, b *blob.Bucket, reason error, object string, reached int64) {
		t.Helper()
		standby := seed(t, b, m1, "standby")
		fctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		p := &progress{}
		err := applier(b, id, standby, p).Follow(fctx)
		var stopped *Stopped
		require.ErrorAs(t, err, &stopped, "stopped, not ended by its context")
		require.ErrorIs(t, err, reason)
		require.Equal(t, object, stopped.Object)
		require.Equal(t, reached, stopped.Reached, "the last complete revision")
		require.Equal(t, reached, revisionOf(t, standby))
		requireSame(t, primary, standby)
		require.Equal(t, reached, p.get().Revision, "reported")
	}
	// copyOf is a bucket holding what base holds now.
	copyOf := func(t *testing.T) *blob.Bucket {
		dir := filepath.Join(t.TempDir(), "bucket")
		require.NoError(t, os.CopyFS(dir, os.DirFS(baseDir)))
		return openBucket(t, dir)
	}

	t.Run("missing", func(t *testing.T) {
		b := copyOf(t)
		require.NoError(t, b.Delete(ctx, spans[k].Key))
		stopsAt(t, b, ErrMissing, spans[k+1].Key, before)
	})
	t.Run("foreign", func(t *testing.T) {
		b := copyOf(t)
		raw, err := b.ReadAll(ctx, spans[k].Key)
		require.NoError(t, err)
		_, revs, err := delta.Read(bytes.NewReader(raw))
		require.NoError(t, err)
		var buf bytes.Buffer
		_, err = delta.Write(&buf, "00000000000000ff", m1.Revision, revs)
		require.NoError(t, err)
		require.NoError(t, b.WriteAll(ctx, spans[k].Key, buf.Bytes(), nil))
		stopsAt(t, b, ErrForeign, spans[k].Key, before)
	})
	t.Run("broken", func(t *testing.T) {
		b := copyOf(t)
		raw, err := b.ReadAll(ctx, spans[k].Key)
		require.NoError(t, err)
		require.NoError(t, b.WriteAll(ctx, spans[k].Key, raw[:len(raw)/2], nil))
		stopsAt(t, b, ErrBroken, spans[k].Key, before)
	})
	t.Run("another cluster's snapshot", func(t *testing.T) {
		b := copyOf(t)
		other := startEtcd(t, filepath.Join(t.TempDir(), "recreated"), "primary")
		writeKeys(t, other, "recreated", 3)
		m := fullSnapshot(t, other, b)
		require.NotEqual(t, id, m.EtcdClusterID)
		stopsAt(t, b, ErrForeign, m.Key, end) // the whole chain of its own cluster first
	})
	t.Run("gap", func(t *testing.T) {
		// The writer stopped at end; the primary wrote on; a new full snapshot starts a chain after
		// revisions no chain holds.
		writeKeys(t, primary, "unrecorded", 5)
		m2 := fullSnapshot(t, primary, base)
		f2 := follow(t, primary, base, m2, 256)
		f2.waitStored(t, m2.Revision, writeKeys(t, primary, "new chain", 5))
		f2.stop()
		stopsAt(t, base, ErrGap, m2.ChainDir(), end)
	})
}

// forEachVersion runs a test on each etcd version the repository tests (testsupport.EtcdVersions).
func forEachVersion(t *testing.T, run func(t *testing.T, version string)) {
	for _, v := range testsupport.EtcdVersions {
		t.Run(v, func(t *testing.T) { run(t, v) })
	}
}

// The store gone for a while (its directory moved away) is a failure retried with backoff and told to
// Problem, not a stop: once it is back the standby catches up.
func TestStandbyRetriesTheStore(t *testing.T) {
	primary := startEtcd(t, filepath.Join(t.TempDir(), "primary"), "primary")
	dir := filepath.Join(t.TempDir(), "bucket")
	b := openBucket(t, dir)
	id := clusterID(t, primary)
	writeKeys(t, primary, "seed", 5)
	m := fullSnapshot(t, primary, b)
	f := follow(t, primary, b, m, 1024)
	standby := seed(t, b, m, "standby")
	end := writeKeys(t, primary, "after", 20)
	f.waitStored(t, m.Revision, end)
	f.stop()

	require.NoError(t, os.Rename(dir, dir+".away"))
	problems := make(chan error, 100)
	p := &progress{}
	a := applier(b, id, standby, p)
	a.Backoff = wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Cap: 100 * time.Millisecond, Steps: 1 << 30}
	a.Problem = func(err error) {
		select {
		case problems <- err:
		default:
		}
	}
	stop := run(a)
	select {
	case err := <-problems:
		require.Error(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("no problem reported with the store gone")
	}
	require.Equal(t, m.Revision, revisionOf(t, standby), "nothing applied without the store")
	require.NoError(t, os.Rename(dir+".away", dir))
	require.Eventually(t, func() bool { return p.get().Revision == end }, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, stop())
	requireSame(t, primary, standby)
}
