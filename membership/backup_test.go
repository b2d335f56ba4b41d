package membership

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"gocloud.dev/blob"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
)

// fill writes n keys (some overwritten, some deleted, so that revisions and tombstones are in the
// snapshot) and returns the expected content.
func fill(t *testing.T, cl *clientv3.Client, n int) map[string]string {
	want := map[string]string{}
	ctx := context.Background()
	for i := range n {
		k, v := fmt.Sprintf("/data/%04d", i), fmt.Sprintf("value-%d-%s", i, string(make([]byte, i%200)))
		_, err := cl.Put(ctx, k, v)
		require.NoError(t, err)
		want[k] = v
	}
	for i := 0; i < n; i += 7 {
		k := fmt.Sprintf("/data/%04d", i)
		_, err := cl.Put(ctx, k, "second")
		require.NoError(t, err)
		want[k] = "second"
	}
	for i := 3; i < n; i += 11 {
		k := fmt.Sprintf("/data/%04d", i)
		_, err := cl.Delete(ctx, k)
		require.NoError(t, err)
		delete(want, k)
	}
	return want
}

// content reads every key under /data through a client.
func content(t *testing.T, cl *clientv3.Client) (map[string]string, int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Get(ctx, "/data/", clientv3.WithPrefix())
	require.NoError(t, err)
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	return got, resp.Header.Revision
}

// backupOnce runs one backup of c into d as the backup Job does.
func (c *tcluster) backupOnce(d backup.Destination, r backup.Retention, now time.Time) (BackupResult, error) {
	b, err := d.Open(context.Background())
	require.NoError(c.t, err)
	defer b.Close()
	if err := backup.Check(context.Background(), d, b); err != nil {
		return BackupResult{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return Backup(ctx, c.etcd(5*time.Second), b, c.log, BackupRequest{
		Endpoints: c.endpoints(-1), Destination: d, Namespace: "ns", Cluster: "src", ClusterUID: c.parent,
		Retention: r, Now: func() time.Time { return now },
	})
}

// restoredCluster is a new cluster of n members whose seed restores from source.
// (The store's credentials are already in the test's environment, where the pod's agent loads them.)
func restoredCluster(t *testing.T, version string, n int, source string) *tcluster {
	src, err := backup.ParseSource(source)
	require.NoError(t, err)
	c := newCluster(t, version, n)
	c.restore = &src
	return c
}

func write(t *testing.T, path string, data []byte) {
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// writeManifest stores m in the directory store dir, at m.Key.
func writeManifest(t *testing.T, dir string, m backup.Manifest) {
	d, err := backup.ParseDestination("file://" + dir)
	require.NoError(t, err)
	b, err := d.Open(context.Background())
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, backup.WriteManifest(context.Background(), b, m))
}

func sha256hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// hashKV is every member's hash of the store at rev: equal hashes mean equal data.
func (c *tcluster) hashKV(rev int64) map[string]uint32 {
	cl := c.client()
	defer cl.Close()
	out := map[string]uint32{}
	for _, s := range c.slots {
		if s.agent == nil {
			continue
		}
		// A member that has not applied rev yet (a learner just promoted, a follower behind under load)
		// answers ErrFutureRev: asked again until it has, bounded (a cold CI run hit this at 072633d).
		var resp *clientv3.HashKVResponse
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, err = cl.HashKV(ctx, s.clientURL, rev)
			cancel()
			if !errors.Is(err, rpctypes.ErrFutureRev) || time.Now().After(deadline) {
				break
			}
		}
		require.NoError(c.t, err)
		out[s.name] = resp.Hash
	}
	return out
}

// TestMembershipBackupRestore: a snapshot of a real 3-member cluster goes to MinIO, the GCS emulator
// and a directory; each is restored into a new cluster whose seed restores and whose other members
// join as learners, and the restored clusters hold every key, at the same hash on every member as the
// source had at that revision. Retention keeps the newest and never the snapshot just written.
func TestMembershipBackupRestore(t *testing.T) {
	forEachVersion(t, func(t *testing.T, v string) {
		stores := []store{startMinIO(t, "etcd-backups"), startFakeGCS(t, "etcd-backups"), fileStore(t)}
		src := bootstrapped(t, v, 3)
		cl := src.client()
		defer cl.Close()
		want := fill(t, cl, 300)
		_, rev := content(t, cl)
		srcHash := src.hashKV(rev)
		require.Len(t, srcHash, 3)

		for i, st := range stores {
			t.Run(st.name, func(t *testing.T) {
				d := st.destination(t)
				leader := src.leader()
				res, err := src.backupOnce(d, backup.Retention{KeepLast: 2}, time.Now())
				require.NoError(t, err)
				stable := leader == src.leader()
				m := res.Manifest
				require.Equal(t, rev, m.Revision, "nothing was written after the content was read")
				require.Equal(t, src.leases.Report(src.slots[0].lease).ClusterID, m.EtcdClusterID)
				require.Equal(t, src.parent, m.ClusterUID)
				require.NotEmpty(t, m.Member)
				require.Greater(t, m.Size, int64(32*1024))
				require.Len(t, m.SHA256, 64)
				// A healthy follower is preferred to the leader: judged when one leader led throughout (an
				// election meanwhile may rightly have left only the leader answering).
				for _, s := range src.slots {
					if s.name == m.Member && stable {
						require.NotEqual(t, leader, src.memberID(s.i), "the snapshot came from the leader while followers were healthy")
					}
				}
				if !stable {
					t.Logf("leadership moved during the backup: the follower preference is not judged this time")
				}
				url := d.ObjectURL(m.SnapshotKey())

				// The store's copy is restored into a new cluster; the first store's into three
				// members (learners join the restored seed), the others' into one.
				members := 1
				if i == slices.Index(etcdVersions, v)%len(stores) { // each version restores a different store into three
					members = 3
				}
				dst := restoredCluster(t, v, members, url)
				dst.bootstrap(nil, members)
				dcl := dst.client()
				defer dcl.Close()
				got, drev := content(t, dcl)
				require.Equal(t, want, got)
				// The restored store continues a billion revisions on, compacted up to there: a client
				// resuming at a revision of the old cluster is told to list again, never handed other
				// events under numbers it saw.
				require.Equal(t, rev+RevisionBump, drev)
				_, err = dcl.Get(context.Background(), "k", clientv3.WithRev(rev))
				require.ErrorIs(t, err, rpctypes.ErrCompacted)
				wch := dcl.Watch(clientv3.WithRequireLeader(context.Background()), "k", clientv3.WithRev(rev+1))
				wr := <-wch
				require.Equal(t, rev+RevisionBump, wr.CompactRevision, "a watch from an old revision is compacted")
				pr, err := dcl.Put(context.Background(), "after-restore", "x")
				require.NoError(t, err)
				require.Equal(t, rev+RevisionBump+1, pr.Header.Revision)
				// Every member of the restored cluster holds the same store (at its own revisions; the
				// source's hash is of other revision numbers).
				dh := dst.hashKV(pr.Header.Revision)
				require.Len(t, dh, members)
				for name, h := range dh {
					require.Equal(t, dh["m0"], h, "member %s of the restored cluster differs from its seed", name)
				}
				r := dst.leases.Report(dst.slots[0].lease)
				require.Equal(t, url, r.RestoredFrom)
				require.Equal(t, fmt.Sprint(rev), r.RestoredRevision)
				require.NotEqual(t, m.EtcdClusterID, r.ClusterID, "a restored cluster is a new etcd cluster")

				// Retention, keepLast 2. A backup whose clock is an hour behind prunes nothing: the
				// newer-dated snapshots could be a concurrent backup's, and it never deletes those nor
				// its own. The next backup with a right clock prunes down to the two newest.
				second, err := src.backupOnce(d, backup.Retention{KeepLast: 2}, time.Now().Add(time.Second))
				require.NoError(t, err)
				require.Empty(t, second.Pruned)
				third, err := src.backupOnce(d, backup.Retention{KeepLast: 2}, time.Now().Add(-time.Hour))
				require.NoError(t, err)
				require.Empty(t, third.Pruned, "a backup never prunes snapshots dated after its own")
				fourth, err := src.backupOnce(d, backup.Retention{KeepLast: 2}, time.Now().Add(2*time.Second))
				require.NoError(t, err)
				var pruned []string
				for _, p := range fourth.Pruned {
					pruned = append(pruned, p.Key)
				}
				require.ElementsMatch(t, []string{m.Key, third.Manifest.Key}, pruned, "the two oldest go; the newest two stay")
				b, err := d.Open(context.Background())
				require.NoError(t, err)
				defer b.Close()
				left, _, err := backup.List(context.Background(), b, "ns", "src")
				require.NoError(t, err)
				require.Len(t, left, 2)

				// Leftovers without a manifest (an upload cut short after the store kept it): this
				// cluster's go once older than backup.OrphanAge; a younger one, and another
				// EtcdCluster's, stay. A directory keeps no metadata (no side files): its leftovers
				// carry no UID and stay (a file upload is renamed into place complete, so only a
				// delete cut short leaves one there).
				put := func(key, uid string) {
					w, err := b.NewWriter(context.Background(), key, &blob.WriterOptions{Metadata: map[string]string{backup.MetaClusterUID: uid}})
					require.NoError(t, err)
					_, err = w.Write([]byte("half a snapshot"))
					require.NoError(t, err)
					require.NoError(t, w.Close())
				}
				mine, theirs := "ns/src/20200101T000000Z-r1.db", "ns/src/20200101T000001Z-r2.db"
				put(mine, src.parent)
				put(theirs, "another-etcdcluster")
				young, err := src.backupOnce(d, backup.Retention{KeepLast: 2}, time.Now().Add(3*time.Second))
				require.NoError(t, err)
				require.Empty(t, young.Orphans, "a leftover younger than OrphanAge may be an upload in progress")
				later, err := src.backupOnce(d, backup.Retention{KeepLast: 2}, time.Now().Add(backup.OrphanAge+time.Hour))
				require.NoError(t, err)
				labeled := st.name != "file"
				if labeled {
					require.Equal(t, []string{mine}, later.Orphans)
				} else {
					require.Empty(t, later.Orphans)
				}
				for key, want := range map[string]bool{mine: !labeled, theirs: true} {
					ok, err := b.Exists(context.Background(), key)
					require.NoError(t, err)
					require.Equal(t, want, ok, key)
				}
			})
		}
	})
}

// TestMembershipRestoreInPlace is the in-place restore of docs/design/16-backup-restore.md §16.8 on real etcd. While a
// member runs on the volume the restore refuses to touch it (etcd's database lock). With every member
// stopped it restores a snapshot over ordinal 0's data, keeping the old data aside. With the replaced
// cluster retired, member 0 starts alone on the restored data, and the others, still on the replaced
// cluster's data, move it aside and join one at a time: every key of the snapshot is back, the key
// written after it is not, and every member holds the same store.
func TestMembershipRestoreInPlace(t *testing.T) {
	v := newestEtcd
	ctx := context.Background()
	c := bootstrapped(t, v, 3)
	cl := c.client()
	want := fill(t, cl, 200)
	// Every member has applied the last write (the backup takes a follower's snapshot, which may be a
	// heartbeat behind): hashKV asks each at that revision until it has.
	_, last := content(t, cl)
	c.hashKV(last)
	d := fileStore(t).destination(t)
	res, err := c.backupOnce(d, backup.Retention{}, time.Now())
	require.NoError(t, err)
	url := d.ObjectURL(res.Manifest.SnapshotKey())
	_, err = cl.Put(ctx, "/data/after-backup", "lost by the restore")
	require.NoError(t, err)
	cl.Close()
	oldID := c.leases.Report(c.slots[0].lease).ClusterID
	oldMember := c.memberID(0)
	src, err := backup.ParseSource(url)
	require.NoError(t, err)
	s0 := c.slots[0]
	req := RestoreRequest{Source: src, Namespace: "ns", Cluster: "src", DataDir: s0.dataDir(), Name: s0.name, PeerURL: s0.peerURL,
		Token: "tok-" + c.parent + "-restore-1", Replace: true,
		Bind: func(r RestoreResult) error {
			return WriteBinding(s0.dataDir(), Binding{ClusterUID: c.parent, PeerURL: s0.peerURL, Restored: &Restored{URL: r.URL, Revision: r.Revision}})
		}}

	_, err = Restore(ctx, c.log, req)
	require.ErrorIs(t, err, ErrEtcdRunning, "never under a running member")
	df, err := ReadData(s0.dataDir())
	require.NoError(t, err)
	require.Equal(t, oldMember, api.FormatID(df.MemberID), "the running member's data is untouched")

	c.stopAll()
	// A failure after the old data was moved aside (here: the binding cannot be written) moves it back.
	failing := req
	failing.Bind = func(RestoreResult) error { return errors.New("disk full") }
	_, err = Restore(ctx, c.log, failing)
	require.ErrorContains(t, err, "the old data was moved back")
	df, err = ReadData(s0.dataDir())
	require.NoError(t, err)
	require.Equal(t, oldMember, api.FormatID(df.MemberID))
	require.NotNil(t, df.Binding, "with its binding")
	require.Equal(t, c.parent, df.Binding.ClusterUID)

	got, err := Restore(ctx, c.log, req)
	require.NoError(t, err)
	require.Equal(t, res.Manifest.Revision, got.Revision)
	aside, err := ReadData(s0.dataDir() + ".removed-1")
	require.NoError(t, err)
	require.Equal(t, oldMember, api.FormatID(aside.MemberID), "the replaced data is kept aside")

	id, err := api.ParseID(oldID)
	require.NoError(t, err)
	// Member 0's agent starts on an agent.json the kubelet has not refreshed yet: no retired IDs. The
	// old Leases then make the restored data look foreign, until a later read of the file retires them.
	var reads atomic.Int32
	c.loadRetired = func() (map[uint64]bool, error) {
		if reads.Add(1) <= 2 {
			return nil, nil
		}
		return map[uint64]bool{id: true}, nil
	}
	c.intent(0, api.IntentMember, false, 0)
	c.start(0, 0)
	c.waitFor("member 0 on the restored data", stepMax, func() bool { return c.voters(0) })
	require.Greater(t, reads.Load(), int32(2), "started only once the retired IDs were read")
	c.grow(1)
	c.grow(2)

	dcl := c.client()
	defer dcl.Close()
	have, rev := content(t, dcl)
	require.Equal(t, want, have, "the snapshot's keys, and not the one written after it")
	require.Equal(t, res.Manifest.Revision+RevisionBump, rev)
	h := c.hashKV(rev)
	require.Len(t, h, 3)
	for name, x := range h {
		require.Equal(t, h["m0"], x, "member %s differs from member 0", name)
	}
	r0 := c.leases.Report(s0.lease)
	require.Equal(t, url, r0.RestoredFrom)
	require.NotEqual(t, oldID, r0.ClusterID, "a new cluster")
	// (grow's wait can pass on a Lease report left from the replaced cluster, healthy voter too: the
	// reports of the restored one follow within a look.)
	c.waitFor("every member to report the restored cluster", stepMax, func() bool {
		for _, s := range c.slots {
			if r := c.leases.Report(s.lease); r.ClusterID != r0.ClusterID || !r.IsVoter() || !r.Healthy {
				return false
			}
		}
		return true
	})
	for _, s := range c.slots[1:] {
		_, err := os.Stat(s.dataDir() + ".removed-1")
		require.NoError(t, err, "%s moved the replaced cluster's data aside", s.name)
	}
}

// TestMembershipRestoreRefusesDamage: a truncated snapshot, one whose SHA-256 does not match its
// manifest, one with a byte flipped (manifest rewritten to match, so only etcd's own hash catches it),
// one without a manifest and a missing one are refused: the seed reports RestoreFailed naming the
// problem, no data directory appears, and etcd never starts. A good snapshot then restores.
func TestMembershipRestoreRefusesDamage(t *testing.T) {
	v := newestEtcd
	src := bootstrapped(t, v, 1)
	cl := src.client()
	want := fill(t, cl, 50)
	cl.Close()
	st := fileStore(t)
	d := st.destination(t)
	res, err := src.backupOnce(d, backup.Retention{}, time.Now())
	require.NoError(t, err)
	m := res.Manifest
	snapFile := filepath.Join(d.Root, m.SnapshotKey())
	good, err := os.ReadFile(snapFile)
	require.NoError(t, err)
	// stored writes data as the snapshot under dir/sub, with mm as its manifest, and returns its URL.
	stored := func(dir, sub string, data []byte, mm backup.Manifest) string {
		mm.Key = filepath.Join(sub, backup.ManifestKey(m.Snapshot))
		write(t, filepath.Join(dir, sub, m.Snapshot), data)
		writeManifest(t, dir, mm)
		return "file://" + filepath.Join(dir, sub, m.Snapshot)
	}

	damage := []struct {
		name    string
		prepare func(dir string) string // returns the source URL
		problem string
	}{
		{"truncated", func(dir string) string {
			return stored(dir, "t", good[:len(good)/2], m)
		}, "truncated"},
		{"wrong-sha256", func(dir string) string {
			mm := m
			mm.SHA256 = fmt.Sprintf("%064x", 1)
			return stored(dir, "h", good, mm)
		}, "SHA-256"},
		{"flipped-byte", func(dir string) string {
			bad := append([]byte(nil), good...)
			bad[len(bad)/3] ^= 0xff
			mm := m
			mm.SHA256 = sha256hex(bad)
			return stored(dir, "f", bad, mm)
		}, "etcd's hash"},
		{"no-manifest", func(dir string) string {
			write(t, filepath.Join(dir, "n", m.Snapshot), good)
			return "file://" + filepath.Join(dir, "n", m.Snapshot)
		}, "no readable manifest"},
		{"no-snapshot-latest", func(dir string) string {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "empty"), 0o755))
			return "file://" + filepath.Join(dir, "empty", "latest")
		}, "no complete snapshot"},
	}
	for _, tc := range damage {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.prepare(t.TempDir())
			dst := restoredCluster(t, v, 1, url)
			dst.events = &MemRecorder{}
			dst.intent(0, api.IntentMember, true, 0)
			dst.start(0, 0)
			dst.waitFor("RestoreRefused on the seed's Lease", 30*time.Second, func() bool {
				r := dst.leases.Report(dst.slots[0].lease)
				return r.Reason() == api.ReasonRestoreRefused
			})
			r := dst.leases.Report(dst.slots[0].lease)
			require.Contains(t, r.Error, "spec.restore.from: ")
			require.Contains(t, r.Error, tc.problem)
			_, err := os.Stat(dst.slots[0].dataDir())
			require.True(t, os.IsNotExist(err), "no data directory is written from a bad snapshot")
			require.Empty(t, r.ClusterID, "etcd never started")
			// Terminal: never tried again by this pod (one attempt, one Event), though its report stays.
			time.Sleep(6 * time.Second) // past the first backoff a retry would have taken
			require.Equal(t, 1, dst.events.Count(EventRestoreFailed), "one attempt: %v", dst.events.Events())
			require.Equal(t, api.ReasonRestoreRefused, dst.leases.Report(dst.slots[0].lease).Reason())
			dst.kill(0)
		})
	}
	// A store that does not answer may come back: the seed says it retries, and does.
	t.Run("store-not-answering", func(t *testing.T) {
		closed := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
		dst := restoredCluster(t, v, 1, "s3://nowhere/prod/latest?endpoint="+closed+"&region=us-east-1&use_path_style=true")
		dst.events = &MemRecorder{}
		dst.intent(0, api.IntentMember, true, 0)
		dst.start(0, 0)
		dst.waitFor("a second attempt", 60*time.Second, func() bool {
			r := dst.leases.Report(dst.slots[0].lease)
			return r.Reason() == api.ReasonRestoreFailed && strings.Contains(r.Error, "attempt 2 failed, retrying at ")
		})
		require.Contains(t, dst.leases.Report(dst.slots[0].lease).Error, "is not reachable")
		dst.kill(0)
	})
	t.Run("good", func(t *testing.T) {
		dst := restoredCluster(t, v, 1, d.ObjectURL(m.SnapshotKey()))
		dst.bootstrap(nil, 1)
		dcl := dst.client()
		defer dcl.Close()
		got, _ := content(t, dcl)
		require.Equal(t, want, got)
	})
}

// TestMembershipRestoreVerifyTouchesNothing: the in-place restore's verification (VerifyOnly) runs
// every check of a restore against real snapshots of a running member, leaves nothing behind and
// touches nothing: a damaged snapshot, one of another cluster (unless accepted) and one that is not
// the one verified are refused as such (Refused: no retry), and "latest" with the verified hash finds
// the verified snapshot after a newer one was stored.
func TestMembershipRestoreVerifyTouchesNothing(t *testing.T) {
	v := newestEtcd
	ctx := context.Background()
	c := bootstrapped(t, v, 1)
	cl := c.client()
	defer cl.Close()
	fill(t, cl, 50)
	d := fileStore(t).destination(t)
	first, err := c.backupOnce(d, backup.Retention{}, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	m := first.Manifest
	good, err := os.ReadFile(filepath.Join(d.Root, m.SnapshotKey()))
	require.NoError(t, err)
	member := c.memberID(0)

	scratch := t.TempDir()
	verify := func(url, uid, accept, expect string) (RestoreResult, error) {
		src, err := backup.ParseSource(url)
		require.NoError(t, err)
		return Restore(ctx, c.log, RestoreRequest{Source: src, Namespace: "ns", Cluster: "src", DataDir: filepath.Join(scratch, "data"),
			Name: "m0", PeerURL: "http://127.0.0.1:1", Token: "verify", VerifyOnly: true, ClusterUID: uid, AcceptCluster: accept, ExpectSHA256: expect})
	}
	copyAs := func(dir string, mm backup.Manifest, data []byte) string {
		mm.Key = filepath.Join(dir, backup.ManifestKey(m.Snapshot))
		write(t, filepath.Join(d.Root, dir, m.Snapshot), data)
		writeManifest(t, d.Root, mm)
		return d.ObjectURL(filepath.Join(dir, m.Snapshot))
	}
	truncated := m
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/3] ^= 0xff
	flippedM := m
	flippedM.SHA256 = sha256hex(flipped)
	foreign := m
	foreign.ClusterUID = "0d5c3f1e-other"
	for _, tc := range []struct {
		name, url, accept, expect string
		want                      error
	}{
		{"truncated", copyAs("t", truncated, good[:len(good)/2]), "", "", backup.ErrSnapshotDamaged},
		{"flipped byte", copyAs("f", flippedM, flipped), "", "", backup.ErrSnapshotDamaged},
		{"missing", d.ObjectURL("ns/src/20200101T000000Z-r1.db"), "", "", backup.ErrNoSnapshot},
		{"another cluster's", copyAs("o", foreign, good), "", "", ErrForeignSnapshot},
		{"another cluster's, accepted", copyAs("a", foreign, good), "0d5c3f1e-other", "", nil},
		{"not the one verified", d.ObjectURL(m.SnapshotKey()), "", fmt.Sprintf("%064x", 7), ErrSnapshotChanged},
		{"good", d.ObjectURL(m.SnapshotKey()), "", m.SHA256, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := verify(tc.url, c.parent, tc.accept, tc.expect)
			if tc.want == nil {
				require.NoError(t, err)
				require.Equal(t, m.Revision, res.Revision, "restorable by etcd's library at the snapshot's revision")
			} else {
				require.ErrorIs(t, err, tc.want)
				require.True(t, Refused(err), "not worth another attempt")
			}
			left, err := os.ReadDir(scratch)
			require.NoError(t, err)
			require.Empty(t, left, "nothing left in the scratch space")
		})
	}

	// "latest" with the verified hash: the verified snapshot, although a newer one is the latest now.
	_, err = cl.Put(ctx, "/data/after-first", "x")
	require.NoError(t, err)
	second, err := c.backupOnce(d, backup.Retention{}, time.Now())
	require.NoError(t, err)
	require.NotEqual(t, m.SHA256, second.Manifest.SHA256)
	res, err := verify(d.ObjectURL(backup.Latest), c.parent, "", m.SHA256)
	require.NoError(t, err)
	require.Equal(t, m.Revision, res.Revision)
	_, err = verify(d.ObjectURL(backup.Latest), "", "", "")
	require.NoError(t, err, "a clone (no cluster to match) restores any cluster's snapshot")

	// The running member was never touched, and serves.
	require.Equal(t, member, c.memberID(0))
	_, err = cl.Put(ctx, "/data/still-serving", "x")
	require.NoError(t, err)
}

// Two backups of one revision in one second (the continuous writer's snapshot and a Job's) get two
// keys: the second takes the next free second, instead of the store refusing it at the end of its
// upload (CI saw the 412 from MinIO).
func TestMembershipBackupSameSecondSameRevision(t *testing.T) {
	d := startMinIO(t, "etcd-same-second").destination(t)
	src := bootstrapped(t, newestEtcd, 1)
	at := time.Now()
	first, err := src.backupOnce(d, backup.Retention{KeepLast: 5}, at)
	require.NoError(t, err)
	second, err := src.backupOnce(d, backup.Retention{KeepLast: 5}, at)
	require.NoError(t, err)
	require.Equal(t, first.Manifest.Revision, second.Manifest.Revision, "nothing was written between")
	require.NotEqual(t, first.Manifest.Key, second.Manifest.Key)
	require.Equal(t, first.Manifest.Time.Add(time.Second), second.Manifest.Time)
}
