package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"filippo.io/age"
	"gocloud.dev/blob"
)

// etcdHashSize: etcd's snapshot stream ends with the SHA-256 of everything before it (the server's
// Maintenance.Snapshot appends it; etcdutl checks it on restore).
const etcdHashSize = sha256.Size

// etcdHash checks etcd's trailing hash while the stream passes: it hashes all but the last 32 bytes
// seen so far, which it keeps aside.
type etcdHash struct {
	h    hash.Hash
	tail []byte
}

func newEtcdHash() *etcdHash {
	return &etcdHash{h: sha256.New(), tail: make([]byte, 0, 2*etcdHashSize)}
}

func (e *etcdHash) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > etcdHashSize {
		// Everything but the last 32 bytes of p is body for sure, after the kept tail.
		e.h.Write(e.tail)
		e.h.Write(p[:len(p)-etcdHashSize])
		e.tail = append(e.tail[:0], p[len(p)-etcdHashSize:]...)
		return n, nil
	}
	e.tail = append(e.tail, p...)
	if over := len(e.tail) - etcdHashSize; over > 0 {
		e.h.Write(e.tail[:over])
		e.tail = append(e.tail[:0], e.tail[over:]...)
	}
	return n, nil
}

// Valid: the stream ended with the hash of what came before it.
func (e *etcdHash) Valid() bool {
	return len(e.tail) == etcdHashSize && bytes.Equal(e.h.Sum(nil), e.tail)
}

// ErrSnapshotDamaged: a snapshot whose etcd hash, size or SHA-256 does not match.
var ErrSnapshotDamaged = errors.New("snapshot damaged")

// Stored is what Upload wrote: the object's size and SHA-256 as stored (encrypted, if it is), and its
// encryption (Manifest.Encryption).
type Stored struct {
	Size       int64
	SHA256     string
	Encryption string
}

// Upload streams a snapshot into key without holding it in memory or on a local disk (the stores'
// writers buffer one part at a time), checks etcd's trailing hash on the way (encrypted to keys'
// recipients after the check, when there are any), and then reads the object back and checks that the
// store holds exactly the bytes sent (size and SHA-256). A snapshot that fails any check is deleted: no
// manifest is ever written for it.
// The object carries its EtcdCluster's UID (MetaClusterUID): if the upload is cut short after the store
// kept it, or its manifest is later deleted without it, the next backups know whose leftover it is.
func Upload(ctx context.Context, b *blob.Bucket, key string, src io.Reader, clusterUID string, keys Keys) (Stored, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// IfNotExist: two backups in the same second at the same revision (an on-demand and a scheduled one
	// on an idle cluster) must not overwrite each other's snapshot; the second fails and says so.
	w, err := b.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/octet-stream", IfNotExist: true,
		Metadata: map[string]string{MetaClusterUID: clusterUID}})
	if err != nil {
		return Stored{}, fmt.Errorf("writing %s: %w", key, err)
	}
	sum, check, stored := sha256.New(), newEtcdHash(), &counter{}
	out := io.MultiWriter(w, sum, stored)
	var enc io.WriteCloser
	if keys.Encrypts() {
		if enc, err = age.Encrypt(out, keys.Recipients...); err != nil {
			cancel()
			_ = w.Close()
			return Stored{}, fmt.Errorf("encrypting %s: %w", key, err)
		}
		out = enc
	}
	n, err := io.Copy(io.MultiWriter(out, check), src)
	if err == nil && !check.Valid() {
		err = fmt.Errorf("%w: the stream from etcd ended after %d bytes without a valid trailing hash", ErrSnapshotDamaged, n)
	}
	if err == nil && enc != nil {
		err = enc.Close() // age's last chunk
	}
	if err != nil {
		cancel() // a cancelled writer's Close discards the upload
		_ = w.Close()
		return Stored{}, fmt.Errorf("snapshot %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return Stored{}, fmt.Errorf("completing %s: %w", key, err)
	}
	res := Stored{Size: stored.n, SHA256: hex.EncodeToString(sum.Sum(nil))}
	if enc != nil {
		res.Encryption = EncryptionAge
	}
	if err := readBack(ctx, b, key, res); err != nil {
		_ = b.Delete(ctx, key)
		return Stored{}, err
	}
	return res, nil
}

// readBack reads the stored object whole and compares its size and SHA-256 with what was sent: a store
// that acknowledged bytes it did not keep is found before a manifest makes the snapshot count.
func readBack(ctx context.Context, b *blob.Bucket, key string, want Stored) error {
	r, err := b.NewReader(ctx, key, nil)
	if err != nil {
		return fmt.Errorf("reading %s back: %w", key, err)
	}
	defer r.Close()
	sum := sha256.New()
	n, err := io.Copy(sum, io.LimitReader(r, want.Size+1))
	if err != nil {
		return fmt.Errorf("reading %s back: %w", key, err)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); n != want.Size || got != want.SHA256 {
		return fmt.Errorf("%w: %s read back as %d bytes with SHA-256 %s, %d were sent with %s", ErrSnapshotDamaged, key, n, got, want.Size, want.SHA256)
	}
	return nil
}

// counter counts the bytes written through it.
type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}
