package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"gocloud.dev/blob"
)

// Fetch downloads m's snapshot to file dst and checks it against the manifest (size, SHA-256) and
// against etcd's own trailing hash. On any mismatch dst is removed and the error wraps
// ErrSnapshotDamaged: no data directory is ever written from a bad snapshot.
func Fetch(ctx context.Context, b *blob.Bucket, m Manifest, dst string) (err error) {
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
	sum, check := sha256.New(), newEtcdHash()
	// At most one byte more than the manifest says: an object larger than its manifest is damaged
	// whatever follows, and a store (or whoever wrote to it) must not make the seed fill its disk.
	n, err := io.Copy(io.MultiWriter(f, sum, check), io.LimitReader(r, max(m.Size, 0)+1))
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
