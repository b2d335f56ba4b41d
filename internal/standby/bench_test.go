package standby

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdhook/etcdhook/internal/percentile"
)

// BenchmarkApplier measures the applier on loopback (embedded primary and standby in one process, a
// file:// bucket on the local disk): docs/performance.md "Standby (issue 44): the applier".
//
//   - catch-up: the revisions/s it applies from a backlog (STANDBY_BACKLOG revisions stored, default
//     20000; one put of a 100-byte value each, to 1000 keys), from the seed to the end;
//   - rate=200, rate=2000: the primary written at that many puts/s for STANDBY_SECONDS (default 20) by
//     8 clients, the writer (delta.Follower) cutting a chunk every STANDBY_CHUNK (default 5s, the
//     writer's chunkInterval) and the applier listing every STANDBY_POLL (default 2s, its default):
//     the lag of each revision from its commit on the primary to its arrival on the standby (a watch
//     on each side), p50 and p99, and the rate the primary reached.
//
// go test -run '^$' -bench BenchmarkApplier -benchtime 1x ./internal/standby/
func BenchmarkApplier(b *testing.B) {
	b.Run("catch-up", func(b *testing.B) {
		for range b.N {
			benchCatchUp(b, envInt("STANDBY_BACKLOG", 20000))
		}
	})
	for _, rate := range []int{200, 2000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			for range b.N {
				benchLag(b, rate, time.Duration(envInt("STANDBY_SECONDS", 20))*time.Second,
					envDuration("STANDBY_CHUNK", 5*time.Second), envDuration("STANDBY_POLL", 2*time.Second))
			}
		})
	}
}

func benchCatchUp(b *testing.B, n int) {
	ctx := context.Background()
	primary := startEtcd(b, filepath.Join(b.TempDir(), "primary"), "primary")
	bucket := openBucket(b, filepath.Join(b.TempDir(), "bucket"))
	id := clusterID(b, primary)
	m := fullSnapshot(b, primary, bucket)
	f := follow(b, primary, bucket, m, 4<<20)
	value := string(make([]byte, 100))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				if _, err := primary.Put(ctx, fmt.Sprintf("k%04d", i%1000), value); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	end := revisionOf(b, primary)
	f.waitStored(b, m.Revision, end)
	f.stop()
	standby := seed(b, bucket, m, "standby", standbyTune)
	p := &progress{}
	a := applier(bucket, id, standby, p)
	start := time.Now()
	stop := run(a)
	for p.get().Revision < end {
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("the standby reached %d of %d in 10 minutes", p.get().Revision, end)
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	if err := stop(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(end-m.Revision)/took.Seconds(), "revisions/s")
}

func benchLag(b *testing.B, rate int, d, chunk, poll time.Duration) {
	ctx := context.Background()
	primary := startEtcd(b, filepath.Join(b.TempDir(), "primary"), "primary")
	bucket := openBucket(b, filepath.Join(b.TempDir(), "bucket"))
	id := clusterID(b, primary)
	m := fullSnapshot(b, primary, bucket)
	followEvery(b, primary, bucket, m, 4<<20, chunk) // stopped at the cleanup
	standby := seed(b, bucket, m, "standby", standbyTune)
	a := applier(bucket, id, standby, nil)
	a.Poll = poll
	stop := run(a)

	// When each revision committed on the primary, and arrived on the standby.
	var mu sync.Mutex
	committed, arrived := map[int64]time.Time{}, map[int64]time.Time{}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	record := func(c *clientv3.Client, into map[int64]time.Time) chan struct{} {
		done := make(chan struct{})
		wch := c.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(m.Revision+1))
		go func() {
			defer close(done)
			for wr := range wch {
				now := time.Now()
				mu.Lock()
				for _, ev := range wr.Events {
					if _, ok := into[ev.Kv.ModRevision]; !ok {
						into[ev.Kv.ModRevision] = now
					}
				}
				mu.Unlock()
			}
		}()
		return done
	}
	pdone, sdone := record(primary, committed), record(standby, arrived)

	const writers = 8
	value := string(make([]byte, 100))
	start := time.Now()
	var wg sync.WaitGroup
	var puts sync.Map
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Duration(writers) * time.Second / time.Duration(rate))
			defer tick.Stop()
			n := 0
			for time.Since(start) < d {
				<-tick.C
				if _, err := primary.Put(ctx, fmt.Sprintf("k%04d", (n*writers+w)%1000), value); err != nil {
					b.Error(err)
					return
				}
				n++
			}
			puts.Store(w, n)
		}()
	}
	wg.Wait()
	wrote := time.Since(start)
	end := revisionOf(b, primary)
	for revisionOf(b, standby) < end {
		if time.Since(start) > d+5*time.Minute {
			b.Fatalf("the standby did not reach %d", end)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the standby's watch delivers the last events
	cancel()
	<-pdone
	<-sdone
	if err := stop(); err != nil {
		b.Fatal(err)
	}
	total := 0
	puts.Range(func(_, n any) bool { total += n.(int); return true })
	var lags []time.Duration
	for rev, at := range arrived {
		if c, ok := committed[rev]; ok {
			lags = append(lags, at.Sub(c))
		}
	}
	if len(lags) < total*9/10 {
		b.Fatalf("lag of %d revisions measured, %d written", len(lags), total)
	}
	b.ReportMetric(float64(total)/wrote.Seconds(), "writes/s")
	b.ReportMetric(percentile.Of(lags, 50).Seconds(), "lag-p50-s")
	b.ReportMetric(percentile.Of(lags, 99).Seconds(), "lag-p99-s")
}

// standbyTune: STANDBY_NOFSYNC=1 runs the standby without fsync (etcd's --unsafe-no-fsync), to
// measure what the disk's flushes cost the applier.
func standbyTune(c *embed.Config) { c.UnsafeNoFsync = os.Getenv("STANDBY_NOFSYNC") == "1" }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
