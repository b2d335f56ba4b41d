package backup

import (
	"context"
	"crypto/sha256"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/internal/testsupport"
)

func TestParseDestination(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Destination
		canon   string
		problem string
	}{
		{in: "s3://bkt/etcd/prod", want: Destination{Scheme: "s3", Bucket: "bkt", Prefix: "etcd/prod"}, canon: "s3://bkt/etcd/prod"},
		{in: "s3://bkt/etcd/?endpoint=http://minio:9000&use_path_style=true&region=us-east-1", want: Destination{Scheme: "s3", Bucket: "bkt", Prefix: "etcd"},
			canon: "s3://bkt/etcd?endpoint=http://minio:9000&region=us-east-1&use_path_style=true"},
		{in: "s3://bkt", want: Destination{Scheme: "s3", Bucket: "bkt"}, canon: "s3://bkt/"},
		{in: "gs://bkt/a//b/../c", want: Destination{Scheme: "gs", Bucket: "bkt", Prefix: "a/c"}, canon: "gs://bkt/a/c"},
		{in: "file:///var/backups/", want: Destination{Scheme: "file", Root: "/var/backups"}, canon: "file:///var/backups"},
		{in: "", problem: "is empty"},
		{in: "http://bkt/x", problem: `scheme "http"`},
		{in: "s3:///prefix", problem: "no bucket"},
		{in: "s3://key:secret@bkt/x", problem: "user info"},
		{in: "s3://bkt/x?endpiont=http://m:9000", problem: `parameter "endpiont"`},
		{in: "gs://bkt/x?region=eu", problem: `parameter "region"`},
		{in: "s3://bkt/x?endpoint=minio:9000", problem: "want http(s)://host"},
		{in: "s3://bkt/x?region=a&region=b", problem: "more than once"},
		{in: "file://host/dir", problem: `host "host"`},
		{in: "file:///", problem: "root directory"},
		{in: "s3://bkt/x#frag", problem: "fragment"},
		{in: "s3://bkt/x?endpoint=https://key:secret@minio:9000", problem: "credentials in its endpoint"},
		{in: "s3://bkt/x?endpoint=https://minio:9000/path", problem: "path, query or fragment"},
		{in: "gs://bkt/x?endpoint=https://gcs.example:443", problem: "must be http://"},
		{in: "gs://bkt/x?endpoint=http://fake-gcs:4443", want: Destination{Scheme: "gs", Bucket: "bkt", Prefix: "x"}, canon: "gs://bkt/x?endpoint=http://fake-gcs:4443"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			d, err := ParseDestination(tc.in)
			if testsupport.FailedAsWanted(t, err, tc.problem) {
				return
			}
			assert.Equal(t, tc.want.Scheme, d.Scheme)
			assert.Equal(t, tc.want.Bucket, d.Bucket)
			assert.Equal(t, tc.want.Prefix, d.Prefix)
			assert.Equal(t, tc.want.Root, d.Root)
			assert.Equal(t, tc.canon, d.String())
			again, err := ParseDestination(d.String())
			require.NoError(t, err, "the canonical form parses")
			assert.Equal(t, d.String(), again.String())
		})
	}
}

func TestParseSource(t *testing.T) {
	for _, tc := range []struct {
		in, prefix, root, snapshot, problem string
	}{
		{in: "s3://bkt/etcd/latest", prefix: "etcd"},
		{in: "s3://bkt/latest"},
		{in: "s3://bkt/etcd/ns/a/20261123T101010Z-r42.db?endpoint=http://m:9000", prefix: "etcd/ns/a", snapshot: "20261123T101010Z-r42.db"},
		{in: "file:///b/ns/a/x.db", root: "/b/ns/a", snapshot: "x.db"},
		{in: "file:///b/latest", root: "/b"},
		{in: "file:///x.db", problem: "root directory"},
		{in: "s3://bkt/etcd", problem: "names neither a snapshot"},
		{in: "gs://bkt/etcd/x.json", problem: "names neither a snapshot"},
		{in: "ftp://bkt/latest", problem: `scheme "ftp"`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			s, err := ParseSource(tc.in)
			if testsupport.FailedAsWanted(t, err, tc.problem) {
				return
			}
			assert.Equal(t, tc.prefix, s.Destination.Prefix)
			assert.Equal(t, tc.root, s.Destination.Root)
			assert.Equal(t, tc.snapshot, s.Snapshot)
			if s.Snapshot != "" {
				assert.Equal(t, tc.in, s.Destination.ObjectURL(s.Snapshot), "a snapshot URL round-trips")
			}
		})
	}
}

func TestExpired(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	m := func(name, uid string, age time.Duration) Manifest {
		return Manifest{Snapshot: name + ".db", Key: name + ".json", ClusterUID: uid, Time: now.Add(-age)}
	}
	// Newest first, as List returns them.
	all := []Manifest{m("a", "u", time.Minute), m("b", "u", time.Hour), m("other", "old-uid", 2*time.Hour), m("c", "u", 3*time.Hour), m("d", "u", 50*time.Hour)}
	names := func(ms []Manifest) []string {
		var out []string
		for _, x := range ms {
			out = append(out, x.Snapshot)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		in   []Manifest
		r    Retention
		want []string
	}{
		{"keep last 2", all, Retention{KeepLast: 2}, []string{"c.db", "d.db"}},
		{"keep last 1", all, Retention{KeepLast: 1}, []string{"b.db", "c.db", "d.db"}},
		{"max age 2h", all, Retention{MaxAge: 2 * time.Hour}, []string{"c.db", "d.db"}},
		{"both: the stricter wins", all, Retention{KeepLast: 10, MaxAge: 24 * time.Hour}, []string{"d.db"}},
		{"no limits keep everything", all, Retention{}, nil},
		{"the newest survives any age", []Manifest{m("x", "u", 100*time.Hour), m("y", "u", 200*time.Hour)}, Retention{MaxAge: time.Hour}, []string{"y.db"}},
		{"another UID's snapshots are never candidates", []Manifest{m("z", "old-uid", 100*time.Hour)}, Retention{KeepLast: 1, MaxAge: time.Hour}, nil},
		// Calendar tiers: the newest of each period that has one, as restic's --keep-daily.
		{"daily 2: the newest of today and of the day before that has one", []Manifest{
			m("t1", "u", time.Hour), m("t2", "u", 3*time.Hour), m("y1", "u", 20*time.Hour), m("y2", "u", 22*time.Hour),
			m("d3", "u", 60*time.Hour)}, Retention{Daily: 2}, []string{"t2.db", "y2.db", "d3.db"}},
		{"hourly and daily together: the union", []Manifest{
			m("h0", "u", 10*time.Minute), m("h0b", "u", 20*time.Minute), m("h1", "u", 70*time.Minute), m("old", "u", 30*time.Hour)},
			Retention{Hourly: 2, Daily: 2}, []string{"h0b.db"}},
		{"keepLast with tiers: either keeps", []Manifest{
			m("a", "u", time.Minute), m("b", "u", 2*time.Minute), m("c", "u", 3*time.Minute), m("w", "u", 8*24*time.Hour)},
			Retention{KeepLast: 2, Weekly: 2}, []string{"c.db"}},
		{"maxAge caps the tiers", []Manifest{m("a", "u", time.Minute), m("m1", "u", 40*24*time.Hour), m("m2", "u", 80*24*time.Hour)},
			Retention{Monthly: 12, MaxAge: 60 * 24 * time.Hour}, []string{"m2.db"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, names(Expired(tc.in, "u", tc.r, now)))
		})
	}
}

// etcdHash recognises a stream ending with the SHA-256 of its body however the stream is cut into
// writes, and nothing else.
func TestEtcdHash(t *testing.T) {
	body := make([]byte, 1000)
	for i := range body {
		body[i] = byte(i * 7)
	}
	sum := sha256.Sum256(body)
	stream := append(append([]byte(nil), body...), sum[:]...)
	for _, chunk := range []int{1, 5, 31, 32, 33, 64, 999, 2000} {
		h := newEtcdHash()
		for i := 0; i < len(stream); i += chunk {
			_, _ = h.Write(stream[i:min(i+chunk, len(stream))])
		}
		assert.True(t, h.Valid(), "chunk %d", chunk)
	}
	bad := append([]byte(nil), stream...)
	bad[10] ^= 1
	h := newEtcdHash()
	_, _ = h.Write(bad)
	assert.False(t, h.Valid(), "a flipped byte")
	h = newEtcdHash()
	_, _ = h.Write(stream[:len(stream)-1])
	assert.False(t, h.Valid(), "a truncated stream")
	h = newEtcdHash()
	_, _ = h.Write(sum[:16])
	assert.False(t, h.Valid(), "shorter than a hash")
}

// DeleteOrphans deletes a leftover snapshot (no manifest) of this cluster once it is older than the
// cutoff; a snapshot with its manifest, another cluster's leftover, an unlabeled one and a young one stay.
func TestDeleteOrphans(t *testing.T) {
	ctx := context.Background()
	// A directory bucket that keeps metadata, as S3 and GCS do (Destination.Open's file buckets write
	// none: their leftovers carry no UID and stay).
	b, err := fileblob.OpenBucket(t.TempDir(), nil)
	require.NoError(t, err)
	defer b.Close()
	put := func(key, uid string) {
		opts := &blob.WriterOptions{}
		if uid != "" {
			opts.Metadata = map[string]string{MetaClusterUID: uid}
		}
		require.NoError(t, b.WriteAll(ctx, key, []byte("x"), opts))
	}
	put("ns/c/a-r1.db", "uid-1")
	put("ns/c/a-r1.json", "")
	put("ns/c/b-r2.db", "uid-1")
	put("ns/c/c-r3.db", "uid-2")
	put("ns/c/d-r4.db", "")
	put("ns/other/e-r5.db", "uid-1")

	young, err := DeleteOrphans(ctx, b, "ns", "c", "uid-1", time.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.Empty(t, young, "written just now: may be an upload in progress")
	old, err := DeleteOrphans(ctx, b, "ns", "c", "uid-1", time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, []string{"ns/c/b-r2.db"}, old)
	for key, want := range map[string]bool{"ns/c/a-r1.db": true, "ns/c/b-r2.db": false, "ns/c/c-r3.db": true, "ns/c/d-r4.db": true, "ns/other/e-r5.db": true} {
		ok, err := b.Exists(ctx, key)
		require.NoError(t, err)
		require.Equal(t, want, ok, key)
	}
	none, err := DeleteOrphans(ctx, b, "ns", "c", "", time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Empty(t, none, "no UID, nothing is this cluster's")
}

// A directory destination writes each upload beside its final name: a Job's root filesystem (and so
// os.TempDir) is read-only, and a temporary file on another filesystem could not be renamed into place.
// Its leftovers (an upload killed mid-way) go with the others once old.
func TestFileDestinationNeedsNoTempDir(t *testing.T) {
	ctx := context.Background()
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "read-only-root"))
	root := t.TempDir()
	d, err := ParseDestination("file://" + root)
	require.NoError(t, err)
	b, err := d.Open(ctx)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.WriteAll(ctx, "ns/c/a-r1.db", []byte("snapshot"), nil))
	require.NoError(t, os.WriteFile(filepath.Join(root, "ns/c/b-r2.db.18a2b3c4d5e6f708.tmp"), []byte("half"), 0o600))
	done, err := DeleteOrphans(ctx, b, "ns", "c", "uid-1", time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, []string{"ns/c/b-r2.db.18a2b3c4d5e6f708.tmp"}, done, "the unfinished upload goes; the complete snapshot carries no UID here and stays")
}

// A snapshot object larger than its manifest says is read only one byte past that size (issue 24 §5):
// the whole object was downloaded before its size was checked, so a store could fill the seed's disk.
func TestFetchReadsAtMostTheManifestsSize(t *testing.T) {
	ctx := context.Background()
	d, err := ParseDestination("file://" + t.TempDir())
	require.NoError(t, err)
	b, err := d.Open(ctx)
	require.NoError(t, err)
	defer b.Close()
	m := Manifest{Namespace: "ns", Cluster: "c", Snapshot: "a-r1.db", Size: 100, Key: "ns/c/a-r1.db.json"}
	require.NoError(t, b.WriteAll(ctx, m.SnapshotKey(), make([]byte, 8<<20), nil))
	dst := filepath.Join(t.TempDir(), "snapshot.db")
	err = Fetch(ctx, b, m, dst, nil)
	require.ErrorIs(t, err, ErrSnapshotDamaged)
	require.ErrorContains(t, err, "has 101 bytes, its manifest says 100")
	require.NoFileExists(t, dst)
}
