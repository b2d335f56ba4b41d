package backup

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A /latest URL that ends in a cluster's folder (<destination>/<namespace>/<name>/latest) names that
// folder, so a new cluster can restore another's newest point; <destination>/latest keeps meaning the
// restoring cluster's own folder; a folder whose manifests name another cluster is not taken for one.
func TestResolveFolder(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dest, err := ParseDestination("file://" + root + "/team")
	require.NoError(t, err)
	b, err := dest.Open(ctx)
	require.NoError(t, err)
	defer b.Close()
	put := func(namespace, name, folder string) {
		at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
		key := SnapshotKey(folder, name, at, 42)
		require.NoError(t, WriteManifest(ctx, b, Manifest{Namespace: namespace, Cluster: name, Snapshot: key[len(ClusterDir(folder, name)):],
			SHA256: "ab", Size: 1, Time: at, Key: ManifestKey(key)}))
	}
	put("prod", "demo", "prod")   // demo's own backups
	put("other", "copy", "moved") // another cluster's manifests under a folder not its own

	for _, tc := range []struct {
		from           string
		folder         string // "": the restoring cluster's own
		root           string
		latestManifest string
	}{
		{from: "/team/prod/demo/latest", folder: "prod/demo", root: root + "/team", latestManifest: "prod/demo/20260101T120000Z-r42.json"},
		{from: "/team/latest", root: root + "/team", latestManifest: "prod/demo/20260101T120000Z-r42.json"},
		{from: "/team/moved/copy/latest", root: root + "/team/moved/copy"},
		{from: "/team/prod/nobody/latest", root: root + "/team/prod/nobody"},
	} {
		t.Run(tc.from, func(t *testing.T) {
			s, err := ParseSource("file://" + root + tc.from)
			require.NoError(t, err)
			got, err := ResolveFolder(ctx, s)
			require.NoError(t, err)
			assert.Equal(t, tc.root, got.Destination.Root)
			ns, name := got.Folder("prod", "demo")
			assert.Equal(t, tc.folder != "", got.Cluster != "", "a folder of its own")
			if tc.folder != "" {
				assert.Equal(t, tc.folder, ns+"/"+name)
			}
			if tc.latestManifest == "" {
				return
			}
			// The restoring cluster (prod/demo for the second case; any for the first) finds demo's snapshot.
			bb, err := got.Destination.Open(ctx)
			require.NoError(t, err)
			defer bb.Close()
			m, err := Find(ctx, bb, got, "prod", "demo")
			require.NoError(t, err)
			assert.Equal(t, tc.latestManifest, m.Key)
		})
	}

	t.Run("a named snapshot is not resolved", func(t *testing.T) {
		s, err := ParseSource("file://" + root + "/team/prod/demo/20260101T120000Z-r42.db")
		require.NoError(t, err)
		got, err := ResolveFolder(ctx, s)
		require.NoError(t, err)
		assert.Equal(t, s, got)
	})
	t.Run("the new cluster's own folder under a folder URL is not searched", func(t *testing.T) {
		s, err := ParseSource("file://" + root + "/team/prod/demo/latest")
		require.NoError(t, err)
		got, err := ResolveFolder(ctx, s)
		require.NoError(t, err)
		bb, err := got.Destination.Open(ctx)
		require.NoError(t, err)
		defer bb.Close()
		m, err := Find(ctx, bb, got, "prod", "copy")
		require.NoError(t, err, "a clone named copy restores demo's newest snapshot")
		assert.Equal(t, "demo", m.Cluster)
	})
}
