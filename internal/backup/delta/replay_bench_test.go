package delta

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkReplay measures the replay of a chain: revisions applied per second (each one transaction on
// etcd's own server, as a restore to a point applies them). The chain is synthetic (one put per
// revision, 1000 keys, 100-byte values) after a snapshot of a one-key store.
func BenchmarkReplay(b *testing.B) {
	n := int64(benchRevisions)
	ctx := context.Background()
	src := startEtcd(&testing.T{}, filepath.Join(b.TempDir(), "src"), "src")
	_, err := src.Put(ctx, "seed", "x")
	if err != nil {
		b.Fatal(err)
	}
	t := &testing.T{}
	snap, snapRev := saveSnapshot(t, src)
	value := bytes.Repeat([]byte("v"), 100)
	var heads []Header
	var blobs [][]byte
	now := time.Now()
	for first := snapRev + 1; first <= snapRev+n; first += 1000 {
		var revs []Revision
		for r := first; r < first+1000 && r <= snapRev+n; r++ {
			revs = append(revs, Revision{Rev: r, Time: now, Ops: []Op{{Type: Put, Key: []byte(fmt.Sprintf("k%04d", r%1000)), Value: value}}})
		}
		var buf bytes.Buffer
		h, err := Write(&buf, "c1", snapRev, revs)
		if err != nil {
			b.Fatal(err)
		}
		heads, blobs = append(heads, h), append(blobs, buf.Bytes())
	}
	read := func(i int) ([]Revision, error) {
		_, rs, err := Read(bytes.NewReader(blobs[i]))
		return rs, err
	}
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := Replay(ctx, snap, snapRev, heads, read, snapRev+n, filepath.Join(b.TempDir(), "out.db")); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "revisions/s")
	}
}

// benchRevisions is the chain's length: REPLAY_REVISIONS, default 100000 (an hour at 200 writes/s is 720000).
var benchRevisions = func() int {
	if v, err := strconv.Atoi(os.Getenv("REPLAY_REVISIONS")); err == nil && v > 0 {
		return v
	}
	return 100000
}()
