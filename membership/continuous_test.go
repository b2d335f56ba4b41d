package membership

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"gocloud.dev/blob"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/internal/backup/delta"
)

// continuousRun is a continuous backup writer of a test cluster, started and stopped as its pod is.
type continuousRun struct {
	t      *testing.T
	c      *tcluster
	b      *blob.Bucket
	d      backup.Destination
	events *MemRecorder

	mu   sync.Mutex
	last api.ContinuousReport
	stop func()
	// recheck: how often the writer looks for a newer snapshot (200 ms unless set).
	recheck time.Duration
	// keys encrypt what the writer stores (none: in the clear).
	keys backup.Keys
	// copyPass and reportCopy: a second destination kept beside the chain (none: no copy).
	copyPass   func(context.Context) api.CopyReport
	reportCopy func(api.CopyReport)
}

func (r *continuousRun) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	recheck := r.recheck
	if recheck == 0 {
		recheck = 200 * time.Millisecond
	}
	go func() {
		defer close(done)
		Continuous(ctx, r.c.etcd(5*time.Second), r.b, r.c.log, ContinuousRequest{
			Backup: BackupRequest{Endpoints: r.c.endpoints(-1), Destination: r.d, Namespace: "ns", Cluster: "src",
				ClusterUID: r.c.parent, Retention: backup.Retention{KeepLast: 20}, Keys: r.keys},
			To: r.keys.Recipients, ChunkInterval: 100 * time.Millisecond, ChunkBytes: 8 << 10, Recheck: recheck,
			Report: func(rep api.ContinuousReport) {
				r.mu.Lock()
				defer r.mu.Unlock()
				r.last = rep
			},
			Events:   r.events,
			CopyPass: r.copyPass, ReportCopy: r.reportCopy,
		})
	}()
	r.stop = func() { cancel(); <-done }
}

func (r *continuousRun) report() api.ContinuousReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// waitCovered waits until the writer reports rev restorable (the chunk holding it stored).
func (r *continuousRun) waitCovered(rev int64) api.ContinuousReport {
	var rep api.ContinuousReport
	require.Eventually(r.t, func() bool { rep = r.report(); return rep.Revision >= rev }, time.Minute, 20*time.Millisecond,
		"the writer to report revision %d restorable (last report %+v)", rev, r.report())
	return rep
}

// workload writes n operations of every kind a chain must carry: puts, overwrites, deletes, range
// deletes, multi-key transactions, keys under leases, and revoked leases (their keys deleted).
func workload(t *testing.T, cl *clientv3.Client, rng *rand.Rand, n int) int64 {
	ctx := context.Background()
	var leases []clientv3.LeaseID
	var rev int64
	for i := range n {
		k := fmt.Sprintf("/app/%02d", rng.IntN(50))
		var hdr func() int64
		var err error
		switch rng.IntN(10) {
		case 0:
			var r *clientv3.DeleteResponse
			r, err = cl.Delete(ctx, k)
			hdr = func() int64 { return r.Header.Revision }
		case 1:
			other := fmt.Sprintf("/app/%02d", 50+rng.IntN(10)) // not k: etcd refuses a key twice in a transaction
			var r *clientv3.TxnResponse
			r, err = cl.Txn(ctx).Then(clientv3.OpPut(k, fmt.Sprint("txn-", i)), clientv3.OpPut("/app/txn", fmt.Sprint(i)),
				clientv3.OpDelete(other)).Commit()
			hdr = func() int64 { return r.Header.Revision }
		case 2:
			var r *clientv3.DeleteResponse
			r, err = cl.Delete(ctx, "/app/1", clientv3.WithPrefix())
			hdr = func() int64 { return r.Header.Revision }
		case 3:
			g, gerr := cl.Grant(ctx, 600)
			require.NoError(t, gerr)
			leases = append(leases, g.ID)
			var r *clientv3.PutResponse
			r, err = cl.Put(ctx, fmt.Sprintf("/lock/%d", i), "held", clientv3.WithLease(g.ID))
			hdr = func() int64 { return r.Header.Revision }
		case 4:
			if len(leases) > 0 {
				var r *clientv3.LeaseRevokeResponse
				r, err = cl.Revoke(ctx, leases[0])
				leases = leases[1:]
				hdr = func() int64 { return r.Header.Revision }
				break
			}
			fallthrough
		default:
			var r *clientv3.PutResponse
			r, err = cl.Put(ctx, k, fmt.Sprintf("v%d-%d", i, rng.IntN(1e6)))
			hdr = func() int64 { return r.Header.Revision }
		}
		require.NoError(t, err)
		rev = max(rev, hdr())
	}
	return rev
}

// keyspaceAt is every key and value of the source at rev (etcd's own `get --rev`).
func keyspaceAt(t *testing.T, cl *clientv3.Client, rev int64) map[string]string {
	resp, err := cl.Get(context.Background(), "\x00", clientv3.WithFromKey(), clientv3.WithRev(rev))
	require.NoError(t, err)
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

// restoreTo restores the destination's backups to p into a new data directory and serves it with
// etcd's own server in the test process: the keyspace the restored seed would start with.
func restoreTo(t *testing.T, d backup.Destination, p backup.Point) (RestoreResult, map[string]string) {
	return restoreWith(t, d, p, backup.Keys{})
}

// restoreWith is restoreTo with the keys of an encrypted destination.
func restoreWith(t *testing.T, d backup.Destination, p backup.Point, keys backup.Keys) (RestoreResult, map[string]string) {
	return restoreFrom(t, d.ObjectURL(backup.Latest), "src", p, keys)
}

// restoreFrom restores source (a URL as spec.restore.from takes it) as the seed of cluster ns/<cluster>
// would, to point p, and reads back the keyspace the restored etcd serves.
func restoreFrom(t *testing.T, source, cluster string, p backup.Point, keys backup.Keys) (RestoreResult, map[string]string) {
	port := freePort(t)
	peer := fmt.Sprintf("http://127.0.0.1:%d", port)
	dir := filepath.Join(t.TempDir(), "data")
	src, err := backup.ParseSource(source)
	require.NoError(t, err)
	res, err := Restore(context.Background(), slog.New(slog.DiscardHandler), RestoreRequest{Source: src, Namespace: "ns", Cluster: cluster,
		DataDir: dir, Name: "p", PeerURL: peer, Token: "t", Point: p, Keys: keys})
	require.NoError(t, err, "restoring to %s", p)
	client := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir, cfg.LogLevel, cfg.LogOutputs = "p", dir, "error", []string{os.DevNull}
	pu, _ := url.Parse(peer)
	cu, _ := url.Parse(client)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.InitialCluster = "p=" + peer
	e, err := embed.StartEtcd(cfg)
	require.NoError(t, err)
	defer e.Close()
	<-e.Server.ReadyNotify()
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{client}})
	require.NoError(t, err)
	defer cl.Close()
	resp, err := cl.Get(context.Background(), "\x00", clientv3.WithFromKey())
	require.NoError(t, err)
	require.Equal(t, res.Revision+RevisionBump, resp.Header.Revision, "the restored store continues a billion revisions on")
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return res, out
}

// TestMembershipContinuousBackup runs the continuous backup writer against a real 3-member etcd and a
// real S3 store (MinIO), and restores to points of its history (issue 27):
//   - with no snapshot yet, the writer takes one and starts a chain (BackupChainStarted);
//   - its pod lost mid-run, it resumes the stored chain without a new snapshot and without a gap;
//   - a scheduled snapshot starts a new chain;
//   - restores to 12 random revisions and 4 times, across both chains, each equal to etcd's own
//     `get --rev` at that revision; "latest" is the newest revision the writer reported;
//   - a compaction under a stopped writer forces a full snapshot (BackupChainBroken) and a new chain;
//   - a chunk removed from the middle of a chain, a truncated chunk and a chunk of another cluster are
//     each refused naming the object.
func TestMembershipContinuousBackup(t *testing.T) {
	ctx := context.Background()
	d := startMinIO(t, "etcd-continuous").destination(t)
	b := openBucket(t, d)
	src := bootstrapped(t, newestEtcd, 3)
	cl := src.client()
	defer cl.Close()
	rng := rand.New(rand.NewPCG(7, 27))
	run := &continuousRun{t: t, c: src, b: b, d: d, events: &MemRecorder{}}

	workload(t, cl, rng, 100)
	run.start()
	first := run.waitCovered(1)
	require.Contains(t, run.events.Reasons(), EventBackupChainStarted, "no snapshot yet: the writer takes one")
	require.NotContains(t, run.events.Reasons(), EventBackupChainBroken)

	// Times between operations, well apart from the revisions around them: the writer stamps a
	// revision when it receives it, so a point too close to a write could fall on either side.
	type timed struct {
		at  time.Time
		rev int64
	}
	var times []timed
	mark := func(rev int64) {
		run.waitCovered(rev)
		time.Sleep(150 * time.Millisecond)
		times = append(times, timed{time.Now().UTC(), rev})
		time.Sleep(150 * time.Millisecond)
	}
	r1 := workload(t, cl, rng, 300)
	mark(r1)
	// The writer's pod is lost mid-run: stopped (what it held is uploaded), then started again.
	run.stop()
	r2 := workload(t, cl, rng, 200)
	run.start()
	run.waitCovered(r2)
	mark(r2)
	require.Equal(t, first.ChainStart, run.report().ChainStart, "a restarted writer resumes its chain")
	ms, _, err := backup.List(ctx, b, "ns", "src")
	require.NoError(t, err)
	require.Len(t, ms, 1, "no new full snapshot after a restart")

	// A scheduled snapshot starts a new chain.
	_, err = src.backupOnce(d, backup.Retention{KeepLast: 20}, time.Now())
	require.NoError(t, err)
	r3 := workload(t, cl, rng, 300)
	rep := run.waitCovered(r3)
	require.Greater(t, rep.ChainStart, first.ChainStart, "the writer moved to the newer snapshot's chain")
	mark(r3)
	r4 := workload(t, cl, rng, 100)
	last := run.waitCovered(r4)

	// Points across both chains, each equal to etcd's answer at that revision.
	lo := first.ChainStart
	targets := []int64{lo, lo + 1, r1, r2, rep.ChainStart, rep.ChainStart + 1, r4}
	for len(targets) < 12 {
		targets = append(targets, lo+1+rng.Int64N(r4-lo))
	}
	for _, rev := range targets {
		res, got := restoreTo(t, d, backup.Point{Revision: rev})
		require.Equal(t, rev, res.Revision)
		require.Equal(t, keyspaceAt(t, cl, rev), got, "the keyspace at revision %d", rev)
	}
	times = append(times, timed{time.Now().UTC(), r4})
	for _, tm := range times {
		res, got := restoreTo(t, d, backup.Point{Time: tm.at})
		require.Equal(t, tm.rev, res.Revision, "at %s", tm.at)
		require.Equal(t, keyspaceAt(t, cl, tm.rev), got, "the keyspace at %s", tm.at)
	}
	res, got := restoreTo(t, d, backup.Point{})
	require.Equal(t, last.Revision, res.Revision, "latest: the newest revision reported restorable")
	require.Equal(t, keyspaceAt(t, cl, last.Revision), got)
	// Another cluster (a clone, kubectl etcd restore copy --like src) names src's folder: the same newest
	// point, and points in either chain, as src's own /latest gives them.
	folder := d.ObjectURL(backup.ClusterDir("ns", "src") + backup.Latest)
	for _, p := range []backup.Point{{}, {Revision: r1}, {Revision: r4}, {Time: times[0].at}} {
		res, got := restoreFrom(t, folder, "copy", p, backup.Keys{})
		want := p.Revision
		switch {
		case p.IsZero():
			want = last.Revision
		case !p.Time.IsZero():
			want = times[0].rev
		}
		require.Equal(t, want, res.Revision, "copy restoring src's folder to %s", p)
		require.Equal(t, keyspaceAt(t, cl, want), got, "copy restoring src's folder to %s", p)
	}

	// What is restorable, as kubectl etcd backups lists it: both snapshots, newest first, each with the
	// span of its chain.
	list, err := ListRestorable(ctx, b, d, "ns", "src", delta.ReadOptions{})
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, rep.ChainStart, list[0].Revision)
	require.NotNil(t, list[0].Chain)
	require.Equal(t, last.Revision, list[0].Chain.Last)
	require.Equal(t, rep.ChainStart+1, list[0].Chain.First)
	require.Empty(t, list[0].Chain.Problem)
	require.Equal(t, first.ChainStart, list[1].Revision)
	require.GreaterOrEqual(t, list[1].Chain.Last, rep.ChainStart, "the first chain went on until the writer moved")
	require.False(t, list[1].Chain.LastTime.Before(list[1].Chain.FirstTime))

	// Bad chains, each refused naming the object; the store is put back after each.
	run.stop()
	m, err := backup.Find(ctx, b, backup.Source{Destination: d}, "ns", "src")
	require.NoError(t, err)
	chain := delta.BlobChain{Bucket: b, Prefix: m.ChainsPrefix()}
	spans, _, err := chain.List(ctx, m.Revision)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(spans), 3, "chunks of 8 KiB at most")
	mid := spans[len(spans)/2]
	orig, err := b.ReadAll(ctx, mid.Key)
	require.NoError(t, err)
	refused := func(p backup.Point, want string) {
		src, err := backup.ParseSource(d.ObjectURL(backup.Latest))
		require.NoError(t, err)
		dir := filepath.Join(t.TempDir(), "data")
		_, err = Restore(ctx, slog.New(slog.DiscardHandler), RestoreRequest{Source: src, Namespace: "ns", Cluster: "src", DataDir: dir,
			Name: "p", PeerURL: "http://127.0.0.1:1", Token: "t", Point: p})
		require.ErrorContains(t, err, want)
		require.True(t, Refused(err), "%v is a refusal, not a store's hiccup", err)
		require.NoDirExists(t, dir, "a refused restore writes no data directory")
	}
	require.NoError(t, b.Delete(ctx, mid.Key))
	refused(backup.Point{}, "gap")
	refused(backup.Point{Revision: mid.Last}, "gap")
	require.NoError(t, b.WriteAll(ctx, mid.Key, orig[:len(orig)/2], nil))
	refused(backup.Point{}, mid.Key)
	var foreign []delta.Revision
	for rev := mid.First; rev <= mid.Last; rev++ {
		foreign = append(foreign, delta.Revision{Rev: rev, Time: time.Now(), Ops: []delta.Op{{Type: delta.Put, Key: []byte("x")}}})
	}
	var buf bytes.Buffer
	_, err = delta.Write(&buf, "0123456789abcdef", m.Revision, foreign)
	require.NoError(t, err)
	require.NoError(t, b.WriteAll(ctx, mid.Key, buf.Bytes(), nil))
	refused(backup.Point{}, "cluster 0123456789abcdef")
	require.NoError(t, b.WriteAll(ctx, mid.Key, orig, nil))
	res, _ = restoreTo(t, d, backup.Point{})
	require.Equal(t, last.Revision, res.Revision, "the chain put back restores again")

	// Compacted under a stopped writer: its chain cannot go on; a full snapshot starts the next.
	r5 := workload(t, cl, rng, 50)
	_, err = cl.Compact(ctx, r5)
	require.NoError(t, err)
	r6 := workload(t, cl, rng, 50)
	run.start()
	after := run.waitCovered(r6)
	run.stop()
	require.Contains(t, run.events.Reasons(), EventBackupChainBroken)
	require.Greater(t, after.ChainStart, r4, "a new chain from a snapshot after the compaction")
	res, got = restoreTo(t, d, backup.Point{})
	require.Equal(t, after.Revision, res.Revision)
	require.Equal(t, keyspaceAt(t, cl, after.Revision), got)

	// Right after a full snapshot, before the writer moves to it, the newest point is on the chain of
	// the snapshot before: latest restores that one, not the new snapshot alone.
	slow := &continuousRun{t: t, c: src, b: b, d: d, events: &MemRecorder{}, recheck: time.Hour}
	slow.start()
	defer slow.stop()
	slow.waitCovered(r6)
	_, err = src.backupOnce(d, backup.Retention{KeepLast: 20}, time.Now())
	require.NoError(t, err)
	r7 := workload(t, cl, rng, 100)
	slow.waitCovered(r7)
	res, got = restoreTo(t, d, backup.Point{})
	require.Equal(t, r7, res.Revision, "latest: the older snapshot's chain reaches further than the new snapshot")
	require.Equal(t, keyspaceAt(t, cl, r7), got)
}
