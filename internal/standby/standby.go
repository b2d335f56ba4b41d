// Package standby is a warm standby's applier (issue 44, docs/design/21-standby.md): a second etcd
// cluster, seeded from the primary's full snapshot with its revisions kept, follows the primary's
// continuous backup (internal/backup/delta) and applies every recorded revision after its own, each as
// one transaction that must land on its own number. The standby's revision is the applier's position:
// it keeps no state of its own, skips what the standby holds, and resumes from anywhere.
//
// A chain that changes under it is followed when it can be without a gap (a new full snapshot starts
// a new chain: continued in when it starts at or before the standby's revision); anything else stops
// it at the last complete revision with a typed error naming the object (Stopped): a partial or foreign
// history is never applied.
package standby

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/internal/backup/delta"
)

// Why following stops for good (errors.Is on a Stopped). Each needs a person or a new seed: the
// applier never guesses past them.
var (
	// ErrGap: no chain of the primary holds the revision after the standby's (a newer chain starts
	// after it, the one before ended short of it). The standby must be seeded again from the newer
	// snapshot.
	ErrGap = errors.New("no chain holds the next revision")
	// ErrMissing: a chunk is missing inside the chain being followed (its neighbours are there).
	ErrMissing = errors.New("a chunk is missing")
	// ErrForeign: a chunk, or the primary's newest snapshot, of another etcd cluster than the one the
	// standby was seeded from (the primary restored or re-created: another history).
	ErrForeign = errors.New("another etcd cluster's history")
	// ErrBroken: a chunk that does not read, does not hold what its name says, or does not follow the
	// one before.
	ErrBroken = errors.New("a broken chunk")
	// ErrDiverged: a revision did not land on its own number on the standby, or a revision the
	// standby holds is not the one recorded: something else wrote to it (a lease expired there while
	// no applier kept it alive, a write past the fence). It is not the primary's history any more.
	ErrDiverged = delta.ErrDiverged
)

// Stopped says where and why following stopped: the standby holds every revision up to Reached, and
// Object is the store's object (a chunk, a chain's folder, a manifest) that stopped it.
type Stopped struct {
	Reason  error // ErrGap, ErrMissing, ErrForeign, ErrBroken or ErrDiverged
	Object  string
	Chain   int64 // the chain's start (its snapshot's revision)
	Reached int64
	Err     error // the detail
}

func (s *Stopped) Error() string {
	return fmt.Sprintf("standby stopped at revision %d: %v: %s: %v", s.Reached, s.Reason, s.Object, s.Err)
}

func (s *Stopped) Unwrap() []error { return []error{s.Reason, s.Err} }

// Progress is what the applier reports (status.standby): the revision the standby holds and when the
// primary's writer received it, the newest revision in the store and the lag behind it, the chain
// followed and the primary's etcd cluster ID.
type Progress struct {
	Revision   int64
	Time       time.Time
	Newest     int64
	NewestTime time.Time
	// Lag: NewestTime - Time while behind, 0 once the standby holds the newest revision stored.
	Lag time.Duration
	// Chain is the followed chain's folder, ChainStart its snapshot's revision.
	Chain      string
	ChainStart int64
	ClusterID  string
}

// Applier follows one primary's backups into one standby.
type Applier struct {
	// Bucket holds the primary's backups, Namespace and Name its folder there.
	Bucket          *blob.Bucket
	Namespace, Name string
	// ClusterID is the primary's etcd cluster ID (hex) whose history the standby holds (the seed's
	// manifest says it): chains and snapshots of any other are foreign.
	ClusterID string
	Read      delta.ReadOptions
	// Client reaches the standby with an identity its write fence lets write (root).
	Client *clientv3.Client
	// Poll is how often the store is listed once the standby holds everything stored (default 2 s).
	Poll time.Duration
	// Backoff paces the retries of transient failures (the store, the standby); default 1 s doubling
	// to 1 min.
	Backoff wait.Backoff
	// Progress is told after each chunk applied and after each pass; Problem each transient failure
	// (retried). Neither may block.
	Progress func(Progress)
	Problem  func(error)

	target delta.Target
	// granted: the leases the standby holds and this applier keeps alive.
	granted map[int64]bool
	kctx    context.Context
	// applied is the revision this applier last applied (0: none yet). A standby revision that is not
	// it is checked against the record before anything is applied on it (verify).
	applied int64
	at      time.Time
	// newestKey and newestTime: the newest chunk read for its time, so it is read once.
	newestKey  string
	newestTime time.Time
}

// Follow applies every revision the primary's backups record after the standby's revision, as they
// appear, until ctx ends (nil) or following cannot go on (a *Stopped). Transient failures are
// retried with Backoff, each retry starting again from the standby's revision.
func (a *Applier) Follow(ctx context.Context) error {
	if a.Poll <= 0 {
		a.Poll = 2 * time.Second
	}
	backoff := a.Backoff
	if backoff.Duration <= 0 {
		backoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Cap: time.Minute, Steps: 1 << 30}
	}
	kctx, stopKeepAlive := context.WithCancel(ctx)
	defer stopKeepAlive()
	a.begin(kctx)
	bo := backoff
	for ctx.Err() == nil {
		progressed, err := a.pass(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var stop *Stopped
		if errors.As(err, &stop) {
			return err
		}
		wait := a.Poll
		switch {
		case err != nil:
			if a.Problem != nil {
				a.Problem(err)
			}
			a.applied = 0 // a transaction may have landed without its answer: check before going on
			wait = bo.Step()
		case progressed:
			bo = backoff
			continue
		default:
			bo = backoff
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil
}

// begin readies a's state for a follow: leases are kept alive until kctx ends.
func (a *Applier) begin(kctx context.Context) {
	a.kctx, a.target, a.granted, a.applied = kctx, delta.ClientTarget(a.Client), nil, 0
}

// keepLeases makes the applier keep alive every lease the standby holds (those of its seed, and
// those granted by an applier before it): no lease may expire on a standby, where an expiry is a
// revision the primary never had.
func (a *Applier) keepLeases(ctx context.Context) error {
	if a.granted != nil {
		return nil
	}
	held, err := a.Client.Leases(ctx)
	if err != nil {
		return fmt.Errorf("listing the standby's leases: %w", err)
	}
	granted := map[int64]bool{}
	for _, l := range held.Leases {
		if err := a.keep(int64(l.ID)); err != nil {
			return err
		}
		granted[int64(l.ID)] = true
	}
	a.granted = granted
	return nil
}

func (a *Applier) keep(id int64) error {
	ch, err := a.Client.KeepAlive(a.kctx, clientv3.LeaseID(id))
	if err != nil {
		return fmt.Errorf("keeping lease %x alive: %w", id, err)
	}
	go func() {
		for range ch {
		}
	}()
	return nil
}

// revision is the standby's revision: its position in the primary's history.
func (a *Applier) revision(ctx context.Context) (int64, error) {
	r, err := a.Client.Get(ctx, "\x00", clientv3.WithKeysOnly(), clientv3.WithLimit(1))
	if err != nil {
		return 0, fmt.Errorf("reading the standby's revision: %w", err)
	}
	return r.Header.Revision, nil
}

// pass applies whatever the store holds after the standby's revision. progressed: something was applied.
func (a *Applier) pass(ctx context.Context) (progressed bool, err error) {
	if err := a.keepLeases(ctx); err != nil {
		return false, err
	}
	cur, err := a.revision(ctx)
	if err != nil {
		return false, err
	}
	all, _, err := backup.List(ctx, a.Bucket, a.Namespace, a.Name)
	if err != nil {
		return false, err
	}
	// The primary's snapshots of its current etcd cluster, by revision, newest first; and the newest
	// of another, if it is newer than all of those.
	var ours []backup.Manifest
	var foreign *backup.Manifest
	for i, m := range all {
		switch {
		case m.EtcdClusterID == a.ClusterID:
			ours = append(ours, m)
		case len(ours) == 0 && foreign == nil:
			foreign = &all[i]
		}
	}
	sort.SliceStable(ours, func(i, j int) bool { return ours[i].Revision > ours[j].Revision })
	stop := func(reason error, object string, chain int64, detail error) error {
		return &Stopped{Reason: reason, Object: object, Chain: chain, Reached: cur, Err: detail}
	}
	if len(ours) == 0 {
		if foreign != nil {
			return false, stop(ErrForeign, foreign.Key, 0, fmt.Errorf("the primary's snapshots are of etcd cluster %s, not %s", foreign.EtcdClusterID, a.ClusterID))
		}
		return false, fmt.Errorf("no complete snapshot of %s/%s", a.Namespace, a.Name)
	}
	// The newest chain that starts at or before the standby's revision: the one its next revision is
	// in, or, when none of its chunks reaches it yet, will be.
	at := -1
	for i, m := range ours {
		if m.Revision <= cur {
			at = i
			break
		}
	}
	if at < 0 {
		m := ours[len(ours)-1]
		return false, stop(ErrGap, m.ChainDir(), m.Revision, fmt.Errorf("the oldest chain kept starts at revision %d, after the standby's", m.Revision))
	}
	m := ours[at]
	chain := delta.BlobChain{Bucket: a.Bucket, Prefix: m.ChainsPrefix()}
	spans, _, listErr := chain.List(ctx, m.Revision)
	if listErr != nil && !errors.Is(listErr, delta.ErrGap) {
		return false, listErr
	}
	// The newest revision stored: the end of the chain followed (whose writer may not have left it
	// yet), or of a newer one.
	newest := point{rev: m.Revision, at: m.Time}
	if n := len(spans); n > 0 {
		if newest, err = a.end(ctx, spans[n-1]); err != nil {
			return false, err
		}
	}
	if at > 0 {
		n, err := a.newest(ctx, ours[0])
		if err != nil {
			return false, err
		}
		if n.rev > newest.rev {
			newest = n
		}
	}
	report := func(reached int64) {
		if a.Progress == nil {
			return
		}
		p := Progress{Revision: reached, Time: a.at, Newest: max(newest.rev, reached), NewestTime: newest.at, Chain: m.ChainDir(), ChainStart: m.Revision, ClusterID: a.ClusterID}
		if reached < newest.rev && newest.at.After(a.at) {
			p.Lag = newest.at.Sub(a.at)
		}
		a.Progress(p)
	}
	if cur == m.Revision && a.at.IsZero() {
		a.at = m.Time
	}
	need := cur + 1
	// A held revision this applier did not apply is checked first (and its time taken): the chunk
	// holding it is read even when it ends there.
	check := a.applied != cur && cur > m.Revision
	var prev *delta.Header
	for _, s := range spans {
		if s.Last < need && !(check && s.Last >= cur) {
			continue
		}
		if s.First > need {
			return progressed, stop(ErrMissing, s.Key, m.Revision, fmt.Errorf("revisions %d-%d are in no chunk of the chain", need, s.First-1))
		}
		ch, err := chain.ReadSpan(ctx, s, m.Revision, a.ClusterID, a.Read)
		switch {
		case errors.Is(err, delta.ErrForeign):
			return progressed, stop(ErrForeign, s.Key, m.Revision, err)
		case err != nil && gcerrors.Code(err) != gcerrors.Unknown:
			return progressed, err // the store: another attempt
		case err != nil:
			return progressed, stop(ErrBroken, s.Key, m.Revision, err)
		}
		// Each chunk must continue the one before: the first read, the chain it is listed in.
		before := delta.Header{ClusterID: a.ClusterID, ChainStart: m.Revision, Last: s.First - 1}
		if prev != nil {
			before = *prev
		}
		if err := delta.Follows(before, ch.Header); err != nil {
			return progressed, stop(ErrBroken, s.Key, m.Revision, err)
		}
		prev = &ch.Header
		for _, r := range ch.Revisions {
			if r.Rev <= cur {
				if r.Rev == cur && a.applied != cur {
					if err := a.verify(ctx, r); errors.Is(err, ErrDiverged) {
						return progressed, stop(ErrDiverged, s.Key, m.Revision, err)
					} else if err != nil {
						return progressed, err // the standby did not answer: another attempt
					}
					a.applied, a.at = cur, r.Time
				}
				continue
			}
			if err := delta.Apply(ctx, a.target, r, a.granted, a.keep); err != nil {
				if errors.Is(err, delta.ErrDiverged) {
					return progressed, stop(ErrDiverged, s.Key, m.Revision, err)
				}
				return progressed, err
			}
			cur, a.applied, a.at, progressed = r.Rev, r.Rev, r.Time, true
		}
		need = cur + 1
		if s.Key == newest.key {
			newest.at = ch.LastTime
		}
		report(cur)
	}
	if !progressed {
		// Nothing after the standby's revision in its chain: a newer chain that has begun (its writer
		// left this one for good) and starts after it means revisions no chain will ever hold.
		for _, n := range ours[:at] {
			spans, _, err := delta.BlobChain{Bucket: a.Bucket, Prefix: n.ChainsPrefix()}.List(ctx, n.Revision)
			if err != nil && !errors.Is(err, delta.ErrGap) {
				return false, err
			}
			if len(spans) > 0 && n.Revision > cur {
				return false, stop(ErrGap, n.ChainDir(), n.Revision, fmt.Errorf("the chain from revision %d begun, and none holds revision %d", n.Revision, cur+1))
			}
		}
		if foreign != nil {
			return false, stop(ErrForeign, foreign.Key, m.Revision, fmt.Errorf("the primary's newest snapshot is of etcd cluster %s, not %s", foreign.EtcdClusterID, a.ClusterID))
		}
	}
	report(cur)
	return progressed, nil
}

// point is a revision in the store and when the primary's writer received it.
type point struct {
	key string
	rev int64
	at  time.Time
}

// newest is the newest revision the store holds: the end of the newest chain, or its snapshot.
func (a *Applier) newest(ctx context.Context, m backup.Manifest) (point, error) {
	spans, _, err := delta.BlobChain{Bucket: a.Bucket, Prefix: m.ChainsPrefix()}.List(ctx, m.Revision)
	if err != nil && !errors.Is(err, delta.ErrGap) {
		return point{}, err
	}
	if len(spans) == 0 {
		return point{rev: m.Revision, at: m.Time}, nil
	}
	return a.end(ctx, spans[len(spans)-1])
}

// end is the last revision of the chunk s and its time, read once per chunk.
func (a *Applier) end(ctx context.Context, s delta.Span) (point, error) {
	if s.Key != a.newestKey {
		b, err := a.Bucket.ReadAll(ctx, s.Key)
		if err != nil {
			return point{}, err
		}
		h, _, err := delta.Read(bytes.NewReader(b), a.Read.Identities...)
		if err != nil {
			// Reported as broken when the applier reaches it; its time is unknown until then.
			return point{key: s.Key, rev: s.Last}, nil
		}
		a.newestKey, a.newestTime = s.Key, h.LastTime
	}
	return point{key: s.Key, rev: s.Last, at: a.newestTime}, nil
}

// verify checks that the revision the standby holds is r as recorded: each key r wrote holds r's
// value, under r's lease, modified at r; each key r deleted is absent at r. A standby revision that
// something else made (a lease expiry, a write past the fence) fails it.
func (a *Applier) verify(ctx context.Context, r delta.Revision) error {
	final := map[string]*delta.Op{}
	var order []string
	for i, op := range r.Ops {
		if op.Type == delta.Grant {
			continue
		}
		if _, ok := final[string(op.Key)]; !ok {
			order = append(order, string(op.Key))
		}
		final[string(op.Key)] = &r.Ops[i]
	}
	for _, k := range order {
		op := final[k]
		got, err := a.Client.Get(ctx, k, clientv3.WithRev(r.Rev))
		if err != nil {
			return fmt.Errorf("reading %q at revision %d: %w", k, r.Rev, err)
		}
		switch {
		case op.Type == delta.Delete && len(got.Kvs) != 0:
			return fmt.Errorf("%w: key %q is there at revision %d, which deleted it", ErrDiverged, k, r.Rev)
		case op.Type == delta.Put && (len(got.Kvs) != 1 || got.Kvs[0].ModRevision != r.Rev || !bytes.Equal(got.Kvs[0].Value, op.Value) || got.Kvs[0].Lease != op.Lease):
			return fmt.Errorf("%w: key %q at revision %d is not what revision %d put", ErrDiverged, k, r.Rev, r.Rev)
		}
	}
	return nil
}

// SeedClusterID is the primary's etcd cluster ID whose history a standby at revision holds: that of
// the newest complete snapshot of the folder at or before revision (the seed restored the newest one,
// and the applier went on in that cluster's chains). A primary re-created since whose snapshots are all
// after the standby's revision is not taken for it: Follow then stops on them as foreign.
func SeedClusterID(ctx context.Context, b *blob.Bucket, namespace, name string, revision int64) (string, error) {
	all, _, err := backup.List(ctx, b, namespace, name)
	if err != nil {
		return "", err
	}
	best := -1
	for i, m := range all {
		if m.Revision <= revision && (best < 0 || m.Revision > all[best].Revision) {
			best = i
		}
	}
	if best < 0 {
		return "", fmt.Errorf("no complete snapshot of %s/%s at or before the standby's revision %d", namespace, name, revision)
	}
	return all[best].EtcdClusterID, nil
}

// Revision is the standby's revision, read through c.
func Revision(ctx context.Context, c *clientv3.Client) (int64, error) {
	return (&Applier{Client: c}).revision(ctx)
}
