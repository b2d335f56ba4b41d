package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Retention is spec.backup.retention.
type Retention struct {
	// KeepLast keeps the newest n snapshots of the cluster (0: no count limit, unless a tier is set:
	// then the tiers alone decide).
	KeepLast int
	// MaxAge drops snapshots older than this (0: no age limit), whatever keeps them otherwise.
	MaxAge time.Duration
	// Hourly, Daily, Weekly, Monthly keep the newest snapshot of each of the last n hours, days, ISO
	// weeks and months (UTC) that have one, as restic's --keep-hourly and the like: a snapshot kept by
	// any rule is kept.
	Hourly, Daily, Weekly, Monthly int
}

// tiered says whether any calendar tier is set.
func (r Retention) tiered() bool { return r.Hourly+r.Daily+r.Weekly+r.Monthly > 0 }

// tiers are the calendar tiers: how many periods each keeps, and the period a time falls in.
func (r Retention) tiers() []struct {
	n      int
	period func(time.Time) string
} {
	return []struct {
		n      int
		period func(time.Time) string
	}{
		{r.Hourly, func(t time.Time) string { return t.UTC().Format("2006-01-02T15") }},
		{r.Daily, func(t time.Time) string { return t.UTC().Format("2006-01-02") }},
		{r.Weekly, func(t time.Time) string { y, w := t.UTC().ISOWeek(); return fmt.Sprintf("%d-W%02d", y, w) }},
		{r.Monthly, func(t time.Time) string { return t.UTC().Format("2006-01") }},
	}
}

// Expired picks the snapshots retention drops from ms (newest first, as List returns them). Only
// snapshots of this EtcdCluster (by UID) are candidates: a predecessor's under the same name are the
// user's to delete. The newest snapshot is never dropped, whatever its age: a cluster whose backups
// fail for longer than MaxAge keeps its last good one. A snapshot is kept when any rule keeps it
// (KeepLast, a tier), and none older than MaxAge but the newest.
func Expired(ms []Manifest, clusterUID string, r Retention, now time.Time) []Manifest {
	var own []Manifest
	for _, m := range ms {
		if m.ClusterUID == clusterUID {
			own = append(own, m)
		}
	}
	keep := make([]bool, len(own))
	for i := range own {
		switch {
		case i == 0:
			keep[i] = true
		case r.KeepLast > 0:
			keep[i] = i < r.KeepLast
		default:
			keep[i] = !r.tiered() // no count limit, unless the tiers decide
		}
	}
	for _, tier := range r.tiers() {
		seen := map[string]bool{}
		for i, m := range own {
			if p := tier.period(m.Time); len(seen) < tier.n && !seen[p] {
				seen[p] = true
				keep[i] = true
			}
		}
	}
	var out []Manifest
	for i, m := range own {
		old := r.MaxAge > 0 && now.Sub(m.Time) > r.MaxAge
		if i > 0 && (!keep[i] || old) {
			out = append(out, m)
		}
	}
	return out
}

// Delete removes a snapshot, its manifest first: a snapshot whose manifest is gone is never restored
// from, so a delete cut short leaves nothing that looks complete but is not. Then the chain of
// revisions that starts at it (continuous backup): a chain is pruned whole with its snapshot, since it
// cannot be replayed without it.
func Delete(ctx context.Context, b *blob.Bucket, m Manifest) error {
	for _, key := range []string{m.Key, m.SnapshotKey()} {
		if err := b.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("deleting %s: %w", key, err)
		}
	}
	if m.EtcdClusterID == "" {
		return nil
	}
	it := b.List(&blob.ListOptions{Prefix: m.ChainDir()})
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("listing %s: %w", m.ChainDir(), err)
		}
		if err := b.Delete(ctx, o.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("deleting %s: %w", o.Key, err)
		}
	}
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

// MetaClusterUID is the metadata key of a snapshot object naming the EtcdCluster (UID) it belongs to.
const MetaClusterUID = "etcdhook-cluster-uid"

// OrphanAge is how old a snapshot without a manifest must be before a backup deletes it: well past the
// longest a backup may run (its Job's two-hour deadline), so an upload still in progress is never taken
// for a leftover.
const OrphanAge = 6 * time.Hour

// DeleteOrphans deletes the leftovers in one cluster's folder: snapshots without a manifest (an upload
// cut short after the store kept it, a delete cut short between the manifest and the snapshot) that
// carry this EtcdCluster's UID and were last modified before cutoff. Snapshots of another EtcdCluster,
// or written before snapshots carried a UID, are the user's, as retention leaves them. It returns the
// deleted keys.
func DeleteOrphans(ctx context.Context, b *blob.Bucket, namespace, name, clusterUID string, cutoff time.Time) ([]string, error) {
	dir := ClusterDir(namespace, name)
	it := b.List(&blob.ListOptions{Prefix: dir, Delimiter: "/"})
	objs := map[string]*blob.ListObject{}
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", dir, err)
		}
		if !o.IsDir {
			objs[o.Key] = o
		}
	}
	var done []string
	var errs []error
	for key, o := range objs {
		if !o.ModTime.Before(cutoff) {
			continue
		}
		if strings.HasSuffix(key, ".tmp") && strings.Contains(path.Base(key), ".db.") {
			// A directory store's upload that never completed (fileblob's <snapshot>.<n>.tmp): no
			// one's snapshot, whoever started it.
			if err := b.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
				errs = append(errs, fmt.Errorf("deleting %s: %w", key, err))
				continue
			}
			done = append(done, key)
			continue
		}
		if path.Ext(key) != ".db" || objs[ManifestKey(key)] != nil {
			continue
		}
		attrs, err := b.Attributes(ctx, key)
		if err != nil {
			if gcerrors.Code(err) != gcerrors.NotFound {
				errs = append(errs, fmt.Errorf("reading %s: %w", key, err))
			}
			continue
		}
		if attrs.Metadata[MetaClusterUID] != clusterUID || clusterUID == "" {
			continue
		}
		if err := b.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			errs = append(errs, fmt.Errorf("deleting %s: %w", key, err))
			continue
		}
		done = append(done, key)
	}
	sort.Strings(done)
	return done, errors.Join(errs...)
}
