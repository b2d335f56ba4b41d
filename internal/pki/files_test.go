package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// generations lists the generation directories WriteFiles keeps in dir.
func generations(t *testing.T, dir string) []string {
	return entryNames(t, dir, func(name string) bool { return strings.HasPrefix(name, genPrefix) })
}

// visible lists what a reader of dir sees: all but the ..-prefixed generations and data link.
func visible(t *testing.T, dir string) []string {
	return entryNames(t, dir, func(name string) bool { return !strings.HasPrefix(name, "..") })
}

// entryNames lists the names of dir's entries that keep accepts, sorted (as os.ReadDir sorts them).
func entryNames(t *testing.T, dir string, keep func(name string) bool) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if keep(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestWriteFiles(t *testing.T) {
	ca := mustCA(t, "ca", t0, day)
	leaf := mustIssue(t, ca, peerRequest(day), t0)
	set := func(tag string) map[string][]byte {
		return map[string][]byte{KeyCert: []byte("crt " + tag), KeyKey: []byte("key " + tag), KeyCA: []byte("ca " + tag)}
	}

	t.Run("first write: names, contents, modes", func(t *testing.T) {
		dir := t.TempDir()
		files := map[string][]byte{KeyCert: leaf.CertPEM, KeyKey: leaf.KeyPEM, KeyCA: ca.CertPEM, "peer.pem": leaf.KeyPEM}
		require.NoError(t, WriteFiles(dir, files))
		assert.Equal(t, []string{"ca.crt", "peer.pem", "tls.crt", "tls.key"}, visible(t, dir))
		wantMode := map[string]os.FileMode{KeyCert: 0o644, KeyCA: 0o644, KeyKey: 0o600, "peer.pem": 0o600 /* a key by content */}
		for name, content := range files {
			got, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			assert.Equal(t, content, got, name)
			st, err := os.Stat(filepath.Join(dir, name)) // through the symlinks
			require.NoError(t, err)
			assert.Equal(t, wantMode[name], st.Mode().Perm(), name)
			link, err := os.Readlink(filepath.Join(dir, name))
			require.NoError(t, err)
			assert.Equal(t, filepath.Join("..data", name), link)
		}
		_, err := tls.LoadX509KeyPair(filepath.Join(dir, KeyCert), filepath.Join(dir, KeyKey))
		require.NoError(t, err, "what etcd does with them")
		assert.Len(t, generations(t, dir), 1)
	})

	t.Run("rewrites keep only the current and the previous generation", func(t *testing.T) {
		dir := t.TempDir()
		for i, tag := range []string{"1", "2", "3", "4"} {
			require.NoError(t, WriteFiles(dir, set(tag)))
			got, err := os.ReadFile(filepath.Join(dir, KeyCert))
			require.NoError(t, err)
			assert.Equal(t, "crt "+tag, string(got))
			assert.Len(t, generations(t, dir), min(i+1, 2))
		}
		// The previous generation is whole: a reader that resolved ..data before the last swap
		// still reads a complete set.
		cur, err := os.Readlink(filepath.Join(dir, dataLink))
		require.NoError(t, err)
		for _, g := range generations(t, dir) {
			if g != cur {
				got, err := os.ReadFile(filepath.Join(dir, g, KeyKey))
				require.NoError(t, err)
				assert.Equal(t, "key 3", string(got))
			}
		}
	})

	t.Run("names left out of a new set go", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, WriteFiles(dir, map[string][]byte{"a": []byte("a"), "b": []byte("b")}))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "mine"), []byte("not ours"), 0o644))
		require.NoError(t, WriteFiles(dir, map[string][]byte{"b": []byte("b2"), "c": []byte("c")}))
		assert.Equal(t, []string{"b", "c", "mine"}, visible(t, dir), "someone else's file stays")
	})

	t.Run("replaces plain files of an earlier layout", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, KeyCert), []byte("old"), 0o644))
		require.NoError(t, WriteFiles(dir, set("new")))
		got, err := os.ReadFile(filepath.Join(dir, KeyCert))
		require.NoError(t, err)
		assert.Equal(t, "crt new", string(got))
	})

	t.Run("cleans up after a crashed write", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, WriteFiles(dir, set("1")))
		require.NoError(t, os.Mkdir(filepath.Join(dir, genPrefix+"crashed"), 0o755))
		require.NoError(t, os.Symlink("nowhere", filepath.Join(dir, "..tmp-..data")))
		require.NoError(t, WriteFiles(dir, set("2")))
		assert.NotContains(t, generations(t, dir), genPrefix+"crashed")
		assert.Len(t, generations(t, dir), 2)
		_, err := os.Lstat(filepath.Join(dir, "..tmp-..data"))
		assert.ErrorIs(t, err, fs.ErrNotExist)
	})

	for _, bad := range []map[string][]byte{
		nil,
		{"": []byte("x")},
		{".": []byte("x")},
		{"..data": []byte("x")},
		{"..x": []byte("x")},
		{"a/b": []byte("x")},
		{"ok": []byte("x"), "../escape": []byte("x")},
	} {
		t.Run("refuses names "+strings.Join(slices.Sorted(maps.Keys(bad)), ","), func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, WriteFiles(dir, set("1")))
			require.Error(t, WriteFiles(dir, bad))
			got, err := os.ReadFile(filepath.Join(dir, KeyCert))
			require.NoError(t, err)
			assert.Equal(t, "crt 1", string(got), "nothing changed")
			assert.Len(t, generations(t, dir), 1)
		})
	}

	t.Run("dir must exist", func(t *testing.T) {
		require.Error(t, WriteFiles(filepath.Join(t.TempDir(), "nope"), set("1")))
	})
}

func TestReadFiles(t *testing.T) {
	t.Run("plain directory", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "a"), []byte("A"), 0o644))
		got, err := ReadFiles(dir, "a")
		require.NoError(t, err)
		assert.Equal(t, map[string][]byte{"a": []byte("A")}, got)
		_, err = ReadFiles(dir, "a", "b")
		require.ErrorIs(t, err, fs.ErrNotExist)
	})
	t.Run("WriteFiles layout", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, WriteFiles(dir, map[string][]byte{"a": []byte("A"), "b": []byte("B")}))
		got, err := ReadFiles(dir, "a", "b")
		require.NoError(t, err)
		assert.Equal(t, map[string][]byte{"a": []byte("A"), "b": []byte("B")}, got)
		_, err = ReadFiles(dir, "a", "c")
		require.ErrorIs(t, err, fs.ErrNotExist, "a name not in the set is an error, not a retry loop")
	})
}

// TestWriteFilesConcurrentReaders rewrites the files while readers read them the ways etcd and the
// agent do, and checks what WriteFiles guarantees:
//   - every read of a file by its fixed name returns a whole file of some generation, never a
//     partial or empty one;
//   - tls.LoadX509KeyPair on the fixed names (etcd's handshake) either loads a pair of one
//     generation or fails because it read the certificate and the key on two sides of a swap,
//     never with a parse error;
//   - ReadFiles always returns a set of one generation (certificate, key and CA belong together).
//
// Bounded: 200 rewrites or 5 seconds, whichever comes first.
func TestWriteFilesConcurrentReaders(t *testing.T) {
	const gens = 6
	type gen struct{ crt, key, ca []byte }
	var all []gen
	genOf := map[string]int{} // file content -> generation
	for i := 0; i < gens; i++ {
		ca := mustCA(t, "ca", t0, 365*day)
		leaf := mustIssue(t, ca, peerRequest(90*day), t0)
		all = append(all, gen{leaf.CertPEM, leaf.KeyPEM, ca.CertPEM})
		for _, b := range [][]byte{leaf.CertPEM, leaf.KeyPEM, ca.CertPEM} {
			genOf[string(b)] = i
		}
	}
	files := func(i int) map[string][]byte {
		g := all[i%gens]
		return map[string][]byte{KeyCert: g.crt, KeyKey: g.key, KeyCA: g.ca}
	}
	dir := fastTempDir(t)
	require.NoError(t, WriteFiles(dir, files(0)))

	var (
		done     = make(chan struct{})
		started  sync.WaitGroup
		wg       sync.WaitGroup
		failOnce sync.Once
		failure  error
	)
	fail := func(err error) { failOnce.Do(func() { failure = err }) }
	var fileReads, pairLoads, straddled, setReads, vanished atomic.Int64
	setGens := sync.Map{}
	reader := func(read func()) {
		defer wg.Done()
		read()
		started.Done()
		for {
			select {
			case <-done:
				return
			default:
				read()
			}
		}
	}
	started.Add(3)
	wg.Add(3)
	go reader(func() { // by fixed name, one file at a time
		for _, name := range []string{KeyCert, KeyKey, KeyCA} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if errors.Is(err, fs.ErrNotExist) {
				vanished.Add(1) // only if this reader stalled across two whole rewrites
				continue
			}
			if err != nil {
				fail(err)
				return
			}
			if _, ok := genOf[string(b)]; !ok {
				fail(errors.New(name + ": read content that was never written whole: " + string(b)))
				return
			}
			fileReads.Add(1)
		}
	})
	go reader(func() { // as etcd does on a handshake
		_, err := tls.LoadX509KeyPair(filepath.Join(dir, KeyCert), filepath.Join(dir, KeyKey))
		switch {
		case err == nil:
			pairLoads.Add(1)
		case strings.Contains(err.Error(), "private key does not match public key"):
			straddled.Add(1)
		case errors.Is(err, fs.ErrNotExist):
			vanished.Add(1)
		default:
			fail(errors.New("tls.LoadX509KeyPair: " + err.Error()))
		}
	})
	go reader(func() { // as the agent does, through ReadFiles
		got, err := ReadFiles(dir, KeyCert, KeyKey, KeyCA)
		if err != nil {
			fail(err)
			return
		}
		g, gk, gc := genOf[string(got[KeyCert])], genOf[string(got[KeyKey])], genOf[string(got[KeyCA])]
		if g != gk || g != gc {
			fail(errors.New("ReadFiles mixed generations"))
			return
		}
		kp, err := ParseKeyPair(got[KeyCert], got[KeyKey])
		if err == nil {
			var roots []*x509.Certificate
			roots, err = ParseCertificates(got[KeyCA])
			if err == nil {
				err = Verify(kp.Cert, roots, Usage{Server: true, Client: true}, t0)
			}
		}
		if err != nil {
			fail(err)
			return
		}
		setGens.Store(g, true)
		setReads.Add(1)
	})

	started.Wait() // every reader is running before the first rewrite
	start := time.Now()
	writes := 0
	for i := 1; i <= 200 && time.Since(start) < 5*time.Second; i++ {
		if err := WriteFiles(dir, files(i)); err != nil {
			fail(err)
			break
		}
		writes++
	}
	close(done)
	wg.Wait()

	require.NoError(t, failure)
	seen := 0
	setGens.Range(func(any, any) bool { seen++; return true })
	t.Logf("%d rewrites in %v; %d file reads, %d pairs loaded, %d straddled a swap, %d vanished, %d sets read across %d generations",
		writes, time.Since(start).Round(time.Millisecond), fileReads.Load(), pairLoads.Load(), straddled.Load(), vanished.Load(), setReads.Load(), seen)
	assert.Positive(t, writes)
	assert.Positive(t, fileReads.Load())
	assert.Positive(t, pairLoads.Load())
	assert.GreaterOrEqual(t, seen, 2, "the set reader saw rewrites happen")
	assert.Len(t, generations(t, dir), 2)
}

// fastTempDir is a temporary directory on tmpfs when there is one: what the concurrency test
// exercises is rename and symlink semantics, which tmpfs shares with disk file systems, while its
// no-op fsync lets many more rewrites (and so more interleavings with the readers) fit in the time
// bound than a loaded disk does.
func fastTempDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "pki-test-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}
