package testsupport

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// EtcdVersions are the etcd servers the tests run against real processes of (docs/design/12-test-beds.md
// §12): each built from its Go module by a three-line main (membership/testdata/etcd-vX).
var EtcdVersions = []string{"v3.5.35", "v3.6.16", "v3.7.3"}

var built sync.Map // version -> *builtEtcd

type builtEtcd struct {
	once sync.Once
	path string
	err  error
}

// EtcdBinary is the etcd server of version, built once and cached by the hash of its go.sum (in the
// user's cache directory, so that every package's tests and every run share it).
func EtcdBinary(t testing.TB, version string) string {
	t.Helper()
	v, _ := built.LoadOrStore(version, &builtEtcd{})
	b := v.(*builtEtcd)
	b.once.Do(func() { b.path, b.err = buildEtcd(version) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func buildEtcd(version string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	src := filepath.Join(root, "membership", "testdata", "etcd-"+version)
	sum, err := os.ReadFile(filepath.Join(src, "go.sum"))
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(sum)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	out := filepath.Join(cache, "etcdhook", "etcd-"+version+"-"+hex.EncodeToString(h[:6]))
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	start := time.Now()
	// A temporary name of this process: two test processes building at once must not rename each
	// other's file away.
	tmp := fmt.Sprintf("%s.tmp-%d", out, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building etcd %s: %v\n%s", version, err, msg)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "built etcd %s in %s\n", version, time.Since(start).Round(time.Second))
	return out, nil
}

// moduleRoot is the directory of the go.mod above the working directory (a test runs in its package's).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
