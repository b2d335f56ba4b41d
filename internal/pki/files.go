package pki

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// File hand-over to etcd.
//
// etcd reads its certificate and key files again for every new handshake (it reads the
// certificate file, then the key file, and pairs them with tls.X509KeyPair), so replacing the files
// under a running etcd is how leaf certificates rotate without a restart. Two things can go wrong:
// a reader sees a half-written file, or it sees a certificate and a key of different generations.
//
// WriteFiles uses the layout of Kubernetes' AtomicWriter (what the kubelet does for Secret
// volumes):
//
//	dir/..data -> ..gen-123            symlink, swapped by one rename
//	dir/..gen-123/tls.crt, tls.key…    one directory per generation, written and fsynced first
//	dir/tls.crt -> ..data/tls.crt      fixed names, resolved through ..data at open time
//
// A new generation is written completely into a fresh directory, fsynced, and published by renaming
// a new ..data symlink over the old one. rename(2) is atomic, so every open of dir/tls.crt sees a
// whole file of one generation, never a partial one, and all names switch at the same instant.
//
// What no scheme can give a reader that opens two fixed names one after the other is that both
// opens land on the same side of the switch: etcd opening tls.crt just before the rename and
// tls.key just after pairs the old certificate with the new key. tls.X509KeyPair refuses that pair,
// so that one handshake fails and the client retries (etcd's clients and its peer transport
// reconnect); the window is the reader's gap between its two reads, not the writer's. Renewing
// with the same key (IssueWithKey) closes it, since old certificate + same key still match. A
// reader that can cooperate uses ReadFiles, which resolves ..data once and reads every file from
// that generation: always a consistent set, ca.crt included.
//
// The previous generation's directory is kept until the next write, so a reader that resolved
// ..data just before a swap still finds its files; older ones are removed. One writer per dir.

// dataLink is the symlink naming the current generation; Kubernetes uses the same name, so
// ReadFiles also reads Secret volumes consistently.
const dataLink = "..data"

// genPrefix names generation directories; the ".." prefix hides them from `ls` and keeps them out
// of the namespace of file names WriteFiles accepts.
const genPrefix = "..gen-"

// WriteFiles makes files (name -> content) the contents of dir, atomically as a set (see above):
// files whose name ends in ".key" or that hold a PEM private key get mode 0600, others 0644. Names
// that were written before and are not in files are removed. dir must exist.
func WriteFiles(dir string, files map[string][]byte) error {
	if len(files) == 0 {
		return errors.New("pki: no files to write")
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if err := checkName(name); err != nil {
			return err
		}
		names = append(names, name)
	}
	sort.Strings(names)

	gen, err := os.MkdirTemp(dir, genPrefix)
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	published := false
	defer func() {
		if !published {
			_ = os.RemoveAll(gen) // an unpublished generation is garbage
		}
	}()
	// MkdirTemp makes 0700; certificates must be readable to etcd if it runs as another user
	// sharing a group (keys are protected by their own 0600).
	if err := os.Chmod(gen, 0o755); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	for _, name := range names {
		if err := writeSynced(filepath.Join(gen, name), files[name], fileMode(name, files[name])); err != nil {
			return err
		}
	}
	// The files' directory entries must be on disk before ..data can point at them, or a crash
	// could leave ..data naming empty files.
	if err := syncDir(gen); err != nil {
		return err
	}

	prev, _ := os.Readlink(filepath.Join(dir, dataLink)) // "" on the first write
	if err := replaceSymlink(dir, filepath.Base(gen), dataLink); err != nil {
		return err
	}
	published = true

	want := make(map[string]bool, len(names))
	for _, name := range names {
		want[name] = true
		target := filepath.Join(dataLink, name)
		if cur, err := os.Readlink(filepath.Join(dir, name)); err == nil && cur == target {
			continue
		}
		// Also replaces a regular file left by an earlier layout, atomically.
		if err := replaceSymlink(dir, target, name); err != nil {
			return err
		}
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, genPrefix) && e.IsDir():
			// Keep the new and the previous generation; anything else is older, or was left by a
			// write that crashed before publishing.
			if name != filepath.Base(gen) && name != prev {
				if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
					return fmt.Errorf("pki: removing old generation: %w", err)
				}
			}
		case !want[name] && e.Type()&fs.ModeSymlink != 0:
			// A name of an earlier set (it points into ..data); now dangling.
			if t, err := os.Readlink(filepath.Join(dir, name)); err == nil && strings.HasPrefix(t, dataLink+string(filepath.Separator)) {
				if err := os.Remove(filepath.Join(dir, name)); err != nil {
					return fmt.Errorf("pki: %w", err)
				}
			}
		}
	}
	return syncDir(dir)
}

// ReadFiles reads names from dir as one set: when dir has the ..data layout of WriteFiles (or of a
// Kubernetes Secret volume) it resolves ..data once and reads every file from that generation, so
// the certificate, key and CA always belong together. Without the layout it reads the names
// directly. A generation removed while being read (the reader was two writes behind) is retried.
func ReadFiles(dir string, names ...string) (map[string][]byte, error) {
	const attempts = 5
	for attempt := 1; ; attempt++ {
		target, err := os.Readlink(filepath.Join(dir, dataLink))
		base := dir
		switch {
		case err == nil && filepath.IsAbs(target):
			base = target
		case err == nil:
			base = filepath.Join(dir, target)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("pki: %w", err)
		}
		out, err := readAll(base, names)
		if err == nil {
			return out, nil
		}
		if attempt == attempts || base == dir || !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("pki: %w", err)
		}
		if now, _ := os.Readlink(filepath.Join(dir, dataLink)); now == target {
			return nil, fmt.Errorf("pki: %w", err) // not a race: the file is not in the set
		}
	}
}

func readAll(base string, names []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(names))
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(base, name))
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

func checkName(name string) error {
	if name == "" || name == "." || strings.HasPrefix(name, "..") || strings.ContainsRune(name, filepath.Separator) || strings.ContainsRune(name, '/') {
		return fmt.Errorf("pki: file name %q: must be a plain name not starting with \"..\"", name)
	}
	return nil
}

// fileMode keeps private keys to their owner. A key is recognised by name (tls.key, *.key) and by
// content, so a key under any name is protected.
func fileMode(name string, content []byte) os.FileMode {
	if strings.HasSuffix(name, ".key") || bytes.Contains(content, []byte("PRIVATE KEY-----")) {
		return 0o600
	}
	return 0o644
}

func writeSynced(path string, content []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	err = f.Chmod(mode) // OpenFile's mode is filtered by the umask
	if err == nil {
		_, err = f.Write(content)
	}
	return syncClose(f, err, "writing")
}

// replaceSymlink points dir/name at target by renaming a fresh symlink over it, so readers see
// either the old link (or file) or the new one, never no link.
func replaceSymlink(dir, target, name string) error {
	tmp := filepath.Join(dir, "..tmp-"+name)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) { // left by a crash
		return fmt.Errorf("pki: %w", err)
	}
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return syncClose(d, nil, "syncing")
}

// syncClose syncs f unless err (an earlier failure on f) is set, closes it in any case, and names
// the first failure with doing and the path f was opened by: a write counts only once it is synced.
func syncClose(f *os.File, err error, doing string) error {
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pki: %s %s: %w", doing, f.Name(), err)
	}
	return nil
}
