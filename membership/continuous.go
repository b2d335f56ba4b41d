package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"filippo.io/age"
	"gocloud.dev/blob"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/internal/backup/delta"
)

// ContinuousRequest is the continuous backup writer's work (docs/design/16-backup-restore.md §16.10):
// follow the revisions after the newest full snapshot of the running etcd cluster and upload them
// beside it as a chain of chunks.
type ContinuousRequest struct {
	// Backup is the full snapshot the writer takes itself when no chain can go on (none yet, a gap,
	// a compaction): its endpoints, destination, names and retention.
	Backup BackupRequest
	// ChunkInterval: a chunk is uploaded at least this often while revisions arrive (the loss bound);
	// ChunkBytes: sooner once this much is held (the memory bound).
	ChunkInterval time.Duration
	ChunkBytes    int
	// Recheck: how often the store is listed for a newer full snapshot (a scheduled backup's), which
	// starts a new chain.
	Recheck time.Duration
	// ReportEvery: how often Report is called while nothing else changes (each report is an API
	// write, and a sync of the EtcdCluster).
	ReportEvery time.Duration
	// To encrypts the chunks (none: stored in the clear).
	To     []age.Recipient
	Report func(api.ContinuousReport)
	Events Recorder
	// CopyPass, when set, keeps the second destination up to date (§16.12): run every Recheck beside
	// the chain, each pass reported with ReportCopy.
	CopyPass   func(context.Context) api.CopyReport
	ReportCopy func(api.CopyReport)
}

// Continuous writes the chain until ctx ends. It never returns early: a store or etcd failing is
// reported and retried with a backoff, a chain that cannot go on is ended by a full snapshot that
// starts the next.
func Continuous(ctx context.Context, e *Etcd, b *blob.Bucket, log *slog.Logger, req ContinuousRequest) {
	w := &chainWriter{e: e, b: b, log: log, req: req, events: recorderOr(req.Events)}
	if req.CopyPass != nil {
		copied := make(chan struct{})
		defer func() { <-copied }()
		go func() {
			defer close(copied)
			// Beside the chain, never in its way: a slow second store delays only the copy.
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				r := req.CopyPass(ctx)
				if ctx.Err() == nil && req.ReportCopy != nil {
					req.ReportCopy(r)
				}
			}, req.Recheck)
		}()
	}
	backoff := func() wait.Backoff {
		return wait.Backoff{Duration: 2 * time.Second, Factor: 2, Jitter: 0.1, Cap: 2 * time.Minute, Steps: math.MaxInt32}
	}
	bo := backoff()
	for ctx.Err() == nil {
		progressed, err := w.once(ctx)
		if ctx.Err() != nil {
			return
		}
		if progressed {
			bo = backoff()
		}
		if err == nil {
			continue
		}
		w.problem(err.Error())
		log.Warn("continuous backup", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(bo.Step()):
		}
	}
}

// chainWriter is one Continuous run's state: the chain it writes and what it last reported.
type chainWriter struct {
	e      *Etcd
	b      *blob.Bucket
	log    *slog.Logger
	req    ContinuousRequest
	events Recorder

	// mu guards the report: the follower's goroutine updates it, a timer may publish it.
	mu       sync.Mutex
	report   api.ContinuousReport
	reported time.Time
	// later: a publish held back by ReportEvery is armed to run when the period ends, so that the
	// newest point is always reported in the end (the last upload before a disaster above all).
	later *time.Timer
}

// once writes the current chain until it must change: a newer full snapshot (nil), a gap or a
// compaction (a full snapshot taken, nil), or a failure. progressed says whether anything was stored.
func (w *chainWriter) once(ctx context.Context) (progressed bool, err error) {
	defer func() { w.e.tokenRefused(err) }() // the next try logs in afresh
	c, err := w.e.client(w.req.Backup.Endpoints)
	if err != nil {
		return false, err
	}
	defer c.Close()
	lctx, cancel := context.WithTimeout(ctx, w.e.callTimeout())
	ml, err := c.MemberList(lctx)
	cancel()
	if err != nil {
		return false, fmt.Errorf("reading the member list: %w", err)
	}
	id := api.FormatID(ml.Header.ClusterId)
	m, found, err := w.newest(ctx, id)
	if err != nil {
		return false, err
	}
	if !found {
		return w.fullSnapshot(ctx, fmt.Sprintf("no full snapshot of etcd cluster %s to start a chain from", id), false)
	}
	chain := delta.BlobChain{Bucket: w.b, Prefix: m.ChainsPrefix()}
	_, next, err := chain.List(ctx, m.Revision)
	if errors.Is(err, delta.ErrGap) {
		return w.fullSnapshot(ctx, "the stored chain has a gap: "+err.Error(), true)
	}
	if err != nil {
		return false, err
	}
	url := w.req.Backup.Destination.ObjectURL(m.SnapshotKey())
	w.mu.Lock()
	if w.report.Snapshot != url {
		w.log.Info("following", "snapshot", url, "from", next)
		w.report = api.ContinuousReport{Snapshot: url, ChainStart: m.Revision}
	}
	w.mu.Unlock()

	fctx, stop := context.WithCancel(ctx)
	defer stop()
	newer := make(chan backup.Manifest, 1)
	go w.watchNewer(fctx, id, m, newer, stop)
	f := delta.Follower{
		Client: c, Uploader: chain, ClusterID: id, ChainStart: m.Revision, To: w.req.To,
		MaxAge: w.req.ChunkInterval, MaxBytes: w.req.ChunkBytes,
		Covered: func(rev int64, at time.Time) {
			w.mu.Lock()
			progressed = progressed || rev > w.report.Revision
			w.report.Revision, w.report.RevisionTime, w.report.Message = rev, &at, ""
			w.mu.Unlock()
			w.publish(false)
		},
	}
	_, err = f.Follow(fctx, next)
	switch {
	case errors.Is(err, delta.ErrCompacted):
		return w.fullSnapshot(ctx, fmt.Sprintf("revision %d, the next of the chain from %d, is compacted", next, m.Revision), true)
	case errors.Is(err, delta.ErrGap):
		return w.fullSnapshot(ctx, err.Error(), true)
	case err != nil:
		return progressed, err
	}
	select {
	case n := <-newer:
		w.log.Info("a newer full snapshot starts a new chain", "snapshot", n.Snapshot, "revision", n.Revision)
	default:
	}
	return progressed, nil
}

// newest is the newest full snapshot of this EtcdCluster (by UID) and of etcd cluster id: the head
// of the chain to write. A snapshot of an earlier etcd cluster of the same EtcdCluster (before a
// restore) cannot start a chain of this one.
func (w *chainWriter) newest(ctx context.Context, id string) (backup.Manifest, bool, error) {
	r := w.req.Backup
	ms, _, err := backup.List(ctx, w.b, r.Namespace, r.Cluster)
	if err != nil {
		return backup.Manifest{}, false, err
	}
	for _, m := range ms {
		if m.ClusterUID == r.ClusterUID && m.EtcdClusterID == id {
			return m, true, nil
		}
	}
	return backup.Manifest{}, false, nil
}

// watchNewer lists the store every Recheck and stops the follower once a newer full snapshot of the
// same etcd cluster exists (its chain starts from it: a restore to a later point then replays less).
func (w *chainWriter) watchNewer(ctx context.Context, id string, cur backup.Manifest, out chan<- backup.Manifest, stop func()) {
	t := time.NewTicker(w.req.Recheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m, found, err := w.newest(ctx, id)
		if err == nil && found && m.Key != cur.Key && m.Revision > cur.Revision {
			out <- m
			stop()
			return
		}
	}
}

// fullSnapshot ends a chain that cannot go on (why) with a full snapshot, which starts the next.
func (w *chainWriter) fullSnapshot(ctx context.Context, why string, broken bool) (bool, error) {
	if broken {
		w.events.Event(EventBackupChainBroken, "Follow", why+"; taking a full snapshot to start a new chain", true)
	}
	w.problem(why)
	res, err := Backup(ctx, w.e, w.b, w.log, w.req.Backup)
	if res.Manifest.Key == "" {
		return false, fmt.Errorf("%s, and the full snapshot failed: %w", why, err)
	}
	if err != nil {
		w.log.Warn("full snapshot stored, retention failed", "error", err)
	}
	m := res.Manifest
	url := w.req.Backup.Destination.ObjectURL(m.SnapshotKey())
	w.events.Event(EventBackupChainStarted, "Snapshot", fmt.Sprintf("full snapshot %s (revision %d) starts a new chain: %s", url, m.Revision, why), false)
	at := m.Time
	w.mu.Lock()
	w.report = api.ContinuousReport{Snapshot: url, ChainStart: m.Revision, Revision: m.Revision, RevisionTime: &at}
	w.mu.Unlock()
	w.publish(true)
	return true, nil
}

// problem reports why the chain does not advance.
func (w *chainWriter) problem(msg string) {
	w.mu.Lock()
	changed := w.report.Message != msg
	w.report.Message = msg
	w.mu.Unlock()
	if changed {
		w.publish(true)
	}
}

// publish reports at most every ReportEvery unless forced (a new chain, a new problem); one held back is
// published when the period ends, with whatever is newest then.
func (w *chainWriter) publish(force bool) {
	if w.req.Report == nil {
		return
	}
	w.mu.Lock()
	now := time.Now().UTC()
	if wait := w.req.ReportEvery - now.Sub(w.reported); !force && wait > 0 {
		if w.later == nil {
			w.later = time.AfterFunc(wait, func() { w.publish(true) })
		}
		w.mu.Unlock()
		return
	}
	if w.later != nil {
		w.later.Stop()
		w.later = nil
	}
	w.reported = now
	r := w.report
	r.Time = now
	w.mu.Unlock()
	w.req.Report(r)
}
