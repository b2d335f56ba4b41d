package standby

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"gocloud.dev/blob"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/internal/backup/delta"
	"github.com/etcdhook/etcdhook/internal/testsupport"
)

// Real etcd on loopback: etcd's own libraries (go.mod's version), as internal/backup/delta's tests run
// it, or a process of each version membership's tests run (startOn); the backups in a file:// bucket
// through backup.Destination, as a writer stores them.

const ns, primaryName = "prod", "main"

// freeURL is an http URL on a free loopback port.
func freeURL(t testing.TB) url.URL {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return url.URL{Scheme: "http", Host: addr}
}

// startEtcd runs a one-member etcd on dataDir (empty, or restored) and returns a client of it.
func startEtcd(t testing.TB, dataDir, name string, tune ...func(*embed.Config)) *clientv3.Client {
	t.Helper()
	return startEmbedded(t, dataDir, name, freeURL(t), tune...)
}

func startEmbedded(t testing.TB, dataDir, name string, peer url.URL, tune ...func(*embed.Config)) *clientv3.Client {
	t.Helper()
	client := freeURL(t)
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir, cfg.LogLevel = name, dataDir, "error"
	cfg.LogOutputs = []string{os.DevNull}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = name + "=" + peer.String()
	for _, f := range tune {
		f(cfg)
	}
	e, err := embed.StartEtcd(cfg)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		t.Fatal("etcd not ready in a minute")
	}
	c := dial(t, client.String(), "", "")
	return c
}

// dial is a client of endpoint, logged in as user when one is given.
func dial(t testing.TB, endpoint, user, password string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Username: user, Password: password,
		Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// openBucket is a file:// destination in a new directory.
func openBucket(t testing.TB, dir string) *blob.Bucket {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	d, err := backup.ParseDestination("file://" + dir)
	require.NoError(t, err)
	b, err := d.Open(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

func clusterID(t testing.TB, c *clientv3.Client) string {
	r, err := c.Get(context.Background(), "\x00", clientv3.WithLimit(1))
	require.NoError(t, err)
	return api.FormatID(r.Header.ClusterId)
}

func revisionOf(t testing.TB, c *clientv3.Client) int64 {
	r, err := c.Get(context.Background(), "\x00", clientv3.WithKeysOnly(), clientv3.WithLimit(1))
	require.NoError(t, err)
	return r.Header.Revision
}

// snapshotCount orders the full snapshots of a test process in time, and makes their keys unique.
var snapshotCount atomic.Int64

// fullSnapshot stores a full snapshot of c as a backup does (the revision read first, etcd's stream
// uploaded and checked, the manifest last) and returns its manifest.
func fullSnapshot(t testing.TB, c *clientv3.Client, b *blob.Bucket) backup.Manifest {
	t.Helper()
	ctx := context.Background()
	rev := revisionOf(t, c)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(snapshotCount.Add(1)) * time.Second)
	key := backup.SnapshotKey(ns, primaryName, at, rev)
	rc, err := c.Snapshot(ctx)
	require.NoError(t, err)
	defer rc.Close()
	st, err := backup.Upload(ctx, b, key, rc, "uid-1", backup.Keys{})
	require.NoError(t, err)
	m := backup.Manifest{Cluster: primaryName, Namespace: ns, ClusterUID: "uid-1", EtcdClusterID: clusterID(t, c), Member: "m0",
		Revision: rev, Size: st.Size, SHA256: st.SHA256, Time: at, Snapshot: path.Base(key), Key: backup.ManifestKey(key)}
	require.NoError(t, backup.WriteManifest(ctx, b, m))
	return m
}

// startOn runs a one-member etcd of version on dataDir: a process of the server built from its Go
// module (testsupport.EtcdBinary, as membership's tests run it), or, for "", etcd's libraries in
// this process (go.mod's version).
func startOn(t testing.TB, version, dataDir, name string, peer url.URL) *clientv3.Client {
	t.Helper()
	if version == "" {
		return startEmbedded(t, dataDir, name, peer)
	}
	client := freeURL(t)
	cmd := exec.Command(testsupport.EtcdBinary(t, version), "--name", name, "--data-dir", dataDir, "--log-level", "error",
		"--listen-peer-urls", peer.String(), "--initial-advertise-peer-urls", peer.String(),
		"--listen-client-urls", client.String(), "--advertise-client-urls", client.String(),
		"--initial-cluster", name+"="+peer.String())
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	c := dial(t, client.String(), "", "")
	_, ok := testsupport.Poll(time.Minute, 50*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.Get(ctx, "\x00", clientv3.WithLimit(1))
		return err == nil
	})
	require.True(t, ok, "etcd %s serves within a minute", version)
	return c
}

// seed is a standby seeded from m as the restore path does, with the revisions kept (no bump): the
// snapshot fetched and checked against its manifest, restored with etcd's library, served alone.
func seed(t testing.TB, b *blob.Bucket, m backup.Manifest, name string, tune ...func(*embed.Config)) *clientv3.Client {
	t.Helper()
	peer, data := restored(t, b, m, name)
	return startEmbedded(t, data, name, peer, tune...)
}

// seedOn is seed onto an etcd of version ("" embedded).
func seedOn(t testing.TB, version string, b *blob.Bucket, m backup.Manifest, name string) *clientv3.Client {
	t.Helper()
	peer, data := restored(t, b, m, name)
	return startOn(t, version, data, name, peer)
}

// restored is m's snapshot restored into a data directory for a member name with peer URL peer.
func restored(t testing.TB, b *blob.Bucket, m backup.Manifest, name string) (url.URL, string) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "snap.db")
	require.NoError(t, backup.Fetch(context.Background(), b, m, file, nil))
	data := filepath.Join(dir, "data")
	peer := freeURL(t)
	require.NoError(t, snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{SnapshotPath: file, Name: name,
		OutputDataDir: data, PeerURLs: []string{peer.String()}, InitialCluster: name + "=" + peer.String(), InitialClusterToken: name}))
	return peer, data
}

// follower runs a continuous backup writer (delta.Follower) of c into m's chain until stopped: it
// returns the stop, which waits for the follower to end, and the chain's uploader.
type follower struct {
	chain delta.BlobChain
	stop  func()
}

func follow(t testing.TB, c *clientv3.Client, b *blob.Bucket, m backup.Manifest, maxBytes int) *follower {
	t.Helper()
	return followEvery(t, c, b, m, maxBytes, 50*time.Millisecond)
}

// followEvery is follow with chunks cut every maxAge.
func followEvery(t testing.TB, c *clientv3.Client, b *blob.Bucket, m backup.Manifest, maxBytes int, maxAge time.Duration) *follower {
	t.Helper()
	chain := delta.BlobChain{Bucket: b, Prefix: m.ChainsPrefix()}
	f := &delta.Follower{Client: c, Uploader: chain, ClusterID: m.EtcdClusterID, ChainStart: m.Revision,
		MaxAge: maxAge, MaxBytes: maxBytes}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := f.Follow(ctx, m.Revision+1); done <- err }()
	var once sync.Once
	fo := &follower{chain: chain}
	fo.stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	t.Cleanup(fo.stop)
	return fo
}

// waitStored waits until m's chain holds every revision up to rev.
func (f *follower) waitStored(t testing.TB, start, rev int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, next, err := f.chain.List(context.Background(), start)
		return err == nil && next > rev
	}, 30*time.Second, 20*time.Millisecond, "revision %d stored", rev)
}

// kv is one key as etcd holds it: everything `get` shows.
type kv struct {
	Value                       string
	Create, Mod, Version, Lease int64
}

// keyspace is every key at revision rev (0: now).
func keyspace(t testing.TB, c *clientv3.Client, rev int64) map[string]kv {
	t.Helper()
	opts := []clientv3.OpOption{clientv3.WithFromKey()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	r, err := c.Get(context.Background(), "\x00", opts...)
	require.NoError(t, err)
	out := map[string]kv{}
	for _, k := range r.Kvs {
		out[string(k.Key)] = kvOf(k)
	}
	return out
}

func kvOf(k *mvccpb.KeyValue) kv {
	return kv{Value: string(k.Value), Create: k.CreateRevision, Mod: k.ModRevision, Version: k.Version, Lease: k.Lease}
}

// requireSame: the standby's keyspace is the primary's `get --rev` at the standby's revision.
func requireSame(t testing.TB, primary, standby *clientv3.Client) int64 {
	t.Helper()
	rev := revisionOf(t, standby)
	want, got := keyspace(t, primary, rev), keyspace(t, standby, 0)
	require.NotEmpty(t, want)
	require.Equal(t, want, got, "the standby's keyspace is the primary's at revision %d", rev)
	return rev
}

// progress keeps the applier's reports.
type progress struct {
	mu          sync.Mutex
	first, last Progress
	n           int
}

func (p *progress) report(r Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == 0 {
		p.first = r
	}
	p.last, p.n = r, p.n+1
}

func (p *progress) get() Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// run runs an applier until stopped: stop returns what Follow returned.
func run(a *Applier) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Follow(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

// applier is an Applier of the primary's folder in b into standby, fast-polling.
func applier(b *blob.Bucket, id string, standby *clientv3.Client, p *progress) *Applier {
	a := &Applier{Bucket: b, Namespace: ns, Name: primaryName, ClusterID: id, Client: standby, Poll: 20 * time.Millisecond}
	if p != nil {
		a.Progress = p.report
	}
	return a
}

// writeKeys puts n keys k<i>=<tag>-<i>, and returns the revision of the last.
func writeKeys(t testing.TB, c *clientv3.Client, tag string, n int) int64 {
	t.Helper()
	var rev int64
	for i := range n {
		r, err := c.Put(context.Background(), fmt.Sprintf("k%02d", i%25), fmt.Sprintf("%s-%d", tag, i))
		require.NoError(t, err)
		rev = r.Header.Revision
	}
	return rev
}
