package membership

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// keepAside is how many moved-aside copies of a data directory a volume keeps. A copy is the last word
// on a member that was removed (or a start that died half-way): kept so that a wrong decision can still
// be undone by hand, bounded because each one holds at least etcd's 64 MB preallocated WAL.
const keepAside = 2

// asideFS is the part of the filesystem moving aside uses. It is an interface only so that tests can
// make a rename fail: no real-directory setup makes rename(2) of a fresh name fail while the listing
// before it succeeds (and root, which runs the tests, ignores permission bits).
type asideFS interface {
	ReadDir(name string) ([]os.DirEntry, error)
	Rename(from, to string) error
	RemoveAll(path string) error
	Remove(path string) error
}

type osFS struct{}

func (osFS) ReadDir(name string) ([]os.DirEntry, error) { return os.ReadDir(name) }
func (osFS) Rename(from, to string) error               { return os.Rename(from, to) }
func (osFS) RemoveAll(path string) error                { return os.RemoveAll(path) }
func (osFS) Remove(path string) error                   { return os.Remove(path) }

// errPruneAside: the data was moved aside, but an old copy could not be deleted. Nothing is lost; the
// volume just holds one copy more than keepAside.
var errPruneAside = errors.New("pruning old moved-aside copies")

// moveDataAside renames dataDir to <data-dir>.removed-<n>, n one above the highest copy present, and only
// then deletes the oldest copies beyond keepAside. Nothing is deleted before the new copy exists, and
// nothing is moved when the volume cannot be listed. The binding is deleted after the move: it describes
// the data, which is no longer at dataDir. A missing dataDir is nothing to move.
func moveDataAside(fsys asideFS, dataDir string, keep int) (string, error) {
	dataDir = filepath.Clean(dataDir)
	parent, base := filepath.Split(dataDir)
	copies, err := asideCopies(fsys, parent, base)
	if err != nil {
		return "", err
	}
	next := 1
	if len(copies) > 0 {
		next = copies[len(copies)-1].n + 1
	}
	aside := fmt.Sprintf("%s.removed-%d", dataDir, next)
	if err := fsys.Rename(dataDir, aside); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		return "", err
	}
	if err := fsys.Remove(bindingPath(dataDir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return aside, err
	}
	// copies holds the older ones, oldest first; the new one is the keep-th newest.
	var pruneErrs []error
	for len(copies) > 0 && len(copies) >= keep {
		if err := fsys.RemoveAll(copies[0].path); err != nil {
			pruneErrs = append(pruneErrs, err)
		}
		copies = copies[1:]
	}
	if len(pruneErrs) > 0 {
		return aside, fmt.Errorf("%w: %v", errPruneAside, errors.Join(pruneErrs...))
	}
	return aside, nil
}

type asideCopy struct {
	path string
	n    int
}

// asideCopies lists the moved-aside copies of base in parent, oldest first. The single copy of earlier
// agents (<data-dir>.removed) counts as the oldest.
func asideCopies(fsys asideFS, parent, base string) ([]asideCopy, error) {
	if parent == "" {
		parent = "."
	}
	entries, err := fsys.ReadDir(parent)
	if err != nil {
		return nil, fmt.Errorf("listing moved-aside copies: %w", err)
	}
	var out []asideCopy
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == base+".removed":
			out = append(out, asideCopy{path: filepath.Join(parent, name), n: 0})
		case strings.HasPrefix(name, base+".removed-"):
			n, err := strconv.Atoi(strings.TrimPrefix(name, base+".removed-"))
			if err != nil || n < 1 {
				continue // not a name this agent writes: leave it alone
			}
			out = append(out, asideCopy{path: filepath.Join(parent, name), n: n})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n < out[j].n })
	return out, nil
}
