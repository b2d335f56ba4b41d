package membership

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/internal/backup/delta"
)

// TestMembershipEncryptedContinuousBackup: with spec.backup.encryption the writer's full snapshot and
// every chunk are stored encrypted (no value written in the clear reaches the store: the GCS emulator,
// real etcd), a restore to a point with the identity equals etcd's `get --rev`, and a restore without a
// key or with another key is refused naming why, with no data directory written (issue 27).
func TestMembershipEncryptedContinuousBackup(t *testing.T) {
	ctx := context.Background()
	d := startFakeGCS(t, "etcd-encrypted").destination(t)
	b := openBucket(t, d)
	id, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	keys := backup.Keys{Recipients: []age.Recipient{id.Recipient()}, Identities: []age.Identity{id}}
	src := bootstrapped(t, newestEtcd, 1)
	cl := src.client()
	defer cl.Close()
	const marker = "plaintext-marker-0f3c9a"
	_, err = cl.Put(ctx, "/secret/before-snapshot", marker)
	require.NoError(t, err)
	run := &continuousRun{t: t, c: src, b: b, d: d, events: &MemRecorder{}, keys: keys}
	run.start()
	defer func() { run.stop() }()
	run.waitCovered(1)
	rng := rand.New(rand.NewPCG(11, 27))
	mid := workload(t, cl, rng, 150)
	put, err := cl.Put(ctx, "/secret/in-chain", marker)
	require.NoError(t, err)
	last := workload(t, cl, rng, 150)
	run.waitCovered(last)
	run.stop()

	// Nothing in the clear: the snapshot and every chunk.
	ms, _, err := backup.List(ctx, b, "ns", "src")
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, backup.EncryptionAge, ms[0].Encryption)
	it := b.List(nil)
	objects := 0
	for {
		o, err := it.Next(ctx)
		if err != nil {
			break
		}
		if filepath.Ext(o.Key) == ".json" {
			continue // manifests: names, sizes and hashes only
		}
		body, err := b.ReadAll(ctx, o.Key)
		require.NoError(t, err)
		require.False(t, bytes.Contains(body, []byte(marker)), "%s holds a value in the clear", o.Key)
		require.False(t, bytes.Contains(body, []byte("/secret/")), "%s holds a key in the clear", o.Key)
		objects++
	}
	require.Greater(t, objects, 2, "a snapshot and chunks")

	for _, rev := range []int64{mid, put.Header.Revision, last} {
		res, got := restoreWith(t, d, backup.Point{Revision: rev}, keys)
		require.Equal(t, rev, res.Revision)
		require.Equal(t, keyspaceAt(t, cl, rev), got, "the keyspace at revision %d", rev)
	}
	list, err := ListRestorable(ctx, b, d, "ns", "src", delta.ReadOptions{Identities: keys.Identities})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, last, list[0].Chain.Last)

	other, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		keys backup.Keys
		want string
	}{
		{"no key", backup.Keys{}, "no encryption key was given"},
		{"another key", backup.Keys{Identities: []age.Identity{other}}, "encrypted to other keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			source, err := backup.ParseSource(d.ObjectURL(backup.Latest))
			require.NoError(t, err)
			dir := filepath.Join(t.TempDir(), "data")
			_, err = Restore(ctx, slog.New(slog.DiscardHandler), RestoreRequest{Source: source, Namespace: "ns", Cluster: "src", DataDir: dir,
				Name: "p", PeerURL: "http://127.0.0.1:1", Token: "t", Point: backup.Point{Revision: mid}, Keys: tc.keys})
			require.ErrorContains(t, err, tc.want)
			require.ErrorIs(t, err, backup.ErrNoKey)
			require.True(t, Refused(err), "a key that does not open the backups is refused, not retried")
			require.NoDirExists(t, dir)
		})
	}
}
