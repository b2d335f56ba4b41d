package membership

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/internal/backup/delta"
)

// replayPlan is the part of a chain a restore to a point replays after its snapshot: the chunks, read
// and checked once and kept on the data volume, and the revision the result ends at.
type replayPlan struct {
	heads []delta.Header
	files []string
	// Target is the revision the restored keyspace is at, TargetTime when the writer received it.
	Target     int64
	TargetTime time.Time
}

// planReplay reads m's chain up to point p (the zero point: the whole chain) into dir. Each chunk is
// checked against its name and m's etcd cluster (delta.BlobChain.ReadSpan), so a chunk of another
// cluster, a truncated, reordered or wrongly encrypted one is refused naming its object. A time
// point ends at the newest revision received at or before it; a revision point must be reached
// exactly: a chain that ends before it (a gap, the writer behind) is refused.
func planReplay(ctx context.Context, b *blob.Bucket, m backup.Manifest, p backup.Point, dir string, opts delta.ReadOptions) (replayPlan, error) {
	plan := replayPlan{Target: m.Revision, TargetTime: m.Time}
	chain := delta.BlobChain{Bucket: b, Prefix: m.ChainsPrefix()}
	spans, _, gapErr := chain.List(ctx, m.Revision)
	if gapErr != nil && !errors.Is(gapErr, delta.ErrGap) {
		return plan, gapErr
	}
	end := m.Revision // the chain's last contiguous revision
	for _, s := range spans {
		if s.First != end+1 {
			break // the gap List reported: nothing after it can be replayed
		}
		if p.Revision > 0 && s.First > p.Revision {
			break
		}
		ch, err := chain.ReadSpan(ctx, s, m.Revision, m.EtcdClusterID, opts)
		if err != nil {
			if isStoreErr(err) {
				return plan, err
			}
			return plan, fmt.Errorf("%w: %v", backup.ErrSnapshotDamaged, err)
		}
		h, revs := ch.Header, ch.Revisions
		if !p.Time.IsZero() && h.FirstTime.After(p.Time) {
			break
		}
		file := filepath.Join(dir, fmt.Sprintf("chunk-%06d.delta", len(plan.files)))
		if err := os.WriteFile(file, ch.Raw, 0o600); err != nil {
			return plan, err
		}
		plan.heads, plan.files = append(plan.heads, h), append(plan.files, file)
		end = h.Last
		for _, r := range revs {
			if p.Revision > 0 && r.Rev > p.Revision || !p.Time.IsZero() && r.Time.After(p.Time) {
				break
			}
			plan.Target, plan.TargetTime = r.Rev, r.Time
		}
		if p.Revision > 0 && h.Last >= p.Revision || !p.Time.IsZero() && h.LastTime.After(p.Time) {
			break
		}
	}
	if p.IsZero() && gapErr != nil {
		// The newest point is past the gap: restoring to before it would lose what follows without a
		// word. A revision or a time before the gap is restorable, and the message says up to where.
		return plan, fmt.Errorf("%w: the chain after snapshot %s cannot be replayed past revision %d (%v): restore to a revision or time before it",
			backup.ErrSnapshotDamaged, m.Snapshot, end, gapErr)
	}
	if p.Revision > 0 && plan.Target != p.Revision {
		why := "its end"
		if gapErr != nil {
			why = gapErr.Error()
		}
		return plan, fmt.Errorf("%w: the backups reach revision %d after snapshot %s (revision %d), not %d (%s)",
			backup.ErrPointNotReached, end, m.Snapshot, m.Revision, p.Revision, why)
	}
	return plan, nil
}

// isStoreErr: the store failed (worth another attempt), as opposed to a chunk's content.
func isStoreErr(err error) bool { return gcerrors.Code(err) != gcerrors.Unknown }

// replay applies plan to the snapshot file, writing the keyspace at plan.Target to out.
func (plan replayPlan) replay(ctx context.Context, snapshotFile string, chainStart int64, out string, opts delta.ReadOptions) error {
	_, err := delta.Replay(ctx, snapshotFile, chainStart, plan.heads, func(i int) ([]delta.Revision, error) {
		f, err := os.Open(plan.files[i])
		if err != nil {
			return nil, err
		}
		defer f.Close()
		_, revs, err := delta.Read(f, opts.Identities...)
		return revs, err
	}, plan.Target, out)
	return err
}
