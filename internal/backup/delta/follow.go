package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"filippo.io/age"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrCompacted: the revision to follow from is compacted away. The chain cannot go on: a full
// snapshot must start a new one.
var ErrCompacted = errors.New("the revisions to follow are compacted: a full snapshot must start a new chain")

// ErrGap: a revision is missing from the stream or from the stored chain. The chain cannot be replayed
// past it: a full snapshot must start a new one.
var ErrGap = errors.New("gap")

// Uploader keeps a chain's chunks (a destination of spec.backup, through gocloud.dev/blob). Put must not
// return before the object is stored and read back identical.
type Uploader interface {
	Put(ctx context.Context, h Header, chunk []byte) error
}

// Follower follows a cluster's revisions after a chain's snapshot and uploads them as chunks: one every
// MaxAge, or sooner once MaxBytes of events are held, so that memory stays bounded whatever the
// database's size. It resumes from any revision (the last uploaded + 1): a follower whose pod is lost
// loses nothing it uploaded and skips nothing.
type Follower struct {
	Client     *clientv3.Client
	Uploader   Uploader
	ClusterID  string
	ChainStart int64
	To         []age.Recipient
	MaxAge     time.Duration
	MaxBytes   int
	// Now is the clock revisions are stamped with (time.Now by default).
	Now func() time.Time
	// Covered, when set, is told each time the chain is known to hold every revision up to rev and
	// nothing else was written until at: after an upload, and when a progress notification shows an
	// idle cluster. It is the newest restorable point, and must not block.
	Covered func(rev int64, at time.Time)
	// held, for tests, is told each revision the follower holds (a test knows then what must be uploaded).
	held func(rev int64)
}

// Follow uploads every revision from next on until ctx ends (nil) or the chain cannot go on
// (ErrCompacted, a gap, an upload that failed), uploading what it holds in every case. It returns the
// next revision to follow from.
func (f *Follower) Follow(ctx context.Context, next int64) (reached int64, err error) {
	if next <= f.ChainStart {
		return next, fmt.Errorf("revision %d is not after the chain's snapshot at %d", next, f.ChainStart)
	}
	now := f.Now
	if now == nil {
		now = time.Now
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := f.Client.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(next), clientv3.WithProgressNotify())
	var held []Revision
	size := 0
	// Leases seen by this follower: the first put under one carries its grant (a restarted follower
	// records it again, which the replay takes as the lease it already granted).
	leases := map[int64]bool{}
	var since, checked time.Time
	covered := func(rev int64) {
		if f.Covered != nil {
			f.Covered(rev, now().UTC())
		}
	}
	flush := func() error {
		if len(held) == 0 {
			return nil
		}
		var b bytes.Buffer
		h, err := Write(&b, f.ClusterID, f.ChainStart, held, f.To...)
		if err != nil {
			return err
		}
		if err := f.Uploader.Put(ctx, h, b.Bytes()); err != nil {
			return fmt.Errorf("uploading revisions %d-%d: %w", h.First, h.Last, err)
		}
		next = h.Last + 1
		held, size = nil, 0
		covered(h.Last)
		return nil
	}
	// Whatever ends the follow (a stop, a watch lost with the cluster's quorum, a compaction or a gap
	// after them), what is held is uploaded first, with a context of its own: every held revision is
	// etcd's, in order from next, and the last seconds before a disaster are the ones a restore wants.
	defer func() {
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer ucancel()
		ctx = uctx
		if ferr := flush(); ferr != nil {
			err = errors.Join(err, ferr)
		}
		reached = next
	}()
	tick := time.NewTicker(max(f.MaxAge/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return next, nil
		case <-tick.C:
			if len(held) > 0 && now().Sub(since) >= f.MaxAge {
				if err := flush(); err != nil {
					return next, err
				}
			}
			if len(held) == 0 && f.Covered != nil && now().Sub(checked) >= f.MaxAge {
				// An idle cluster sends no event. A linearizable read's revision says whether
				// anything was written since the last revision uploaded. Not a progress
				// notification: etcd's server-side interval is ten minutes, and a requested one is
				// not sent to a watch started past the current revision until something is written.
				checked = now()
				if r, err := f.Client.Get(ctx, "\x00", clientv3.WithKeysOnly(), clientv3.WithLimit(1)); err == nil && r.Header.Revision == next-1 {
					covered(next - 1)
				}
			}
		case wr, ok := <-wch:
			if !ok || ctx.Err() != nil && wr.Err() != nil {
				if ctx.Err() != nil {
					return next, nil // the watch closes with the context it was opened under
				}
				return next, errors.New("the watch ended")
			}
			if errors.Is(wr.Err(), rpctypes.ErrCompacted) || wr.CompactRevision != 0 {
				return next, ErrCompacted
			}
			if err := wr.Err(); err != nil {
				return next, err
			}
			if wr.IsProgressNotify() && len(held) == 0 && wr.Header.Revision == next-1 {
				covered(next - 1)
			}
			for _, ev := range wr.Events {
				rev := ev.Kv.ModRevision
				op := Op{Type: Put, Key: ev.Kv.Key, Value: ev.Kv.Value, Lease: ev.Kv.Lease}
				if ev.Type == clientv3.EventTypeDelete {
					op = Op{Type: Delete, Key: ev.Kv.Key}
				}
				ops := []Op{op}
				if id := ev.Kv.Lease; op.Type == Put && id != 0 && !leases[id] {
					leases[id] = true
					ops = append([]Op{{Type: Grant, Lease: id, TTL: f.grantedTTL(ctx, id)}}, op)
				}
				if n := len(held); n > 0 && held[n-1].Rev == rev {
					held[n-1].Ops = append(held[n-1].Ops, ops...)
				} else {
					// Cut at a revision's boundary once MaxBytes are held, inside a watch response too:
					// a response can carry thousands of revisions, and memory is bounded by the chunk.
					if size >= f.MaxBytes {
						if err := flush(); err != nil {
							return next, err
						}
					}
					want := next + int64(len(held))
					if rev != want {
						return next, fmt.Errorf("%w: revision %d arrived where %d was due", ErrGap, rev, want)
					}
					if len(held) == 0 {
						since = now()
					}
					held = append(held, Revision{Rev: rev, Time: now().UTC(), Ops: ops})
					if f.held != nil {
						f.held(rev)
					}
				}
				size += len(ev.Kv.Key) + len(ev.Kv.Value)
			}
			if size >= f.MaxBytes {
				if err := flush(); err != nil {
					return next, err
				}
			}
		}
	}
}

// unknownTTL is the TTL recorded for a lease gone before the follower could ask (revoked or expired:
// the deletes of its keys follow in the stream all the same).
const unknownTTL = 60

// grantedTTL asks etcd the lease's granted TTL.
func (f *Follower) grantedTTL(ctx context.Context, id int64) int64 {
	r, err := f.Client.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil || r.GrantedTTL <= 0 {
		return unknownTTL
	}
	return r.GrantedTTL
}
