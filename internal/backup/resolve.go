package backup

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Latest is the word that, after a destination, names its newest complete snapshot of the cluster.
const Latest = "latest"

// Source is a parsed restore source: one snapshot by URL, or the newest of a destination.
type Source struct {
	Destination Destination
	// Snapshot is the key of the named snapshot inside Destination; empty for the newest.
	Snapshot string
	// Namespace and Cluster: the cluster folder a /latest URL names itself (…/<namespace>/<name>/latest,
	// found by ResolveFolder), with Destination the destination above it; empty, /latest searches the
	// restoring cluster's own folder under Destination.
	Namespace, Cluster string
}

// Folder is the namespace and name of the folder s's /latest searches: the one its URL names
// (ResolveFolder), else the restoring cluster's.
func (s Source) Folder(namespace, name string) (string, string) {
	if s.Cluster != "" {
		return s.Namespace, s.Cluster
	}
	return namespace, name
}

// ResolveFolder reads which folder a /latest source means. `<destination>/latest` has always meant the
// restoring cluster's own folder under the destination (a cluster re-created under its old name);
// `<destination>/<namespace>/<name>/latest` names another cluster's folder, as `kubectl etcd backups`
// lists it and as the plugin writes for `restore --like`. The two spellings cannot be told apart by
// their text (a destination's prefix is any path), so the store decides: the URL names a folder when
// the folder it ends in holds snapshot manifests of exactly that namespace and name. Only a listing of
// that one folder is read, within the same prefix the source's credentials reach. A named snapshot,
// or a URL too short to end in a folder, is returned as it is.
func ResolveFolder(ctx context.Context, s Source) (Source, error) {
	parent, ns, name, ok := s.Destination.splitFolder()
	if s.Snapshot != "" || s.Cluster != "" || !ok {
		return s, nil
	}
	b, err := parent.Open(ctx)
	if err != nil {
		return s, err
	}
	defer b.Close()
	ms, _, err := List(ctx, b, ns, name)
	if err != nil {
		return s, err
	}
	for _, m := range ms {
		if m.Namespace == ns && m.Cluster == name {
			return Source{Destination: parent, Namespace: ns, Cluster: name}, nil
		}
	}
	return s, nil
}

// ParseSource checks spec.restore.from: a snapshot URL (…/<time>-r<rev>.db, as status.backup names
// it), or a destination URL whose last path element is "latest".
func ParseSource(raw string) (Source, error) {
	d, err := ParseDestination(raw)
	if err != nil {
		return Source{}, err
	}
	var dir, base string
	if d.Scheme == "file" {
		dir, base = path.Split(d.Root)
	} else {
		dir, base = path.Split(d.Prefix)
	}
	switch {
	case base == Latest:
	case strings.HasSuffix(base, ".db"):
	default:
		return Source{}, fmt.Errorf("names neither a snapshot (…/<time>-r<revision>.db) nor the newest of a destination (…/%s)", Latest)
	}
	dir = strings.TrimSuffix(dir, "/")
	if d.Scheme == "file" {
		if dir == "" {
			return Source{}, errors.New("is a file in the root directory: snapshots live in a folder, file:///backups/…")
		}
		d.Root = dir
	} else {
		d.Prefix = strings.TrimPrefix(dir, "/")
	}
	if base == Latest {
		return Source{Destination: d}, nil
	}
	return Source{Destination: d, Snapshot: base}, nil
}

// Find is the manifest of the snapshot s names; for "latest", the newest complete snapshot in the
// folder s names (ResolveFolder), else in that of namespace/name. A named snapshot may sit in any
// folder: its URL is the whole address.
func Find(ctx context.Context, b *blob.Bucket, s Source, namespace, name string) (Manifest, error) {
	namespace, name = s.Folder(namespace, name)
	if s.Snapshot != "" {
		m, err := ReadManifest(ctx, b, ManifestKey(s.Snapshot))
		if err != nil {
			if gcerrors.Code(err) == gcerrors.NotFound {
				err = fmt.Errorf("%w: %v", ErrNoSnapshot, err)
			} else if !isStoreError(err) {
				// It was read but is not a manifest: as damaged as a snapshot that fails its hash.
				err = fmt.Errorf("%w: %v", ErrSnapshotDamaged, err)
			}
			return Manifest{}, fmt.Errorf("snapshot %s has no readable manifest (an unfinished or foreign snapshot is never restored): %w", s.Destination.ObjectURL(s.Snapshot), err)
		}
		return m, nil
	}
	ms, skipped, err := List(ctx, b, namespace, name)
	if err != nil {
		return Manifest{}, err
	}
	if len(ms) == 0 {
		msg := fmt.Sprintf("no complete snapshot of %s/%s under %s", namespace, name, s.Destination.ObjectURL(ClusterDir(namespace, name)))
		if len(skipped) > 0 {
			msg += " (unreadable manifests: " + strings.Join(skipped, "; ") + ")"
		}
		return Manifest{}, fmt.Errorf("%w: %s", ErrNoSnapshot, msg)
	}
	return ms[0], nil
}

// ErrNoSnapshot: the source names no snapshot that exists (a mistyped path, a folder without a
// complete snapshot). Like a damaged one, asking again does not help.
var ErrNoSnapshot = errors.New("no such snapshot")

// ErrPointNotReached: the snapshots exist, but none is at or before the point asked, or their chain
// ends before it. It is an ErrNoSnapshot (errors.Is), told apart to name the point, not the source.
var ErrPointNotReached = fmt.Errorf("%w for that point", ErrNoSnapshot)

// isStoreError: err came from the store (a network or permission failure, worth another attempt),
// not from a manifest's content.
func isStoreError(err error) bool {
	return gcerrors.Code(err) != gcerrors.Unknown
}

// SplitFolder reads d as a cluster's folder (<parent>/<namespace>/<name>), as a standby's source
// names its primary's: ok is false when the path is too short to hold one.
func (d Destination) SplitFolder() (parent Destination, namespace, name string, ok bool) {
	return d.splitFolder()
}
