package backup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Retention is spec.backup.retention.
type Retention struct {
	// KeepLast keeps the newest n snapshots of the cluster (0: no count limit).
	KeepLast int
	// MaxAge drops snapshots older than this (0: no age limit).
	MaxAge time.Duration
}

// Expired picks the snapshots retention drops from ms (newest first, as List returns them). Only
// snapshots of this EtcdCluster (by UID) are candidates: a predecessor's under the same name are the
// user's to delete. The newest snapshot is never dropped, whatever its age: a cluster whose backups
// fail for longer than MaxAge keeps its last good one.
func Expired(ms []Manifest, clusterUID string, r Retention, now time.Time) []Manifest {
	var out []Manifest
	kept := 0
	for _, m := range ms {
		if m.ClusterUID != clusterUID {
			continue
		}
		old := r.MaxAge > 0 && now.Sub(m.Time) > r.MaxAge
		if kept == 0 || ((r.KeepLast == 0 || kept < r.KeepLast) && !old) {
			kept++
			continue
		}
		out = append(out, m)
	}
	return out
}

// Delete removes a snapshot, its manifest first: a snapshot whose manifest is gone is never restored
// from, so a delete cut short leaves nothing that looks complete but is not.
func Delete(ctx context.Context, b *blob.Bucket, m Manifest) error {
	for _, key := range []string{m.Key, m.SnapshotKey()} {
		if err := b.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("deleting %s: %w", key, err)
		}
	}
	return nil
}

// Prune deletes what retention drops, after the newest snapshot was written and verified (the caller's
// order). It returns the deleted manifests.
func Prune(ctx context.Context, b *blob.Bucket, ms []Manifest, clusterUID string, r Retention, now time.Time) ([]Manifest, error) {
	var done []Manifest
	var errs []error
	for _, m := range Expired(ms, clusterUID, r, now) {
		if err := Delete(ctx, b, m); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, m)
	}
	return done, errors.Join(errs...)
}
