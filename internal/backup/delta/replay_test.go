package delta

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
)

// startEtcd runs an etcd of etcd's own libraries on loopback, on dataDir (restored or empty).
func startEtcd(t *testing.T, dataDir, name string) *clientv3.Client {
	t.Helper()
	peer, _, err := loopbackURLs()
	require.NoError(t, err)
	e, err := startAlone(context.Background(), dataDir, name, peer)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	c := v3client.New(e.Server)
	t.Cleanup(func() { c.Close() })
	return c
}

// saveSnapshot writes c's snapshot to a file, and returns it with its revision.
func saveSnapshot(t *testing.T, c *clientv3.Client) (string, int64) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "snap.db")
	require.NoError(t, writeSnapshot(context.Background(), c, file))
	st, err := snapshot.NewV3(zap.NewNop()).Status(file)
	require.NoError(t, err)
	return file, st.Revision
}

// snapshotKeyspace is every key and value a snapshot file holds (restored and served alone).
func snapshotKeyspace(t *testing.T, file string) map[string]string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "check")
	require.NoError(t, snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{SnapshotPath: file, Name: "check",
		OutputDataDir: dir, PeerURLs: []string{"http://127.0.0.1:1"}, InitialCluster: "check=http://127.0.0.1:1", InitialClusterToken: "check"}))
	return keyspace(t, startEtcd(t, dir, "check"), 0)
}

// keyspace is every key and its value at revision rev (0: now).
func keyspace(t *testing.T, c *clientv3.Client, rev int64) map[string]string {
	t.Helper()
	opts := []clientv3.OpOption{clientv3.WithFromKey()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := c.Get(context.Background(), "\x00", opts...)
	require.NoError(t, err)
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

// A chain of a full snapshot and chunks, replayed to revisions spread over it, gives exactly the
// keyspace etcd itself answers at each (`get --rev`): puts, overwrites, deletes, range deletes and
// multi-operation transactions, through the chunk format (written, read back, checked).
func TestReplayMatchesEtcdAtEveryPoint(t *testing.T) {
	ctx := context.Background()
	src := startEtcd(t, filepath.Join(t.TempDir(), "src"), "src")
	rng := rand.New(rand.NewPCG(1, 2))
	write := func(n int) {
		for i := 0; i < n; i++ {
			k := fmt.Sprintf("k%02d", rng.IntN(40))
			var err error
			switch rng.IntN(6) {
			case 0:
				_, err = src.Delete(ctx, k)
			case 1:
				_, err = src.Txn(ctx).Then(clientv3.OpPut(k, "t"+fmt.Sprint(i)), clientv3.OpDelete(fmt.Sprintf("k%02d", rng.IntN(40))), clientv3.OpPut("txn", fmt.Sprint(i))).Commit()
			case 2:
				_, err = src.Delete(ctx, "k1", clientv3.WithPrefix())
			default:
				_, err = src.Put(ctx, k, fmt.Sprintf("v%d-%d", i, rng.IntN(1000)))
			}
			require.NoError(t, err)
		}
	}
	write(100)

	// The chain's full snapshot, and the follower's watch from the revision after the chain's start.
	// The chain starts 10 revisions before the snapshot's own revision, as it does when a backup's
	// manifest (read just before etcd's stream opens) is behind the file: the replay skips what the
	// snapshot already holds.
	snap, snapRev := saveSnapshot(t, src)
	chainStart := snapRev - 10
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := src.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(chainStart+1))
	write(300)
	end, err := src.Get(ctx, "none")
	require.NoError(t, err)
	last := end.Header.Revision

	var recorded []Revision
	for len(recorded) == 0 || recorded[len(recorded)-1].Rev < last {
		wr := <-wch
		require.NoError(t, wr.Err())
		for _, ev := range wr.Events {
			op := Op{Type: Put, Key: ev.Kv.Key, Value: ev.Kv.Value}
			if ev.Type == clientv3.EventTypeDelete {
				op = Op{Type: Delete, Key: ev.Kv.Key}
			}
			if n := len(recorded); n > 0 && recorded[n-1].Rev == ev.Kv.ModRevision {
				recorded[n-1].Ops = append(recorded[n-1].Ops, op)
				continue
			}
			recorded = append(recorded, Revision{Rev: ev.Kv.ModRevision, Time: time.Now(), Ops: []Op{op}})
		}
	}

	// Chunks of 37 revisions, through the format.
	var heads []Header
	var blobs [][]byte
	for i := 0; i < len(recorded); i += 37 {
		var b bytes.Buffer
		h, err := Write(&b, "c1", chainStart, recorded[i:min(i+37, len(recorded))])
		require.NoError(t, err)
		heads, blobs = append(heads, h), append(blobs, b.Bytes())
	}
	read := func(i int) ([]Revision, error) {
		_, rs, err := Read(bytes.NewReader(blobs[i]))
		return rs, err
	}

	targets := []int64{snapRev, snapRev + 1, heads[0].Last, heads[1].First, last}
	for range 3 {
		targets = append(targets, snapRev+1+rng.Int64N(last-snapRev))
	}
	for _, target := range targets {
		out := filepath.Join(t.TempDir(), "out.db")
		reached, err := Replay(ctx, snap, chainStart, heads, read, target, out)
		require.NoError(t, err, "target %d", target)
		require.Equal(t, target, reached)
		require.Equal(t, keyspace(t, src, target), snapshotKeyspace(t, out), "the keyspace at revision %d", target)
	}

	// A chain with a chunk missing in the middle, or past its end, is refused.
	_, err = Replay(ctx, snap, chainStart, append([]Header{heads[0]}, heads[2:]...), func(i int) ([]Revision, error) {
		if i == 0 {
			return read(0)
		}
		return read(i + 1)
	}, last, filepath.Join(t.TempDir(), "x.db"))
	require.ErrorContains(t, err, "gap")
	_, err = Replay(ctx, snap, chainStart, heads, read, last+5, filepath.Join(t.TempDir(), "y.db"))
	require.ErrorContains(t, err, "the chain ends at revision")
}

// memUploader keeps chunks in memory, in upload order.
type memUploader struct {
	mu    sync.Mutex
	heads []Header
	blobs [][]byte
}

func (m *memUploader) Put(_ context.Context, h Header, b []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.heads, m.blobs = append(m.heads, h), append(m.blobs, append([]byte(nil), b...))
	return nil
}

// waitUploaded waits until a chunk ending at revision rev is uploaded: the follower received every
// revision up to it, however late its watch delivers on a loaded machine.
func (m *memUploader) waitUploaded(t *testing.T, rev int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.heads) > 0 && m.heads[len(m.heads)-1].Last >= rev
	}, 30*time.Second, 20*time.Millisecond, "revision %d uploaded", rev)
}

// A follower stopped half-way (its pod lost) and started again from the revision it returned loses
// nothing and repeats nothing: its chunks form one chain that replays to etcd's own keyspace. A
// compacted revision ends the chain instead.
func TestFollowResumesWithoutGaps(t *testing.T) {
	ctx := context.Background()
	src := startEtcd(t, filepath.Join(t.TempDir(), "src"), "src")
	for i := 0; i < 20; i++ {
		_, err := src.Put(ctx, fmt.Sprintf("a%d", i), "x")
		require.NoError(t, err)
	}
	snap, snapRev := saveSnapshot(t, src)

	up := &memUploader{}
	fo := &Follower{Client: src, Uploader: up, ClusterID: "c1", ChainStart: snapRev, MaxAge: 50 * time.Millisecond, MaxBytes: 300}
	next := snapRev + 1
	for round := 0; round < 3; round++ {
		fctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		var got int64
		var ferr error
		go func() { got, ferr = fo.Follow(fctx, next); close(done) }()
		for i := 0; i < 150; i++ {
			_, err := src.Put(ctx, fmt.Sprintf("k%d", i%30), fmt.Sprintf("%d-%d", round, i))
			require.NoError(t, err)
			if i%40 == 0 {
				_, err = src.Delete(ctx, "k1", clientv3.WithPrefix())
				require.NoError(t, err)
			}
		}
		last, err := src.Get(ctx, "none")
		require.NoError(t, err)
		up.waitUploaded(t, last.Header.Revision) // the last chunk is cut by its age, then the pod is lost
		stop()
		<-done
		require.NoError(t, ferr)
		next = got
	}
	end, err := src.Get(ctx, "none")
	require.NoError(t, err)
	require.Equal(t, end.Header.Revision+1, next, "every revision uploaded")
	require.Greater(t, len(up.heads), 6, "chunks cut by size within each of the 3 rounds")
	uploaded := len(up.heads)
	for i := 1; i < len(up.heads); i++ {
		require.NoError(t, Follows(up.heads[i-1], up.heads[i]))
	}
	out := filepath.Join(t.TempDir(), "out.db")
	_, err = Replay(ctx, snap, snapRev, up.heads, func(i int) ([]Revision, error) {
		_, rs, err := Read(bytes.NewReader(up.blobs[i]))
		return rs, err
	}, end.Header.Revision, out)
	require.NoError(t, err)
	require.Equal(t, keyspace(t, src, 0), snapshotKeyspace(t, out))

	// An idle cluster: nothing to upload, and the progress notification the follower asks for says
	// the chain holds everything up to now.
	covered := make(chan int64, 100)
	idle := &Follower{Client: src, Uploader: up, ClusterID: "c1", ChainStart: snapRev, MaxAge: 50 * time.Millisecond, MaxBytes: 300,
		Covered: func(rev int64, _ time.Time) {
			select {
			case covered <- rev:
			default:
			}
		}}
	ictx, istop := context.WithCancel(ctx)
	idone := make(chan struct{})
	go func() { _, _ = idle.Follow(ictx, next); close(idone) }()
	require.Equal(t, next-1, <-covered, "covered up to the last revision, with no write")
	istop()
	<-idone
	require.Len(t, up.heads, uploaded, "an idle follower uploads nothing")

	// Compacted past where the follower would resume: the chain cannot go on.
	_, err = src.Compact(ctx, end.Header.Revision)
	require.NoError(t, err)
	_, err = fo.Follow(ctx, snapRev+2)
	require.ErrorIs(t, err, ErrCompacted)
}

// Keys under leases: a lease granted after the snapshot is granted again under its ID before the put
// that names it, and no lease expires while the replay runs (an expiry there would delete keys at
// revisions the source never had); the expiry the source had arrives as its recorded deletes.
func TestReplayCarriesLeases(t *testing.T) {
	ctx := context.Background()
	src := startEtcd(t, filepath.Join(t.TempDir(), "src"), "src")
	old, err := src.Grant(ctx, 30)
	require.NoError(t, err)
	_, err = src.Put(ctx, "before", "x", clientv3.WithLease(old.ID))
	require.NoError(t, err)
	snap, snapRev := saveSnapshot(t, src)

	up := &memUploader{}
	fo := &Follower{Client: src, Uploader: up, ClusterID: "c1", ChainStart: snapRev, MaxAge: 50 * time.Millisecond, MaxBytes: 1 << 20}
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := fo.Follow(fctx, snapRev+1); done <- err }()

	kept, err := src.Grant(ctx, 30)
	require.NoError(t, err)
	short, err := src.Grant(ctx, 2)
	require.NoError(t, err)
	_, err = src.Put(ctx, "kept", "1", clientv3.WithLease(kept.ID))
	require.NoError(t, err)
	_, err = src.Put(ctx, "short", "2", clientv3.WithLease(short.ID))
	require.NoError(t, err)
	mid, err := src.Put(ctx, "plain", "3")
	require.NoError(t, err)
	// The short lease expires on the source: its key's delete is in the stream.
	require.Eventually(t, func() bool {
		r, err := src.Get(ctx, "short")
		return err == nil && len(r.Kvs) == 0
	}, 10*time.Second, 100*time.Millisecond)
	end, err := src.Put(ctx, "after", "4")
	require.NoError(t, err)
	up.waitUploaded(t, end.Header.Revision)
	stop()
	require.NoError(t, <-done)

	read := func(i int) ([]Revision, error) {
		_, rs, err := Read(bytes.NewReader(up.blobs[i]))
		return rs, err
	}
	for _, target := range []int64{mid.Header.Revision, end.Header.Revision} {
		out := filepath.Join(t.TempDir(), "out.db")
		_, err := Replay(ctx, snap, snapRev, up.heads, read, target, out)
		require.NoError(t, err, "target %d", target)
		require.Equal(t, keyspace(t, src, target), snapshotKeyspace(t, out), "the keyspace at revision %d", target)
	}
	// The leases themselves: the keys are attached to the leases the source had.
	out := filepath.Join(t.TempDir(), "out.db")
	_, err = Replay(ctx, snap, snapRev, up.heads, read, mid.Header.Revision, out)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "leases")
	require.NoError(t, snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{SnapshotPath: out, Name: "leases",
		OutputDataDir: dir, PeerURLs: []string{"http://127.0.0.1:1"}, InitialCluster: "leases=http://127.0.0.1:1", InitialClusterToken: "leases"}))
	got := startEtcd(t, dir, "leases")
	for key, id := range map[string]clientv3.LeaseID{"before": old.ID, "kept": kept.ID, "short": short.ID} {
		r, err := got.Get(ctx, key)
		require.NoError(t, err)
		require.Len(t, r.Kvs, 1, key)
		require.EqualValues(t, id, r.Kvs[0].Lease, "%s's lease", key)
	}
}

// A follower holding revisions when its cluster goes (every member lost: no event will ever come
// again, the watch only retries) uploads them at the chunk interval all the same: the last seconds
// before a disaster are what a restore to the newest point needs.
func TestFollowUploadsWhatItHoldsWhenTheClusterGoes(t *testing.T) {
	ctx := context.Background()
	peer, _, err := loopbackURLs()
	require.NoError(t, err)
	e, err := startAlone(ctx, filepath.Join(t.TempDir(), "src"), "src", peer)
	require.NoError(t, err)
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Config().AdvertiseClientUrls[0].String()}, DialTimeout: time.Second})
	require.NoError(t, err)
	defer cl.Close()
	_, err = cl.Put(ctx, "before", "the snapshot") // an empty store's snapshot says revision 0, its revision is 1
	require.NoError(t, err)
	_, snapRev := saveSnapshot(t, cl)
	up := &memUploader{}
	held := make(chan int64, 100)
	fo := &Follower{Client: cl, Uploader: up, ClusterID: "c1", ChainStart: snapRev, MaxAge: 300 * time.Millisecond, MaxBytes: 1 << 30,
		held: func(rev int64) { held <- rev }}
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := fo.Follow(fctx, snapRev+1); done <- err }()
	var last int64
	for i := range 50 {
		r, err := cl.Put(ctx, fmt.Sprintf("k%d", i), "v")
		require.NoError(t, err)
		last = r.Header.Revision
	}
	for rev := range held {
		if rev == last {
			break
		}
	}
	e.Close() // held, not yet uploaded (unless the interval passed meanwhile), and the cluster gone
	up.waitUploaded(t, last)
	stop()
	require.NoError(t, <-done)
	for i := 1; i < len(up.heads); i++ {
		require.NoError(t, Follows(up.heads[i-1], up.heads[i]))
	}
	require.Equal(t, snapRev+1, up.heads[0].First)
	require.Equal(t, last, up.heads[len(up.heads)-1].Last, "up to the last revision it received")
}

// A chain from a new cluster's first snapshot: the store is empty (its snapshot says revision 0) and the
// manifest says 1, the store's revision. The replay starts there all the same.
func TestReplayFromAnEmptyStore(t *testing.T) {
	ctx := context.Background()
	src := startEtcd(t, filepath.Join(t.TempDir(), "src"), "src")
	snap, snapRev := saveSnapshot(t, src)
	require.Zero(t, snapRev, "an empty store's snapshot")
	up := &memUploader{}
	fo := &Follower{Client: src, Uploader: up, ClusterID: "c1", ChainStart: 1, MaxAge: 50 * time.Millisecond, MaxBytes: 1 << 20}
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := fo.Follow(fctx, 2); done <- err }()
	var last int64
	for i := range 20 {
		r, err := src.Put(ctx, fmt.Sprintf("k%d", i%7), fmt.Sprint(i))
		require.NoError(t, err)
		last = r.Header.Revision
	}
	up.waitUploaded(t, last)
	stop()
	require.NoError(t, <-done)
	out := filepath.Join(t.TempDir(), "out.db")
	_, err := Replay(ctx, snap, 1, up.heads, func(i int) ([]Revision, error) {
		_, rs, err := Read(bytes.NewReader(up.blobs[i]))
		return rs, err
	}, last, out)
	require.NoError(t, err)
	require.Equal(t, keyspace(t, src, 0), snapshotKeyspace(t, out))
}
