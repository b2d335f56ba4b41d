package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// A copy of a cluster's backups in a second destination (spec.backup.copy: another region's bucket),
// with a retention of its own (docs/design/16-backup-restore.md §16.12). The copy has the primary's
// layout (snapshots, manifests, chains), so a restore reads it as any destination. Objects are copied
// as stored: encrypted ones stay encrypted, and the copying pod needs no key.

// CopyResult is what one Copy pass did.
type CopyResult struct {
	// Snapshots and Chunks copied in this pass; Pruned the copy's snapshots its retention dropped.
	Snapshots, Chunks int
	Pruned            []Manifest
	// Newest is the newest snapshot the copy holds, NewestRevision the newest revision its chains reach
	// (the snapshot's own revision without a chain).
	Newest         Manifest
	NewestRevision int64
}

// Copy brings the copy up to date with the primary for one cluster (namespace/name, this EtcdCluster's
// UID only): every snapshot the copy's retention keeps that the copy lacks is copied (the snapshot, its
// chain, its manifest last: a manifest makes a snapshot count, so a copy cut short leaves nothing that
// looks complete), chunks added to a chain since the last pass are copied, and then the copy is pruned
// by its own retention. Every copied object is read back from the copy and compared (the snapshot by
// size and SHA-256 against its manifest, chunks byte for byte).
func Copy(ctx context.Context, from, to *blob.Bucket, namespace, name, clusterUID string, r Retention, now time.Time) (CopyResult, error) {
	var res CopyResult
	src, _, err := List(ctx, from, namespace, name)
	if err != nil {
		return res, fmt.Errorf("listing the primary: %w", err)
	}
	var mine []Manifest
	for _, m := range src {
		if m.ClusterUID == clusterUID {
			mine = append(mine, m)
		}
	}
	drop := map[string]bool{}
	for _, m := range Expired(mine, clusterUID, r, now) {
		drop[m.Snapshot] = true
	}
	have := map[string]bool{}
	dst, _, err := List(ctx, to, namespace, name)
	if err != nil {
		return res, fmt.Errorf("listing the copy: %w", err)
	}
	for _, m := range dst {
		have[m.Snapshot] = true
	}
	var errs []error
	for _, m := range mine {
		if drop[m.Snapshot] {
			continue
		}
		if !have[m.Snapshot] {
			if err := copySnapshot(ctx, from, to, m); err != nil {
				errs = append(errs, err)
				continue
			}
			res.Snapshots++
		}
		n, err := copyChain(ctx, from, to, m)
		res.Chunks += n
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !have[m.Snapshot] {
			// The manifest last: from here on the copy counts.
			c := m
			c.Key = ManifestKey(path.Join(ClusterDir(namespace, name), m.Snapshot))
			if err := WriteManifest(ctx, to, c); err != nil {
				errs = append(errs, fmt.Errorf("writing the copy's manifest %s: %w", c.Key, err))
			}
		}
	}
	dst, _, err = List(ctx, to, namespace, name)
	if err != nil {
		return res, errors.Join(append(errs, fmt.Errorf("listing the copy: %w", err))...)
	}
	pruned, err := Prune(ctx, to, dst, clusterUID, r, now)
	res.Pruned = pruned
	if err != nil {
		errs = append(errs, err)
	}
	for _, m := range dst {
		if !slices.ContainsFunc(pruned, func(o Manifest) bool { return o.Key == m.Key }) && m.ClusterUID == clusterUID && (res.Newest.Key == "" || m.Time.After(res.Newest.Time)) {
			res.Newest = m
		}
	}
	if res.Newest.Key != "" {
		res.NewestRevision = res.Newest.Revision
		if last, err := chainEnd(ctx, to, res.Newest); err == nil && last > 0 {
			res.NewestRevision = last
		}
	}
	return res, errors.Join(errs...)
}

// copySnapshot streams m's snapshot object into the copy, then reads it back there against m.
func copySnapshot(ctx context.Context, from, to *blob.Bucket, m Manifest) error {
	key := m.SnapshotKey()
	r, err := from.NewReader(ctx, key, nil)
	if err != nil {
		return fmt.Errorf("reading %s: %w", key, err)
	}
	defer r.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dstKey := path.Join(ClusterDir(m.Namespace, m.Cluster), m.Snapshot)
	w, err := to.NewWriter(wctx, dstKey, &blob.WriterOptions{ContentType: "application/octet-stream",
		Metadata: map[string]string{MetaClusterUID: m.ClusterUID}})
	if err != nil {
		return fmt.Errorf("writing the copy of %s: %w", key, err)
	}
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, sum), io.LimitReader(r, m.Size+1))
	if err == nil && (n != m.Size || hex.EncodeToString(sum.Sum(nil)) != m.SHA256) {
		err = fmt.Errorf("%w: %s read as %d bytes, its manifest says %d with SHA-256 %s", ErrSnapshotDamaged, key, n, m.Size, m.SHA256)
	}
	if err != nil {
		cancel()
		_ = w.Close()
		return fmt.Errorf("copying %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("completing the copy of %s: %w", key, err)
	}
	if err := readBack(ctx, to, dstKey, Stored{Size: m.Size, SHA256: m.SHA256}); err != nil {
		_ = to.Delete(ctx, dstKey)
		return err
	}
	return nil
}

// copyChain copies the chunks of m's chain the copy lacks, each read back and compared. It returns how
// many it copied.
func copyChain(ctx context.Context, from, to *blob.Bucket, m Manifest) (int, error) {
	if m.EtcdClusterID == "" {
		return 0, nil
	}
	srcDir := m.ChainDir()
	dstM := m
	dstM.Key = ManifestKey(path.Join(ClusterDir(m.Namespace, m.Cluster), m.Snapshot))
	dstDir := dstM.ChainDir()
	have := map[string]bool{}
	if err := listKeys(ctx, to, dstDir, func(key string) { have[path.Base(key)] = true }); err != nil {
		return 0, fmt.Errorf("listing the copy's %s: %w", dstDir, err)
	}
	var keys []string
	if err := listKeys(ctx, from, srcDir, func(key string) {
		if !have[path.Base(key)] {
			keys = append(keys, key)
		}
	}); err != nil {
		return 0, fmt.Errorf("listing %s: %w", srcDir, err)
	}
	n := 0
	for _, key := range keys {
		b, err := from.ReadAll(ctx, key)
		if err != nil {
			if gcerrors.Code(err) == gcerrors.NotFound {
				continue // pruned with its snapshot meanwhile
			}
			return n, fmt.Errorf("reading %s: %w", key, err)
		}
		dstKey := dstDir + path.Base(key)
		if err := to.WriteAll(ctx, dstKey, b, nil); err != nil {
			return n, fmt.Errorf("writing the copy of %s: %w", key, err)
		}
		back, err := to.ReadAll(ctx, dstKey)
		if err != nil || !bytes.Equal(back, b) {
			_ = to.Delete(ctx, dstKey)
			return n, fmt.Errorf("the copy of %s does not read back as written (%v)", key, err)
		}
		n++
	}
	return n, nil
}

// chainEnd is the last revision of the chain beside m in b, 0 without one (from the chunks' names).
func chainEnd(ctx context.Context, b *blob.Bucket, m Manifest) (int64, error) {
	var last int64
	err := listKeys(ctx, b, m.ChainDir(), func(key string) {
		var first, l int64
		if _, err := fmt.Sscanf(path.Base(key), "%d-%d.delta", &first, &l); err == nil && l > last {
			last = l
		}
	})
	return last, err
}

// listKeys calls f with every object key under prefix.
func listKeys(ctx context.Context, b *blob.Bucket, prefix string, f func(string)) error {
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !o.IsDir {
			f(o.Key)
		}
	}
}
