package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
)

// putSnapshot stores a snapshot (random bytes: Copy does not look inside) and its manifest, with a chain
// of chunks chunk names, as Backup and the continuous writer leave them.
func putSnapshot(t *testing.T, b *blob.Bucket, uid string, at time.Time, rev int64, chunks ...[2]int64) Manifest {
	ctx := context.Background()
	body := etcdStream(t, 2048+int(rev))
	key := SnapshotKey("ns", "c", at, rev)
	require.NoError(t, b.WriteAll(ctx, key, body, &blob.WriterOptions{Metadata: map[string]string{MetaClusterUID: uid}}))
	sum := sha256.Sum256(body)
	m := Manifest{Namespace: "ns", Cluster: "c", ClusterUID: uid, EtcdClusterID: "e1", Revision: rev, Size: int64(len(body)),
		SHA256: hex.EncodeToString(sum[:]), Time: at, Snapshot: SnapshotKey("", "", at, rev)[2:], Key: ManifestKey(key)}
	require.NoError(t, WriteManifest(ctx, b, m))
	for _, c := range chunks {
		putChunk(t, b, m, c[0], c[1])
	}
	return m
}

func putChunk(t *testing.T, b *blob.Bucket, m Manifest, first, last int64) {
	key := fmt.Sprintf("%s%0*d-%0*d.delta", m.ChainDir(), RevisionDigits, first, RevisionDigits, last)
	require.NoError(t, b.WriteAll(context.Background(), key, []byte(fmt.Sprintf("chunk %d-%d", first, last)), nil))
}

func snapshotsIn(t *testing.T, b *blob.Bucket) []string {
	ms, skipped, err := List(context.Background(), b, "ns", "c")
	require.NoError(t, err)
	require.Empty(t, skipped)
	var out []string
	for _, m := range ms {
		out = append(out, m.Snapshot)
	}
	return out
}

// Copy keeps a second destination to its own retention: this cluster's snapshots only, each with its
// chain and its manifest last, the chunks added since the last pass, and the copy pruned by its rules
// (not the primary's); objects are byte for byte the primary's (an encrypted one stays encrypted); a
// snapshot that does not match its manifest is not copied, and nothing of it counts in the copy.
func TestCopy(t *testing.T) {
	ctx := context.Background()
	from, to := fileBucket(t), fileBucket(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ms []Manifest
	for i := range 4 {
		ms = append(ms, putSnapshot(t, from, "u1", t0.Add(time.Duration(i)*time.Hour), int64(100*(i+1)), [2]int64{int64(100*(i+1)) + 1, int64(100*(i+1)) + 40}))
	}
	putSnapshot(t, from, "other", t0.Add(5*time.Hour), 900)
	keep2 := Retention{KeepLast: 2}

	res, err := Copy(ctx, from, to, "ns", "c", "u1", keep2, t0.Add(6*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2, res.Snapshots)
	require.Equal(t, 2, res.Chunks)
	require.Equal(t, []string{ms[3].Snapshot, ms[2].Snapshot}, snapshotsIn(t, to), "the copy's retention: the newest two of this cluster's")
	require.Equal(t, ms[3].Snapshot, res.Newest.Snapshot)
	require.Equal(t, int64(440), res.NewestRevision, "the newest chain's end")
	orig, err := from.ReadAll(ctx, ms[3].SnapshotKey())
	require.NoError(t, err)
	copied, err := to.ReadAll(ctx, ms[3].SnapshotKey())
	require.NoError(t, err)
	require.True(t, bytes.Equal(orig, copied), "copied as stored")

	// Nothing new: nothing copied. A chunk added to the newest chain: that one.
	res, err = Copy(ctx, from, to, "ns", "c", "u1", keep2, t0.Add(6*time.Hour))
	require.NoError(t, err)
	require.Zero(t, res.Snapshots+res.Chunks)
	putChunk(t, from, ms[3], 441, 470)
	res, err = Copy(ctx, from, to, "ns", "c", "u1", keep2, t0.Add(6*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, res.Chunks)
	require.Equal(t, int64(470), res.NewestRevision)

	// A newer snapshot: copied, and the copy's oldest pruned with its chain.
	m5 := putSnapshot(t, from, "u1", t0.Add(7*time.Hour), 500)
	res, err = Copy(ctx, from, to, "ns", "c", "u1", keep2, t0.Add(8*time.Hour))
	require.NoError(t, err)
	require.Equal(t, []string{m5.Snapshot, ms[3].Snapshot}, snapshotsIn(t, to))
	require.Len(t, res.Pruned, 1)
	chain, err := to.List(&blob.ListOptions{Prefix: ms[2].ChainDir()}).Next(ctx)
	require.Error(t, err, "the pruned snapshot's chain went with it (%v)", chain)

	// A damaged primary snapshot: refused, and no manifest of it in the copy.
	m6 := putSnapshot(t, from, "u1", t0.Add(9*time.Hour), 600)
	require.NoError(t, from.WriteAll(ctx, m6.SnapshotKey(), []byte("not what the manifest says"), nil))
	_, err = Copy(ctx, from, to, "ns", "c", "u1", keep2, t0.Add(10*time.Hour))
	require.ErrorIs(t, err, ErrSnapshotDamaged)
	require.NotContains(t, snapshotsIn(t, to), m6.Snapshot)
}
