package membership

import (
	"context"

	"gocloud.dev/blob"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/internal/backup/delta"
)

// ListRestorable lists what a cluster's folder can be restored to: every complete snapshot, newest
// first, and the span of the chain after it. A chain's span reads two chunks (its first and last, for
// their times) and checks them as a restore would; the chunks between are listed, not read.
func ListRestorable(ctx context.Context, b *blob.Bucket, d backup.Destination, namespace, name string, opts delta.ReadOptions) ([]api.Restorable, error) {
	ms, _, err := backup.List(ctx, b, namespace, name)
	if err != nil {
		return nil, err
	}
	out := make([]api.Restorable, 0, len(ms))
	for _, m := range ms {
		r := api.Restorable{Snapshot: d.ObjectURL(m.SnapshotKey()), Time: m.Time, Revision: m.Revision, Size: m.Size,
			EtcdClusterID: m.EtcdClusterID, ClusterUID: m.ClusterUID}
		if m.EtcdClusterID != "" {
			r.Chain = chainSpan(ctx, b, m, opts)
		}
		out = append(out, r)
	}
	return out, nil
}

// chainSpan is the replayable span of m's chain, nil when it has no chunk.
func chainSpan(ctx context.Context, b *blob.Bucket, m backup.Manifest, opts delta.ReadOptions) *api.RestorableChain {
	chain := delta.BlobChain{Bucket: b, Prefix: m.ChainsPrefix()}
	spans, _, gapErr := chain.List(ctx, m.Revision)
	// The contiguous part from the snapshot on: what a restore can replay.
	n := 0
	for end := m.Revision; n < len(spans) && spans[n].First == end+1; n++ {
		end = spans[n].Last
	}
	if n == 0 {
		if gapErr != nil {
			return &api.RestorableChain{Problem: gapErr.Error()}
		}
		return nil
	}
	c := &api.RestorableChain{Chunks: n, First: spans[0].First, Last: spans[n-1].Last}
	if gapErr != nil {
		c.Problem = gapErr.Error()
	}
	first, err := chain.ReadSpan(ctx, spans[0], m.Revision, m.EtcdClusterID, opts)
	if err != nil {
		c.Problem = err.Error()
		return c
	}
	last, err := chain.ReadSpan(ctx, spans[n-1], m.Revision, m.EtcdClusterID, opts)
	if err != nil {
		c.Problem = err.Error()
		return c
	}
	c.FirstTime, c.LastTime = first.FirstTime, last.LastTime
	return c
}
