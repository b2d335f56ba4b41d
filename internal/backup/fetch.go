package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"filippo.io/age"
	"gocloud.dev/blob"
)

// Fetch downloads m's snapshot to file dst and checks it against the manifest (size, SHA-256 of the
// stored object) and against etcd's own trailing hash; an encrypted one is decrypted on the way with
// ids. On any mismatch dst is removed and the error wraps ErrSnapshotDamaged (ErrNoKey when no identity
// opens it): no data directory is ever written from a bad snapshot.
func Fetch(ctx context.Context, b *blob.Bucket, m Manifest, dst string, ids []age.Identity) (err error) {
	switch {
	case m.Encryption == EncryptionAge && len(ids) == 0:
		return fmt.Errorf("%w: %s is encrypted (age) and no encryption key was given (spec.restore.encryption, or spec.backup.encryption in place)", ErrNoKey, m.Snapshot)
	case m.Encryption != "" && m.Encryption != EncryptionAge:
		return fmt.Errorf("%w: %s's manifest names encryption %q, which this version does not know", ErrSnapshotDamaged, m.Snapshot, m.Encryption)
	}
	r, err := b.NewReader(ctx, m.SnapshotKey(), nil)
	if err != nil {
		return fmt.Errorf("reading %s: %w", m.SnapshotKey(), err)
	}
	defer r.Close()
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(dst)
		}
	}()
	sum, check, stored := sha256.New(), newEtcdHash(), &counter{}
	// At most one byte more than the manifest says: an object larger than its manifest is damaged
	// whatever follows, and a store (or whoever wrote to it) must not make the seed fill its disk.
	raw := io.TeeReader(io.LimitReader(r, max(m.Size, 0)+1), io.MultiWriter(sum, stored))
	plain := raw
	if m.Encryption == EncryptionAge {
		d, err := age.Decrypt(raw, ids...)
		if err != nil {
			var none *age.NoIdentityMatchError
			if errors.As(err, &none) {
				return fmt.Errorf("%w: %s is encrypted to other keys than the ones given", ErrNoKey, m.Snapshot)
			}
			return fmt.Errorf("%w: %s cannot be decrypted: %v", ErrSnapshotDamaged, m.Snapshot, err)
		}
		plain = d
	}
	if _, err = io.Copy(io.MultiWriter(f, check), plain); err == nil {
		_, err = io.Copy(io.Discard, raw) // the whole object is hashed, whatever age left unread
	}
	n := stored.n
	if err != nil && m.Encryption == EncryptionAge && !isStoreError(err) {
		return fmt.Errorf("%w: %s does not decrypt: %v", ErrSnapshotDamaged, m.Snapshot, err)
	}
	if err != nil {
		return fmt.Errorf("downloading %s: %w", m.Snapshot, err)
	}
	switch got := hex.EncodeToString(sum.Sum(nil)); {
	case n != m.Size:
		return fmt.Errorf("%w: %s has %d bytes, its manifest says %d (truncated?)", ErrSnapshotDamaged, m.Snapshot, n, m.Size)
	case got != m.SHA256:
		return fmt.Errorf("%w: %s has SHA-256 %s, its manifest says %s", ErrSnapshotDamaged, m.Snapshot, got, m.SHA256)
	case !check.Valid():
		return fmt.Errorf("%w: %s does not end with etcd's hash of its content", ErrSnapshotDamaged, m.Snapshot)
	}
	return f.Sync()
}
