package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"filippo.io/age"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
)

// etcdStream is a snapshot stream as etcd sends it: the body, then the SHA-256 of the body.
func etcdStream(t *testing.T, size int) []byte {
	body := make([]byte, size)
	_, err := rand.Read(body)
	require.NoError(t, err)
	sum := sha256.Sum256(body)
	return append(body, sum[:]...)
}

func fileBucket(t *testing.T) *blob.Bucket {
	d, err := ParseDestination("file://" + t.TempDir())
	require.NoError(t, err)
	b, err := d.Open(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// keysIn writes an encryption Secret's files as the pod mounts them.
func keysIn(t *testing.T, ids []*age.X25519Identity, recipients ...string) string {
	dir := t.TempDir()
	var lines []byte
	for _, id := range ids {
		lines = append(lines, []byte("# created by the test\n"+id.String()+"\n")...)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, KeyIdentity), lines, 0o400))
	if len(recipients) > 0 {
		var rs []byte
		for _, r := range recipients {
			rs = append(rs, []byte(r+"\n")...)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, KeyRecipients), rs, 0o400))
	}
	return dir
}

// An encrypted snapshot: no plaintext byte in the store, the manifest's size and hash are the stored
// object's, and it comes back whole with the identity, with a rotated identity file (old key below the
// new) and with the offline recovery key alone; without a key or with another it is refused as such
// (ErrNoKey), and a changed byte as damage. A snapshot in the clear is unaffected by keys.
func TestEncryptedSnapshot(t *testing.T) {
	ctx := context.Background()
	b := fileBucket(t)
	key1, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	offline, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	keys, err := LoadKeysDir(keysIn(t, []*age.X25519Identity{key1}, offline.Recipient().String()))
	require.NoError(t, err)
	require.Len(t, keys.Recipients, 2, "its own and the offline recipient")

	stream := etcdStream(t, 3<<20+17)
	st, err := Upload(ctx, b, "ns/c/a-r1.db", bytes.NewReader(stream), "uid-1", keys)
	require.NoError(t, err)
	require.Equal(t, EncryptionAge, st.Encryption)
	stored, err := b.ReadAll(ctx, "ns/c/a-r1.db")
	require.NoError(t, err)
	require.Equal(t, int64(len(stored)), st.Size)
	require.False(t, bytes.Contains(stored, stream[1000:1064]), "no plaintext in the store")
	m := Manifest{Namespace: "ns", Cluster: "c", Snapshot: "a-r1.db", Key: "ns/c/a-r1.json", Size: st.Size, SHA256: st.SHA256, Encryption: st.Encryption}

	fetch := func(ids ...age.Identity) ([]byte, error) {
		dst := filepath.Join(t.TempDir(), "snapshot.db")
		if err := Fetch(ctx, b, m, dst, ids); err != nil {
			require.NoFileExists(t, dst)
			return nil, err
		}
		return os.ReadFile(dst)
	}
	got, err := fetch(keys.Identities...)
	require.NoError(t, err)
	require.Equal(t, stream, got)

	key2, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	rotated, err := LoadKeysDir(keysIn(t, []*age.X25519Identity{key2, key1}))
	require.NoError(t, err)
	require.Equal(t, key2.Recipient().String(), rotated.Recipients[0].(*age.X25519Recipient).String(), "the first identity encrypts")
	got, err = fetch(rotated.Identities...)
	require.NoError(t, err, "an older key below the new one still opens old backups")
	require.Equal(t, stream, got)
	got, err = fetch(offline)
	require.NoError(t, err, "the offline recovery key alone opens it")
	require.Equal(t, stream, got)

	_, err = fetch()
	require.ErrorIs(t, err, ErrNoKey)
	require.ErrorContains(t, err, "no encryption key was given")
	_, err = fetch(key2)
	require.ErrorIs(t, err, ErrNoKey)
	require.ErrorContains(t, err, "encrypted to other keys")

	stored[len(stored)/2] ^= 1
	require.NoError(t, b.WriteAll(ctx, "ns/c/a-r1.db", stored, nil))
	_, err = fetch(keys.Identities...)
	require.ErrorIs(t, err, ErrSnapshotDamaged)

	plain, err := Upload(ctx, b, "ns/c/b-r2.db", bytes.NewReader(stream), "uid-1", Keys{})
	require.NoError(t, err)
	require.Empty(t, plain.Encryption)
	m = Manifest{Namespace: "ns", Cluster: "c", Snapshot: "b-r2.db", Key: "ns/c/b-r2.json", Size: plain.Size, SHA256: plain.SHA256}
	got, err = fetch(keys.Identities...)
	require.NoError(t, err, "a snapshot in the clear restores with keys given too")
	require.Equal(t, stream, got)
}

// Keys files: an identity is required for any encryption, and a bad file is named, never quoted.
func TestLoadKeys(t *testing.T) {
	none, err := LoadKeysDir("")
	require.NoError(t, err)
	require.False(t, none.Encrypts())

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, KeyRecipients), []byte("age1qqqq\n"), 0o400))
	_, err = LoadKeysDir(dir)
	require.ErrorContains(t, err, "reading the encryption identity", "a Secret without an identity")

	secret := "AGE-SECRET-KEY-1NOTAKEYATALLNOTAKEYATALLNOTAKEYATALLNOTAKEYATALLNOTAK"
	require.NoError(t, os.WriteFile(filepath.Join(dir, KeyIdentity), []byte(secret+"\n"), 0o400))
	_, err = LoadKeysDir(dir)
	require.Error(t, err)
	require.NotContains(t, err.Error(), secret[15:], "the key's text is never in an error (logs, reports)")

	_, err = LoadKeys("", filepath.Join(dir, KeyRecipients))
	require.ErrorContains(t, err, "without an identity")
}
