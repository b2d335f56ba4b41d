package membership

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// ReadData against real directories. The I/O errors are real too: a path component that is a file where
// a directory belongs (ENOTDIR) and a WAL name that is a directory (EISDIR on read). Permission bits
// would not do: the tests run as root, which reads a mode-000 directory.
func TestReadData(t *testing.T) {
	file := func(t *testing.T, path, body string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	}
	dir := func(t *testing.T, path string) { require.NoError(t, os.MkdirAll(path, 0o755)) }
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, data string)
		errno   syscall.Errno // 0: no error expected
		present bool
		partial bool
	}{
		{"no data directory", func(t *testing.T, data string) {}, 0, false, false},
		{"empty data directory", func(t *testing.T, data string) { dir(t, data) }, 0, false, false},
		{"member without wal/", func(t *testing.T, data string) { dir(t, filepath.Join(data, "member", "snap")) }, 0, false, true},
		{"empty wal/", func(t *testing.T, data string) { dir(t, filepath.Join(data, "member", "wal")) }, 0, false, true},
		{"WAL we cannot parse: present, IDs from the binding", func(t *testing.T, data string) {
			file(t, filepath.Join(data, "member", "wal", "0000000000000000-0000000000000000.wal"), "not a WAL")
			require.NoError(t, WriteBinding(data, Binding{ClusterUID: "p", MemberID: "2a"}))
		}, 0, true, false},
		{"wal is a file, not a directory", func(t *testing.T, data string) {
			file(t, filepath.Join(data, "member", "wal"), "")
		}, syscall.ENOTDIR, false, false},
		{"member is a file, not a directory", func(t *testing.T, data string) {
			file(t, filepath.Join(data, "member"), "")
		}, syscall.ENOTDIR, false, false},
		{"the data directory is a file", func(t *testing.T, data string) { file(t, data, "") }, syscall.ENOTDIR, false, false},
		{"a WAL that cannot be read", func(t *testing.T, data string) {
			dir(t, filepath.Join(data, "member", "wal", "0000000000000000-0000000000000000.wal"))
		}, syscall.EISDIR, false, false},
		{"a binding that cannot be read", func(t *testing.T, data string) {
			dir(t, filepath.Join(data, "member", "wal"))
			dir(t, bindingPath(data))
		}, syscall.EISDIR, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			tc.setup(t, data)
			df, err := ReadData(data)
			if tc.errno != 0 {
				require.ErrorIs(t, err, tc.errno, "an I/O error is an error, never an empty or half-initialised directory (got %+v)", df)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.present, df.Present, "present")
			require.Equal(t, tc.partial, df.Partial, "partial")
			if tc.present {
				require.Equal(t, uint64(0x2a), df.MemberID)
			}
		})
	}
}

// An agent whose data directory cannot be read decides nothing (so it never moves the data aside).
func TestDecideStopsOnUnreadableData(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.MkdirAll(filepath.Join(data, "member"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(data, "member", "wal"), nil, 0o600))
	leases := NewMemLeases()
	leases.SetIntent("m-0-member", "member", false, 0)
	a := &Agent{Cfg: Self{Name: "m0", DataDir: data, ClusterUID: "p"}, Store: leases.Store("m-0-member", "pod"), Etcd: &Etcd{}, Log: testLogger(t)}
	a.wire()
	d, _, err := a.decide(t.Context())
	require.ErrorIs(t, err, syscall.ENOTDIR, "decided %s", d)
}
