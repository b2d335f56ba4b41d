package membership

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// failFS is the real filesystem with one operation made to fail: rename(2) of a fresh name and a listing
// of the volume root cannot be made to fail with real directories while the rest works.
type failFS struct {
	osFS
	readDir, rename, removeAll error
}

func (f failFS) ReadDir(name string) ([]os.DirEntry, error) {
	if f.readDir != nil {
		return nil, f.readDir
	}
	return f.osFS.ReadDir(name)
}

func (f failFS) Rename(from, to string) error {
	if f.rename != nil {
		return f.rename
	}
	return f.osFS.Rename(from, to)
}

func (f failFS) RemoveAll(path string) error {
	if f.removeAll != nil {
		return f.removeAll
	}
	return f.osFS.RemoveAll(path)
}

// volume lists the volume root: every name, with "/" after directories and the data's marker file.
func volume(t *testing.T, root string) []string {
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			if b, err := os.ReadFile(filepath.Join(root, name, "marker")); err == nil {
				name += "/" + string(b)
			} else {
				name += "/"
			}
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func TestMoveDataAside(t *testing.T) {
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name   string
		before []string // directories in the volume root ("data" is the data directory)
		fs     failFS
		err    error
		after  []string
	}{
		{"first move", []string{"data"}, failFS{}, nil,
			[]string{"data.removed-1/data"}},
		{"the previous copy is kept", []string{"data", "data.removed-1"}, failFS{}, nil,
			[]string{"data.removed-1/data.removed-1", "data.removed-2/data"}},
		{"only the newest two are kept, the older deleted after the move", []string{"data", "data.removed-3", "data.removed-7"}, failFS{}, nil,
			[]string{"data.removed-7/data.removed-7", "data.removed-8/data"}},
		{"the single copy of earlier agents is the oldest", []string{"data", "data.removed", "data.removed-1"}, failFS{}, nil,
			[]string{"data.removed-1/data.removed-1", "data.removed-2/data"}},
		{"names the agent does not write are left alone", []string{"data", "data.removed-x", "data.removed-0", "other"}, failFS{}, nil,
			[]string{"data.removed-0/data.removed-0", "data.removed-1/data", "data.removed-x/data.removed-x", "other/other"}},
		{"no data: nothing moved, nothing deleted", []string{"data.removed-1", "data.removed-2"}, failFS{}, nil,
			[]string{"data.removed-1/data.removed-1", "data.removed-2/data.removed-2", "etcdhook-binding.json"}},
		{"a failed rename deletes nothing", []string{"data", "data.removed-1", "data.removed-2"}, failFS{rename: errBoom}, errBoom,
			[]string{"data.removed-1/data.removed-1", "data.removed-2/data.removed-2", "data/data", "etcdhook-binding.json"}},
		{"a volume that cannot be listed moves nothing", []string{"data", "data.removed-1"}, failFS{readDir: errBoom}, errBoom,
			[]string{"data.removed-1/data.removed-1", "data/data", "etcdhook-binding.json"}},
		{"a failed prune keeps the move", []string{"data", "data.removed-1", "data.removed-2"}, failFS{removeAll: errBoom}, errPruneAside,
			[]string{"data.removed-1/data.removed-1", "data.removed-2/data.removed-2", "data.removed-3/data"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			data := filepath.Join(root, "data")
			for _, d := range tc.before {
				require.NoError(t, os.MkdirAll(filepath.Join(root, d, "member"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(root, d, "marker"), []byte(d), 0o600))
			}
			require.NoError(t, WriteBinding(data, Binding{ClusterUID: "p"}))
			_, err := moveDataAside(tc.fs, data, 2)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.after, volume(t, root))
		})
	}
}
