// Command backupload measures continuous backup (issue 27) on this machine, on 127.0.0.1 only, every
// phase bounded in count and time (make backupload):
//
//   - cost: the writer (`etcdhook backup-follow`, a child process, so that its CPU time and memory are its
//     own) following an etcd of etcd's own server whose database is filled to -db-mib, into a real MinIO:
//     its first full snapshot (time, peak RSS), then at each of -rates writes/s for -phase: CPU, peak RSS,
//     and how long a write takes to become restorable (acknowledged to reported covered) and a chunk's
//     upload (its last revision received to its upload confirmed);
//   - restore: -replay-revisions revisions (an hour at 200 writes/s is 720000) written after the snapshot,
//     then the newest point restored (download, replay, etcd's restore) and timed;
//   - accuracy: a -accuracy run with puts, overwrites, deletes and leases on a small store, then 20
//     random revisions and 5 random times restored, each compared with etcd's own `get --rev`.
//
// It prints Markdown; docs/performance.md keeps the run of record.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/internal/backup/delta"
	"github.com/etcdhook/etcdhook/internal/percentile"
	"github.com/etcdhook/etcdhook/membership"
)

const (
	minioUser   = "backupload"
	minioSecret = "backupload-secret"
	bucket      = "load"
)

type config struct {
	etcdhook, minio string
	dbMiB           int
	rates           []int
	phase           time.Duration
	replay          int
	accuracy        time.Duration
	work            string
}

func main() {
	var c config
	var rates string
	flag.StringVar(&c.etcdhook, "etcdhook", "bin/etcdhook", "the etcdhook binary (make build)")
	flag.StringVar(&c.minio, "minio", "", "the MinIO binary (scripts/gotool.sh minio)")
	flag.IntVar(&c.dbMiB, "db-mib", 1024, "fill the database to this size before the writer starts")
	flag.StringVar(&rates, "rates", "200,2000", "write rates of the cost phases (writes/s)")
	flag.DurationVar(&c.phase, "phase", time.Minute, "each cost phase's length")
	flag.IntVar(&c.replay, "replay-revisions", 720000, "revisions after the snapshot for the restore timing (0: skip)")
	flag.DurationVar(&c.accuracy, "accuracy", 10*time.Minute, "the accuracy run's length (0: skip)")
	flag.StringVar(&c.work, "work", "", "working directory (default: a new temporary one, removed after)")
	flag.Parse()
	for _, r := range strings.Split(rates, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil || n <= 0 {
			fail(fmt.Errorf("-rates %q: %v", rates, err))
		}
		c.rates = append(c.rates, n)
	}
	if c.minio == "" {
		fail(errors.New("-minio is required (scripts/gotool.sh minio)"))
	}
	if c.work == "" {
		dir, err := os.MkdirTemp("", "backupload-")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(dir)
		c.work = dir
	}
	if err := run(c); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "backupload:", err)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(c config) error {
	ctx := context.Background()
	store, stopMinIO, err := startMinIO(c)
	if err != nil {
		return err
	}
	defer stopMinIO()
	fmt.Printf("## Continuous backup (cmd/backupload)\n\n")
	if err := costAndRestore(ctx, c, store); err != nil {
		return err
	}
	if c.accuracy > 0 {
		if err := accuracy(ctx, c, store); err != nil {
			return err
		}
	}
	return nil
}

// store is the MinIO the writer uploads to.
type store struct {
	endpoint, creds string
}

func (s store) destination(prefix string) string {
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&region=us-east-1&use_path_style=true", bucket, prefix, s.endpoint)
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startMinIO(c config) (store, func(), error) {
	addr := freeAddr()
	cmd := exec.Command(c.minio, "server", filepath.Join(c.work, "minio"), "--address", addr, "--console-address", freeAddr(), "--quiet")
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+minioUser, "MINIO_ROOT_PASSWORD="+minioSecret, "MINIO_BROWSER=off")
	if err := cmd.Start(); err != nil {
		return store{}, nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	endpoint := "http://" + addr
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(endpoint + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			stop()
			return store{}, nil, fmt.Errorf("MinIO did not start: %v", err)
		}
	}
	s3c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(minioUser, minioSecret, "")})
	if _, err := s3c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		stop()
		return store{}, nil, err
	}
	creds := filepath.Join(c.work, "creds")
	if err := os.MkdirAll(creds, 0o700); err != nil {
		stop()
		return store{}, nil, err
	}
	for k, v := range map[string]string{backup.KeyAWSAccessKeyID: minioUser, backup.KeyAWSSecretAccessKey: minioSecret} {
		if err := os.WriteFile(filepath.Join(creds, k), []byte(v), 0o600); err != nil {
			stop()
			return store{}, nil, err
		}
	}
	// This process reads the store too (the chunks' times, the restores): with the same credentials.
	if err := backup.LoadCredentials(creds); err != nil {
		stop()
		return store{}, nil, err
	}
	return store{endpoint: endpoint, creds: creds}, stop, nil
}

// startEtcd runs etcd's own server on loopback on a fresh data directory: a client of it, its client
// URL, and stop, which closes the client, then the server.
func startEtcd(dir string, quota int64) (cl *clientv3.Client, endpoint string, stop func(), err error) {
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir, cfg.LogLevel, cfg.LogOutputs = "src", dir, "error", []string{os.DevNull}
	pu, _ := url.Parse("http://" + freeAddr())
	cu, _ := url.Parse("http://" + freeAddr())
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.InitialCluster = "src=" + pu.String()
	cfg.QuotaBackendBytes = quota
	cfg.MaxRequestBytes = 2 << 20
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		e.Close()
		return nil, "", nil, errors.New("etcd did not become ready")
	}
	if cl, err = clientv3.New(clientv3.Config{Endpoints: []string{cu.String()}, DialTimeout: 5 * time.Second}); err != nil {
		e.Close()
		return nil, "", nil, err
	}
	return cl, e.Config().AdvertiseClientUrls[0].String(), func() { cl.Close(); e.Close() }, nil
}

// writerProc is a running `etcdhook backup-follow` and the reports it prints (it has no Lease to write).
type writerProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	reps []api.ContinuousReport
	// seen: when each report line was read.
	seen []time.Time
	done chan struct{}
}

func startWriter(c config, s store, endpoint, prefix, cluster string, interval time.Duration) (*writerProc, error) {
	cmd := exec.Command(c.etcdhook, "backup-follow", "--cluster="+cluster, "--namespace=load", "--cluster-uid=uid-"+cluster,
		"--endpoints="+endpoint, "--destination="+s.destination(prefix), "--credentials-dir="+s.creds,
		"--chunk-interval="+interval.String(), "--report-every=1ms", "--keep-last=100")
	// As the writer's pod runs it (sync/render/backupwriter.go).
	cmd.Env = append(os.Environ(), "GOMEMLIMIT=64MiB")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := &writerProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct {
				Msg    string `json:"msg"`
				Key    string `json:"key"`
				Report string `json:"report"`
				Error  string `json:"error"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			if line.Error != "" {
				logf("writer: %s: %s", line.Msg, line.Error)
			}
			if line.Msg != "report" || line.Key != api.AnnBackupContinuous {
				continue
			}
			r, err := api.ParseContinuousReport(line.Report)
			if err != nil || r == nil {
				continue
			}
			w.mu.Lock()
			w.reps = append(w.reps, *r)
			w.seen = append(w.seen, time.Now())
			w.mu.Unlock()
		}
	}()
	return w, nil
}

// waitCovered waits until a report says rev is restorable and returns that report.
func (w *writerProc) waitCovered(rev int64, limit time.Duration) (api.ContinuousReport, error) {
	deadline := time.Now().Add(limit)
	for {
		w.mu.Lock()
		for _, r := range w.reps {
			if r.Revision >= rev && r.RevisionTime != nil {
				w.mu.Unlock()
				return r, nil
			}
		}
		w.mu.Unlock()
		if time.Now().After(deadline) {
			return api.ContinuousReport{}, fmt.Errorf("revision %d not reported restorable within %s", rev, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (w *writerProc) reports() []api.ContinuousReport {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.reps)
}

func (w *writerProc) stop() {
	_ = w.cmd.Process.Signal(os.Interrupt)
	select {
	case <-w.done:
	case <-time.After(time.Minute):
		_ = w.cmd.Process.Kill()
	}
	_ = w.cmd.Wait()
}

// procStat is a process's CPU time and peak RSS (VmHWM), from /proc.
func procStat(pid int) (cpu time.Duration, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		// Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			cpu = time.Duration(u+s) * time.Second / 100 // USER_HZ
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				hwm = kb << 10
			}
		}
	}
	return cpu, hwm
}

// rssNow is the process's resident memory now, anonymous (heap, stacks) and file-backed (the binary's
// pages) apart.
func rssNow(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	var parts []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, k := range []string{"VmRSS:", "RssAnon:", "RssFile:"} {
			if v, ok := strings.CutPrefix(l, k); ok {
				parts = append(parts, k+" "+strings.TrimSpace(v))
			}
		}
	}
	return strings.Join(parts, ", ")
}

// resetPeak resets the process's VmHWM (clear_refs 5), so that each phase's peak is its own.
func resetPeak(pid int) {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0o200)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// fill writes values until the database file reaches mibs MiB.
func fill(ctx context.Context, cl *clientv3.Client, endpoint string, mibs int) (int64, error) {
	value := strings.Repeat("x", 64<<10)
	var n atomic.Int64
	for {
		st, err := cl.Status(ctx, endpoint)
		if err != nil {
			return 0, err
		}
		if st.DbSize >= int64(mibs)<<20 {
			return st.DbSize, nil
		}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 64 {
					i := n.Add(1)
					if _, err := cl.Put(ctx, fmt.Sprintf("/fill/%08d", i), value); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return 0, err
		}
	}
}

// acked is one write: its revision and when it was acknowledged.
type acked struct {
	rev int64
	at  time.Time
}

// load writes rate puts/s (256-byte values over 10,000 keys, 8 clients) for d, and returns the writes.
func load(ctx context.Context, cl *clientv3.Client, rate int, d time.Duration) ([]acked, int) {
	const clients = 8
	every := time.Duration(clients) * time.Second / time.Duration(rate)
	value := strings.Repeat("v", 256)
	var mu sync.Mutex
	var out []acked
	var failed atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; time.Now().Before(end) && i < rate*int(d/time.Second)/clients+1; i++ {
				<-t.C
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				r, err := cl.Put(cctx, fmt.Sprintf("/load/%05d", rng.IntN(10000)), value)
				cancel()
				if err != nil {
					failed.Add(1)
					continue
				}
				mu.Lock()
				out = append(out, acked{r.Header.Revision, time.Now()})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out, int(failed.Load())
}

// restorableAfter is, for each write, how long after its acknowledgement the writer reported it covered.
func restorableAfter(writes []acked, reps []api.ContinuousReport) []time.Duration {
	var out []time.Duration
	for _, w := range writes {
		for _, r := range reps {
			if r.Revision >= w.rev && r.RevisionTime != nil {
				out = append(out, r.RevisionTime.Sub(w.at))
				break
			}
		}
	}
	return out
}

// uploadLatencies: for each stored chunk ending within revisions [from, to], the time from receiving its
// last revision to the upload confirmed (read back and compared): the first report naming that revision
// (later ones are the idle checks' and say nothing of the upload).
func uploadLatencies(ctx context.Context, s store, prefix, cluster string, reps []api.ContinuousReport, from, to int64) ([]time.Duration, error) {
	d, err := backup.ParseDestination(s.destination(prefix))
	if err != nil {
		return nil, err
	}
	b, err := d.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	ms, _, err := backup.List(ctx, b, "load", cluster)
	if err != nil {
		return nil, err
	}
	covered := map[int64]time.Time{}
	for _, r := range reps {
		if r.RevisionTime != nil {
			if _, ok := covered[r.Revision]; !ok {
				covered[r.Revision] = *r.RevisionTime
			}
		}
	}
	var out []time.Duration
	for _, m := range ms {
		chain := delta.BlobChain{Bucket: b, Prefix: m.ChainsPrefix()}
		spans, _, _ := chain.List(ctx, m.Revision)
		for _, sp := range spans {
			at, ok := covered[sp.Last]
			if !ok || sp.Last < from || sp.Last > to {
				continue
			}
			ch, err := chain.ReadSpan(ctx, sp, m.Revision, m.EtcdClusterID, delta.ReadOptions{})
			if err != nil {
				return nil, err
			}
			out = append(out, at.Sub(ch.LastTime))
		}
	}
	return out, nil
}

func pct(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	slices.Sort(ds)
	p := func(q float64) time.Duration { return percentile.Of(ds, q).Round(time.Millisecond) }
	return fmt.Sprintf("%s / %s / %s", p(50), p(99), ds[len(ds)-1].Round(time.Millisecond))
}

func costAndRestore(ctx context.Context, c config, s store) error {
	cl, ep, stop, err := startEtcd(filepath.Join(c.work, "etcd"), 16<<30)
	if err != nil {
		return err
	}
	defer stop()
	logf("filling the database to %d MiB", c.dbMiB)
	t0 := time.Now()
	size, err := fill(ctx, cl, ep, c.dbMiB)
	if err != nil {
		return err
	}
	logf("filled: %s in %s", mib(size), time.Since(t0).Round(time.Second))

	w, err := startWriter(c, s, ep, "cost", "cost", 5*time.Second)
	if err != nil {
		return err
	}
	defer w.stop()
	pid := w.cmd.Process.Pid
	t1 := time.Now()
	first, err := w.waitCovered(1, 30*time.Minute)
	if err != nil {
		return err
	}
	snapTook := time.Since(t1)
	cpu0, snapHWM := procStat(pid)
	logf("first full snapshot (revision %d) stored in %s, writer peak RSS %s (now: %s)", first.ChainStart, snapTook.Round(time.Second), mib(snapHWM), rssNow(pid))

	fmt.Printf("Writer `etcdhook backup-follow` (a child process: its own CPU and memory), etcd %s database (etcd's own server, loopback), MinIO on loopback, chunk interval 5 s.\n\n", mib(size))
	fmt.Printf("| phase | writes acknowledged (failed) | writer CPU | writer peak RSS | write to restorable p50 / p99 / max | chunk upload p50 / p99 / max |\n|---|---|---|---|---|---|\n")
	fmt.Printf("| first full snapshot (%s) | - | %s (%s) | %s | - | - |\n", mib(size), cpu0.Round(10*time.Millisecond), snapTook.Round(100*time.Millisecond), mib(snapHWM))
	for _, rate := range c.rates {
		resetPeak(pid)
		cpuA, _ := procStat(pid)
		startReps := len(w.reports())
		tA := time.Now()
		writes, failed := load(ctx, cl, rate, c.phase)
		if len(writes) == 0 {
			return fmt.Errorf("no write acknowledged at %d/s", rate)
		}
		last := slices.MaxFunc(writes, func(a, b acked) int { return int(a.rev - b.rev) })
		if _, err := w.waitCovered(last.rev, 2*time.Minute); err != nil {
			return err
		}
		elapsed := time.Since(tA)
		cpuB, hwm := procStat(pid)
		all := w.reports()
		lat := restorableAfter(writes, all[startReps:])
		firstRev := slices.MinFunc(writes, func(a, b acked) int { return int(a.rev - b.rev) }).rev
		up, err := uploadLatencies(ctx, s, "cost", "cost", all, firstRev, last.rev)
		if err != nil {
			return err
		}
		cpuShare := float64(cpuB-cpuA) / float64(elapsed) * 100
		fmt.Printf("| %d writes/s for %s | %d (%d) | %.1f%% of a core (%s) | %s | %s | %s |\n", rate, c.phase, len(writes), failed,
			cpuShare, (cpuB - cpuA).Round(10*time.Millisecond), mib(hwm), pct(lat), pct(up))
		logf("rate %d: %d writes, CPU %.1f%%, peak RSS %s (now: %s)", rate, len(writes), cpuShare, mib(hwm), rssNow(pid))
	}
	fmt.Println()

	if c.replay > 0 {
		if err := restoreTiming(ctx, c, s, cl, w, ep); err != nil {
			return err
		}
	}
	return nil
}

// restoreTiming writes c.replay revisions after a fresh snapshot, then restores the newest point.
func restoreTiming(ctx context.Context, c config, s store, cl *clientv3.Client, w *writerProc, ep string) error {
	logf("writing %d revisions for the restore timing", c.replay)
	// A fresh chain: an on-demand style snapshot through the backup code, which the writer moves to.
	d, err := backup.ParseDestination(s.destination("cost"))
	if err != nil {
		return err
	}
	b, err := d.Open(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	log := slog.New(slog.DiscardHandler)
	res, err := membership.Backup(ctx, &membership.Etcd{Log: log}, b, log, membership.BackupRequest{Endpoints: []string{ep}, Destination: d,
		Namespace: "load", Cluster: "cost", ClusterUID: "uid-cost", Retention: backup.Retention{KeepLast: 100}})
	if err != nil {
		return err
	}
	value := strings.Repeat("r", 256)
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	var lastRev atomic.Int64
	errs := make(chan error, 32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(c.replay) {
					return
				}
				r, err := cl.Put(ctx, fmt.Sprintf("/replay/%05d", i%20000), value)
				if err != nil {
					errs <- err
					return
				}
				for {
					cur := lastRev.Load()
					if r.Header.Revision <= cur || lastRev.CompareAndSwap(cur, r.Header.Revision) {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	logf("wrote %d revisions in %s", c.replay, time.Since(t0).Round(time.Second))
	if _, err := w.waitCovered(lastRev.Load(), 10*time.Minute); err != nil {
		return err
	}
	src, err := backup.ParseSource(s.destination("cost/latest"))
	if err != nil {
		return err
	}
	dir := filepath.Join(c.work, "restored")
	t1 := time.Now()
	rr, err := membership.Restore(ctx, log, membership.RestoreRequest{Source: src, Namespace: "load", Cluster: "cost",
		DataDir: filepath.Join(dir, "data"), Name: "r", PeerURL: "http://127.0.0.1:1", Token: "t"})
	if err != nil {
		return err
	}
	took := time.Since(t1)
	if rr.Revision != lastRev.Load() {
		return fmt.Errorf("restored revision %d, the newest written %d", rr.Revision, lastRev.Load())
	}
	fmt.Printf("Restore of the newest point: snapshot %s (%s, revision %d) and %d revisions after it (%d chunks), downloaded from MinIO, replayed and restored with etcd's restore library: **%s** (%d keys): snapshot download and checks %s, chain read and checked %s, replay (restore without bump, %d revisions on etcd's server, its snapshot written) %s, etcd's restore of the result %s.\n\n",
		res.Manifest.Snapshot, mib(res.Manifest.Size), res.Manifest.Revision, rr.Revision-res.Manifest.Revision, rr.Chunks, took.Round(100*time.Millisecond), rr.Keys,
		rr.Took.Download.Round(100*time.Millisecond), rr.Took.Chain.Round(100*time.Millisecond), rr.Revision-res.Manifest.Revision,
		rr.Took.Replay.Round(100*time.Millisecond), rr.Took.Restore.Round(100*time.Millisecond))
	logf("restore took %s", took.Round(time.Second))
	return os.RemoveAll(dir)
}

// accuracy runs a mixed workload for c.accuracy, then restores 20 random revisions and 5 random times and
// compares each with etcd's own answer at that revision.
func accuracy(ctx context.Context, c config, s store) error {
	cl, ep, stop, err := startEtcd(filepath.Join(c.work, "acc-etcd"), 2<<30)
	if err != nil {
		return err
	}
	defer stop()
	if _, err := cl.Put(ctx, "/acc/start", "x"); err != nil {
		return err
	}
	w, err := startWriter(c, s, ep, "acc", "acc", 5*time.Second)
	if err != nil {
		return err
	}
	defer w.stop()
	first, err := w.waitCovered(1, 5*time.Minute)
	if err != nil {
		return err
	}
	logf("accuracy run: %s of puts, overwrites, deletes, transactions and leases", c.accuracy)
	rng := rand.New(rand.NewPCG(27, 10))
	type mark struct {
		rev int64
		at  time.Time
	}
	var marks []mark
	var leases []clientv3.LeaseID
	end := time.Now().Add(c.accuracy)
	var lastRev int64
	ops := 0
	for time.Now().Before(end) {
		k := fmt.Sprintf("/acc/%03d", rng.IntN(300))
		var rev int64
		switch x := rng.IntN(20); {
		case x == 0:
			r, err := cl.Delete(ctx, "/acc/1", clientv3.WithPrefix())
			if err != nil {
				return err
			}
			rev = r.Header.Revision
		case x < 3:
			r, err := cl.Delete(ctx, k)
			if err != nil {
				return err
			}
			rev = r.Header.Revision
		case x < 5:
			r, err := cl.Txn(ctx).Then(clientv3.OpPut(k, fmt.Sprint(ops)), clientv3.OpPut(fmt.Sprintf("/acc/t%03d", rng.IntN(300)), "t")).Commit()
			if err != nil {
				return err
			}
			rev = r.Header.Revision
		case x < 7:
			g, err := cl.Grant(ctx, int64(5+rng.IntN(60)))
			if err != nil {
				return err
			}
			leases = append(leases, g.ID)
			r, err := cl.Put(ctx, fmt.Sprintf("/acc/lease/%d", ops), "l", clientv3.WithLease(g.ID))
			if err != nil {
				return err
			}
			rev = r.Header.Revision
		case x == 7 && len(leases) > 0:
			r, err := cl.Revoke(ctx, leases[0])
			leases = leases[1:]
			if err != nil && !strings.Contains(err.Error(), "not found") {
				return err
			}
			if r != nil {
				rev = r.Header.Revision
			}
		default:
			r, err := cl.Put(ctx, k, fmt.Sprintf("v%d-%d", ops, rng.IntN(1e6)))
			if err != nil {
				return err
			}
			rev = r.Header.Revision
		}
		ops++
		lastRev = max(lastRev, rev)
		if rng.IntN(200) == 0 && len(marks) < 40 {
			// A time between operations, apart from both: the writer stamps a revision when it
			// receives it.
			time.Sleep(100 * time.Millisecond)
			marks = append(marks, mark{lastRev, time.Now()})
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
	}
	final, err := cl.Get(ctx, "/none")
	if err != nil {
		return err
	}
	lastRev = final.Header.Revision // expiring leases delete keys at revisions of their own
	if _, err := w.waitCovered(lastRev, 5*time.Minute); err != nil {
		return err
	}
	w.stop()
	logf("%d operations up to revision %d; restoring 20 revisions and 5 times", ops, lastRev)
	var targets []backup.Point
	for range 20 {
		targets = append(targets, backup.Point{Revision: first.ChainStart + 1 + rng.Int64N(lastRev-first.ChainStart)})
	}
	rng.Shuffle(len(marks), func(i, j int) { marks[i], marks[j] = marks[j], marks[i] })
	want := map[int]int64{}
	for i, m := range marks[:min(5, len(marks))] {
		want[len(targets)] = m.rev
		targets = append(targets, backup.Point{Time: m.at})
		_ = i
	}
	src, err := backup.ParseSource(s.destination("acc/latest"))
	if err != nil {
		return err
	}
	ok, restoreTimes := 0, []time.Duration{}
	for i, p := range targets {
		dir := filepath.Join(c.work, "acc-restore")
		_ = os.RemoveAll(dir)
		peer := "http://" + freeAddr()
		t0 := time.Now()
		res, err := membership.Restore(ctx, slog.New(slog.DiscardHandler), membership.RestoreRequest{Source: src, Namespace: "load", Cluster: "acc",
			DataDir: filepath.Join(dir, "data"), Name: "p", PeerURL: peer, Token: "t", Point: p})
		if err != nil {
			return fmt.Errorf("restoring to %s: %w", p, err)
		}
		restoreTimes = append(restoreTimes, time.Since(t0))
		rev := p.Revision
		if !p.Time.IsZero() {
			rev = want[i]
		}
		if res.Revision != rev {
			return fmt.Errorf("%s restored revision %d, want %d", p, res.Revision, rev)
		}
		got, err := servedKeyspace(filepath.Join(dir, "data"), peer)
		if err != nil {
			return err
		}
		exp, err := keyspaceAt(ctx, cl, rev)
		if err != nil {
			return err
		}
		if !equalMaps(got, exp) {
			return fmt.Errorf("%s (revision %d): the restored keyspace (%d keys) differs from etcd's get --rev (%d keys)", p, rev, len(got), len(exp))
		}
		ok++
	}
	fmt.Printf("Point accuracy: %s run, %d operations (puts, overwrites, deletes, range deletes, transactions, keys under leases that expire or are revoked) up to revision %d; %d restores (%d random revisions, %d random times) each equal to etcd's `get --rev` of every key: **%d of %d**; restore time p50 / p99 / max %s.\n\n",
		c.accuracy, ops, lastRev, len(targets), 20, len(targets)-20, ok, len(targets), pct(restoreTimes))
	return nil
}

// servedKeyspace serves a restored data directory with etcd's own server and reads every key.
func servedKeyspace(dir, peer string) (map[string]string, error) {
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir, cfg.LogLevel, cfg.LogOutputs = "p", dir, "error", []string{os.DevNull}
	pu, _ := url.Parse(peer)
	cu, _ := url.Parse("http://" + freeAddr())
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.InitialCluster = "p=" + peer
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	<-e.Server.ReadyNotify()
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{cu.String()}})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return keyspaceAt(context.Background(), cl, 0)
}

func keyspaceAt(ctx context.Context, cl *clientv3.Client, rev int64) (map[string]string, error) {
	opts := []clientv3.OpOption{clientv3.WithFromKey()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := cl.Get(ctx, "\x00", opts...)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out, nil
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
