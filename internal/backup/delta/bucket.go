package delta

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"

	"filippo.io/age"
	"gocloud.dev/blob"

	"github.com/etcdhook/etcdhook/internal/backup"
)

// ReadOptions: the keys that open an encrypted chain (none for a chain stored in the clear).
type ReadOptions struct{ Identities []age.Identity }

// BlobChain keeps chains in a bucket of spec.backup's destination (Prefix is backup.ChainsDir): chain
// <Prefix>/<snapshot revision>/
// holds one object per chunk, named by its first and last revisions (zero-padded, so that names sort
// by revision): what a follower resumes from and a restore lists, without reading every chunk.
type BlobChain struct {
	Bucket *blob.Bucket
	Prefix string
}

const chunkSuffix = ".delta"

func (c BlobChain) dir(chainStart int64) string {
	return path.Join(c.Prefix, fmt.Sprintf("%0*d", backup.RevisionDigits, chainStart)) + "/"
}

// Key is where the chunk h is stored.
func (c BlobChain) Key(h Header) string {
	return fmt.Sprintf("%s%0*d-%0*d%s", c.dir(h.ChainStart), backup.RevisionDigits, h.First, backup.RevisionDigits, h.Last, chunkSuffix)
}

// Put stores a chunk and reads it back: an object that does not read back identical is deleted and
// the upload fails (the follower then keeps the revisions and tries again).
func (c BlobChain) Put(ctx context.Context, h Header, chunk []byte) error {
	key := c.Key(h)
	if err := c.Bucket.WriteAll(ctx, key, chunk, nil); err != nil {
		return err
	}
	back, err := c.Bucket.ReadAll(ctx, key)
	if err != nil {
		return fmt.Errorf("reading %s back: %w", key, err)
	}
	if sha256.Sum256(back) != sha256.Sum256(chunk) {
		_ = c.Bucket.Delete(ctx, key)
		return fmt.Errorf("%s read back differs from what was written: deleted", key)
	}
	return nil
}

// Span is a stored chunk's revisions, as its name says (its content says it again, and is checked
// against its name when read).
type Span struct {
	Key         string
	First, Last int64
}

// List lists chain chainStart's chunks in revision order, and says where a follower goes on from: the
// revision after the last one stored. Two chunks that overlap or leave a revision out are an error: the
// chain cannot be replayed past the first of them.
func (c BlobChain) List(ctx context.Context, chainStart int64) (spans []Span, next int64, err error) {
	it := c.Bucket.List(&blob.ListOptions{Prefix: c.dir(chainStart)})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, err
		}
		name := strings.TrimPrefix(obj.Key, c.dir(chainStart))
		a, b, ok := strings.Cut(strings.TrimSuffix(name, chunkSuffix), "-")
		first, err1 := strconv.ParseInt(a, 10, 64)
		last, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || !strings.HasSuffix(name, chunkSuffix) || err1 != nil || err2 != nil || first > last {
			return nil, 0, fmt.Errorf("%s is not a chunk of this chain", obj.Key)
		}
		spans = append(spans, Span{Key: obj.Key, First: first, Last: last})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].First < spans[j].First })
	next = chainStart + 1
	for _, s := range spans {
		if s.First != next {
			return spans, next, fmt.Errorf("%w: chunk %s starts at revision %d where %d was due", ErrGap, s.Key, s.First, next)
		}
		next = s.Last + 1
	}
	return spans, next, nil
}

// Chunk is a stored chunk read and checked: its header, its revisions, and the object as stored (to
// keep without reading the store again).
type Chunk struct {
	Header
	Revisions []Revision
	Raw       []byte
}

// ReadSpan reads a listed chunk and checks that its content is what its name says.
func (c BlobChain) ReadSpan(ctx context.Context, s Span, chainStart int64, clusterID string, opts ReadOptions) (Chunk, error) {
	b, err := c.Bucket.ReadAll(ctx, s.Key)
	if err != nil {
		return Chunk{}, err
	}
	h, revs, err := Read(bytes.NewReader(b), opts.Identities...)
	switch {
	case err != nil:
		return Chunk{}, fmt.Errorf("%s: %w", s.Key, err)
	case h.First != s.First || h.Last != s.Last || h.ChainStart != chainStart:
		return Chunk{}, fmt.Errorf("%s holds revisions %d-%d of the chain from %d, not what its name says", s.Key, h.First, h.Last, h.ChainStart)
	case h.ClusterID != clusterID:
		return Chunk{}, fmt.Errorf("%w: %s is of cluster %s, not %s", ErrForeign, s.Key, h.ClusterID, clusterID)
	}
	return Chunk{Header: h, Revisions: revs, Raw: b}, nil
}
