package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"gocloud.dev/blob"
)

// Manifest is the small JSON file written beside each snapshot once the snapshot is complete: a
// snapshot without one is unfinished and never restored from, listed or counted by retention.
type Manifest struct {
	Cluster    string `json:"cluster"`
	Namespace  string `json:"namespace"`
	ClusterUID string `json:"clusterUID"`
	// EtcdClusterID is etcd's own cluster ID (hex), Member the member the snapshot was taken from.
	EtcdClusterID string `json:"etcdClusterID"`
	Member        string `json:"member"`
	// Revision is the store's revision at the snapshot, EtcdVersion the version of the member's server.
	Revision    int64  `json:"revision"`
	EtcdVersion string `json:"etcdVersion"`
	// Size and SHA256 are the snapshot object's as stored (etcd's own trailing hash included; encrypted,
	// when it is). Encryption is how it is encrypted: "" in the clear, EncryptionAge.
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"`
	Encryption string `json:"encryption,omitempty"`
	// Time is when the snapshot stream was opened.
	Time time.Time `json:"time"`
	// Snapshot is the snapshot's file name: it sits beside the manifest, wherever both are copied.
	Snapshot string `json:"snapshot"`
	// Key is the manifest's key in the bucket it was read from or written to (not stored).
	Key string `json:"-"`
	// Token is the etcd.io/backup-now token of an on-demand backup, empty for scheduled ones.
	Token string `json:"token,omitempty"`
}

// ClusterDir is the folder of one EtcdCluster's snapshots inside a destination. By name, not UID: a
// cluster re-created under the same name finds its predecessor's snapshots ("latest").
func ClusterDir(namespace, name string) string { return namespace + "/" + name + "/" }

// SnapshotKey names a snapshot so that keys sort by time: <ns>/<name>/<UTC time>-r<revision>.db.
func SnapshotKey(namespace, name string, at time.Time, revision int64) string {
	return fmt.Sprintf("%s%s-r%d.db", ClusterDir(namespace, name), at.UTC().Format("20060102T150405Z"), revision)
}

// ManifestKey is the manifest's key for a snapshot key.
func ManifestKey(snapshot string) string { return strings.TrimSuffix(snapshot, ".db") + ".json" }

const manifestMax = 64 << 10

// SnapshotKey is the key of m's snapshot in the bucket m was read from.
func (m Manifest) SnapshotKey() string { return path.Join(path.Dir(m.Key), m.Snapshot) }

// WriteManifest stores m at m.Key, beside its snapshot.
func WriteManifest(ctx context.Context, b *blob.Bucket, m Manifest) error {
	if m.Key == "" || ManifestKey(m.Snapshot) != path.Base(m.Key) {
		return fmt.Errorf("manifest key %q is not beside snapshot %q", m.Key, m.Snapshot)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := b.WriteAll(ctx, m.Key, data, &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return err
	}
	// Read back, as every object (§16.11): a manifest the store did not keep whole would make its
	// snapshot invisible, or worse, describe it wrongly.
	back, err := b.ReadAll(ctx, m.Key)
	if err != nil {
		return fmt.Errorf("reading %s back: %w", m.Key, err)
	}
	if !bytes.Equal(back, data) {
		_ = b.Delete(ctx, m.Key)
		return fmt.Errorf("%s read back as %d bytes other than the %d written", m.Key, len(back), len(data))
	}
	return nil
}

// ReadManifest reads one manifest by its key (or its snapshot's key).
func ReadManifest(ctx context.Context, b *blob.Bucket, key string) (Manifest, error) {
	if strings.HasSuffix(key, ".db") {
		key = ManifestKey(key)
	}
	r, err := b.NewReader(ctx, key, nil)
	if err != nil {
		return Manifest{}, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, manifestMax+1))
	if err != nil {
		return Manifest{}, err
	}
	if len(data) > manifestMax {
		return Manifest{}, fmt.Errorf("manifest %s is larger than %d bytes", key, manifestMax)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("manifest %s: %w", key, err)
	}
	if m.Snapshot == "" || m.SHA256 == "" || m.Size <= 0 {
		return Manifest{}, fmt.Errorf("manifest %s lacks snapshot, sha256 or size", key)
	}
	if path.Base(m.Snapshot) != m.Snapshot || ManifestKey(m.Snapshot) != path.Base(key) {
		return Manifest{}, fmt.Errorf("manifest %s names snapshot %s, not its neighbour", key, m.Snapshot)
	}
	m.Key = key
	return m, nil
}

// List returns the manifests of one cluster's folder, newest first. Manifests that cannot be read are
// skipped and named in the second result: one damaged file must not hide every good snapshot.
func List(ctx context.Context, b *blob.Bucket, namespace, name string) ([]Manifest, []string, error) {
	dir := ClusterDir(namespace, name)
	it := b.List(&blob.ListOptions{Prefix: dir, Delimiter: "/"})
	var out []Manifest
	var skipped []string
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("listing %s: %w", dir, err)
		}
		if o.IsDir || path.Ext(o.Key) != ".json" {
			continue
		}
		m, err := ReadManifest(ctx, b, o.Key)
		if err != nil {
			skipped = append(skipped, err.Error())
			continue
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.After(out[j].Time)
		}
		return out[i].Snapshot > out[j].Snapshot
	})
	return out, skipped, nil
}

// ChainsDir is the folder of one etcd cluster's chains of revisions (continuous backup), inside its
// EtcdCluster's folder: by etcd cluster ID, since a cluster restored or re-created under the same name
// starts its revisions again, and two chains from the same revision must not meet.
func ChainsDir(namespace, name, etcdClusterID string) string {
	return ClusterDir(namespace, name) + "chains/" + etcdClusterID
}

// ChainsPrefix is the folder of the chains beside m's snapshot (of m's etcd cluster), wherever the
// snapshot was read from: a folder copied whole keeps its chains.
func (m Manifest) ChainsPrefix() string {
	return path.Dir(m.Key) + "/chains/" + m.EtcdClusterID
}

// ChainDir is the folder of the chain that starts at m's snapshot.
func (m Manifest) ChainDir() string {
	return fmt.Sprintf("%s/%0*d/", m.ChainsPrefix(), RevisionDigits, m.Revision)
}

// RevisionDigits pads revisions in chain names: etcd revisions are int64, at most 19 digits, and
// zero-padded names sort by revision.
const RevisionDigits = 19
