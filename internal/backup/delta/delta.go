// Package delta is the format of continuous backup's chunks (issue 27): the revisions etcd's watch
// delivered after a full snapshot, a few seconds' worth per object, compressed (zstd) and optionally
// encrypted at rest (age). A chain is a full snapshot and the chunks that follow it, each starting one
// revision after the previous one ended: replayed in order onto the snapshot, they give the keyspace at
// any revision of the chain.
//
// Reading distrusts every chunk: a chunk is refused, with the reason, when it is truncated, when its
// revisions are out of order or missing, when it belongs to another cluster or chain, when it is
// encrypted and no key opens it, or when it is not encrypted but the chain is. Nothing here touches a
// cluster: the caller decides what a refusal means.
package delta

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"filippo.io/age"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/klauspost/compress/zstd"
)

// OpType is what one event did to its key.
type OpType string

const (
	Put    OpType = "put"
	Delete OpType = "delete"
	// Grant: the lease a put of this revision is the first seen under, with its granted TTL (a
	// lease grant makes no revision of its own: it travels with the first put that names it).
	Grant OpType = "grant"
)

// Op is one event of a revision.
type Op struct {
	Type  OpType `json:"type"`
	Key   []byte `json:"key"`
	Value []byte `json:"value,omitempty"`
	// Lease is the lease the key was put under (0 none), or the lease granted.
	Lease int64 `json:"lease,omitempty"`
	// TTL is a granted lease's TTL in seconds.
	TTL int64 `json:"ttl,omitempty"`
}

// Revision is every event etcd committed at one revision (a transaction's events share it), and when
// the follower received it: the bound a restore to a time goes by.
type Revision struct {
	Rev  int64     `json:"rev"`
	Time time.Time `json:"time"`
	Ops  []Op      `json:"ops"`
}

// Header says what a chunk holds. It is written first, and a reader checks the revisions against it.
type Header struct {
	// ClusterID is the etcd cluster the revisions come from (etcd's cluster ID, hex).
	ClusterID string `json:"clusterID"`
	// ChainStart is the revision of the full snapshot the chain replays onto.
	ChainStart int64 `json:"chainStart"`
	// First and Last are the chunk's revisions, every one between them included; FirstTime and
	// LastTime when the follower received them.
	First     int64     `json:"first"`
	Last      int64     `json:"last"`
	FirstTime time.Time `json:"firstTime"`
	LastTime  time.Time `json:"lastTime"`
}

// maxDecoded bounds a chunk's decompressed size: a writer cuts a chunk at 4 MiB of keys and values
// (one revision may exceed it: a transaction of up to etcd's request limit), far below.
const maxDecoded = 256 << 20

// ageMagic starts every age-encrypted file.
var ageMagic = []byte("age-encryption.org/")

// Write writes a chunk of revs to w: the header, then each revision, zstd-compressed, encrypted to the
// recipients when there are any. revs must be contiguous and non-empty; the header is derived from them.
func Write(w io.Writer, clusterID string, chainStart int64, revs []Revision, to ...age.Recipient) (Header, error) {
	if len(revs) == 0 {
		return Header{}, errors.New("a chunk holds at least one revision")
	}
	h := Header{ClusterID: clusterID, ChainStart: chainStart, First: revs[0].Rev, Last: revs[len(revs)-1].Rev,
		FirstTime: revs[0].Time, LastTime: revs[len(revs)-1].Time}
	if err := h.check(revs); err != nil {
		return Header{}, err
	}
	out := w
	var enc io.WriteCloser
	if len(to) > 0 {
		var err error
		if enc, err = age.Encrypt(w, to...); err != nil {
			return Header{}, err
		}
		out = enc
	}
	// One goroutine and small buffers: a chunk is a few MiB at most, and the writer's memory must stay
	// bounded (the library's defaults take a window of 8 MiB per core).
	zw, err := zstd.NewWriter(out, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true), zstd.WithWindowSize(1<<20))
	if err != nil {
		return Header{}, err
	}
	je := jsontext.NewEncoder(zw)
	if err := json.MarshalEncode(je, h); err != nil {
		return Header{}, err
	}
	for _, r := range revs {
		if err := json.MarshalEncode(je, r); err != nil {
			return Header{}, err
		}
	}
	if err := zw.Close(); err != nil {
		return Header{}, err
	}
	if enc != nil {
		if err := enc.Close(); err != nil {
			return Header{}, err
		}
	}
	return h, nil
}

// Read reads and checks a whole chunk. With identities the chunk must be encrypted to one of them;
// without, it must not be encrypted.
func Read(r io.Reader, ids ...age.Identity) (Header, []Revision, error) {
	br := bufio.NewReader(r)
	head, _ := br.Peek(len(ageMagic))
	encrypted := bytes.Equal(head, ageMagic)
	var in io.Reader = br
	switch {
	case encrypted && len(ids) == 0:
		return Header{}, nil, errors.New("the chunk is encrypted, and no key is configured")
	case !encrypted && len(ids) > 0:
		return Header{}, nil, errors.New("the chunk is not encrypted, but the chain is: refused")
	case encrypted:
		d, err := age.Decrypt(br, ids...)
		if err != nil {
			return Header{}, nil, fmt.Errorf("decrypting the chunk: %w", err)
		}
		in = d
	}
	// Bounded: a chunk that decompresses past maxDecoded (a damaged or hostile object) is refused
	// rather than allowed to fill the restoring pod's memory.
	zr, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(maxDecoded))
	if err != nil {
		return Header{}, nil, fmt.Errorf("decompressing the chunk: %w", err)
	}
	defer zr.Close()
	dec := jsontext.NewDecoder(zr)
	var h Header
	if err := json.UnmarshalDecode(dec, &h); err != nil {
		return Header{}, nil, fmt.Errorf("the chunk's header: %w", err)
	}
	var revs []Revision
	for {
		var rev Revision
		err := json.UnmarshalDecode(dec, &rev)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Header{}, nil, fmt.Errorf("revision %d of the chunk: %w", len(revs)+1, err)
		}
		revs = append(revs, rev)
	}
	if err := h.check(revs); err != nil {
		return Header{}, nil, err
	}
	return h, revs, nil
}

// check holds revs to the header: contiguous from First to Last, each with at least one event, times
// not going back, within the chain (after its start).
func (h Header) check(revs []Revision) error {
	switch {
	case h.ClusterID == "":
		return errors.New("the chunk names no cluster")
	case len(revs) == 0:
		return errors.New("the chunk holds no revision (truncated?)")
	case h.First <= h.ChainStart:
		return fmt.Errorf("the chunk starts at revision %d, not after its chain's snapshot at %d", h.First, h.ChainStart)
	}
	for i, r := range revs {
		if want := h.First + int64(i); r.Rev != want {
			return fmt.Errorf("revision %d where %d was due: revisions missing or out of order", r.Rev, want)
		}
		if !slices.ContainsFunc(r.Ops, func(op Op) bool { return op.Type != Grant }) {
			return fmt.Errorf("revision %d has no event", r.Rev)
		}
		if i > 0 && r.Time.Before(revs[i-1].Time) {
			return fmt.Errorf("revision %d was received before revision %d", r.Rev, revs[i-1].Rev)
		}
		for _, op := range r.Ops {
			switch {
			case op.Type == Grant && (op.Lease == 0 || op.TTL <= 0):
				return fmt.Errorf("revision %d: a lease grant without a lease ID or a TTL", r.Rev)
			case op.Type != Put && op.Type != Delete && op.Type != Grant:
				return fmt.Errorf("revision %d: event %q is neither put, delete nor grant", r.Rev, op.Type)
			}
		}
	}
	if last := revs[len(revs)-1]; last.Rev != h.Last {
		return fmt.Errorf("the chunk ends at revision %d, its header says %d (truncated?)", last.Rev, h.Last)
	}
	if !revs[0].Time.Equal(h.FirstTime) || !revs[len(revs)-1].Time.Equal(h.LastTime) {
		return errors.New("the chunk's times differ from its header's")
	}
	return nil
}

// ErrForeign: a chunk of another etcd cluster than its chain's. Its revisions are another history's,
// whatever their numbers.
var ErrForeign = errors.New("a chunk of another cluster")

// Follows says whether next continues a chain that prev's chunk ended: the same cluster and chain, and
// no revision missing between them. A gap means the chain cannot be replayed past prev: the follower
// reports it and starts a new chain from a full snapshot.
func Follows(prev, next Header) error {
	switch {
	case next.ClusterID != prev.ClusterID:
		return fmt.Errorf("%w: the chunk is of cluster %s, the chain of %s", ErrForeign, next.ClusterID, prev.ClusterID)
	case next.ChainStart != prev.ChainStart:
		return fmt.Errorf("the chunk is of the chain from revision %d, not %d", next.ChainStart, prev.ChainStart)
	case next.First != prev.Last+1:
		return fmt.Errorf("%w: the chain ends at revision %d and the next chunk starts at %d", ErrGap, prev.Last, next.First)
	}
	return nil
}
