// Command loadtest measures the hook server under open-loop load on 127.0.0.1 (make loadtest).
//
// It starts, each as a child process of its own so that CPU time and memory are the server's alone:
//   - the real hook server (hooks.New with the fixture options and a frozen clock, served by the same
//     http.Server as `etcdhook serve`), with its default limits, and again without a wait queue;
//   - a floor server that only reads the same request, decodes it as generic JSON (map[string]any) and
//     encodes a small answer: the least any JSON hook must spend on this request.
//
// It replays one request (hooks/testdata/bench/nine-members-scaling.request.json: a 9-member cluster,
// the largest there is) at fixed open-loop rates, then at twice the hook's measured capacity, every
// phase bounded in count and time, and prints a Markdown table per server: CPU time per answered
// request (the child's own rusage), allocations per request (its runtime.MemStats), p50/p99 latency
// from each request's scheduled send time (so a stalled server is not hidden by a stalled client),
// 429 and error counts, and peak RSS (VmHWM, reset at the start of each phase).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcdhook/etcdhook/hooks"
	"github.com/etcdhook/etcdhook/internal/fixture"
	"github.com/etcdhook/etcdhook/internal/percentile"
	etcdsync "github.com/etcdhook/etcdhook/sync"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// The fixture server's options (hooks/fixtures_test.go): the expected response was made with these.
var (
	fixtureNow   = fixture.Now
	fixtureImage = fixture.Image
)

type config struct {
	reqFile, respFile string
	rates             []float64
	dur               time.Duration
	overload          float64
	capDur            time.Duration
	maxRate           float64
	deadline          time.Duration
	hostileRate       float64
	hostileDur        time.Duration
	compareWaits      []time.Duration
	compareReps       int
	compareDur        time.Duration
	compareNear       float64
}

func main() {
	serve := flag.String("serve", "", "internal: run as the child server (hook or floor)")
	childWait := flag.Duration("queue-wait", hooks.DefaultQueueWait, "internal: the hook child's queue wait (0: no queue)")
	var c config
	flag.StringVar(&c.reqFile, "request", "hooks/testdata/bench/nine-members-scaling.request.json", "request body to replay")
	flag.StringVar(&c.respFile, "response", "hooks/testdata/bench/nine-members-scaling.response.json", "expected hook answer (checked once before the load)")
	ratesFlag := flag.String("rates", "100,200,400", "open-loop rates, requests per second")
	flag.DurationVar(&c.dur, "duration", 5*time.Second, "length of each open-loop phase")
	flag.Float64Var(&c.overload, "overload", 2, "overload phase: this times the hook's measured capacity (0: none)")
	flag.DurationVar(&c.capDur, "capacity-duration", 3*time.Second, "length of the closed-loop capacity measurement")
	flag.Float64Var(&c.maxRate, "max-rate", 2000, "never offer more than this many requests per second")
	flag.DurationVar(&c.deadline, "deadline", 5*time.Minute, "abort the whole run after this long")
	flag.Float64Var(&c.hostileRate, "hostile-rate", 20, "hostile phase: requests per second of each hostile body (0: none)")
	flag.DurationVar(&c.hostileDur, "hostile-duration", 2*time.Second, "length of each hostile phase")
	waits := flag.String("compare-waits", "0,"+hooks.DefaultQueueWait.String(), "queue waits compared, alternating (0: no queue; empty: no comparison)")
	flag.IntVar(&c.compareReps, "compare-reps", 3, "repetitions of each compared queue wait")
	flag.DurationVar(&c.compareDur, "compare-duration", 3*time.Second, "length of each comparison phase")
	flag.Float64Var(&c.compareNear, "compare-near", 0.9, "the comparison's rate below overload, times the hook's capacity")
	sim := flag.Bool("simulate", false, "instead of the load phases, simulate a fleet: -idle-clusters and -busy-clusters syncing at their rates (at most 60 s, make simulate)")
	var sc simConfig
	flag.StringVar(&sc.idleReq, "idle-request", "hooks/testdata/bench/nine-members-idle.request.json", "simulation: an idle cluster's request")
	flag.StringVar(&sc.idleResp, "idle-response", "hooks/testdata/bench/nine-members-idle.response.json", "simulation: the expected answer to it")
	flag.IntVar(&sc.idle, "idle-clusters", 1000, "simulation: idle (settled) 9-member clusters")
	flag.IntVar(&sc.busy, "busy-clusters", 50, "simulation: scaling 9-member clusters (replaying -request)")
	flag.Float64Var(&sc.idleRate, "idle-rate", 0.1, "simulation: syncs per second of each idle cluster")
	flag.Float64Var(&sc.busyRate, "busy-rate", 2, "simulation: syncs per second of each scaling cluster")
	flag.DurationVar(&sc.dur, "sim-duration", 40*time.Second, "simulation: length of the open-loop run (with 2 x -sim-calibrate at most 50s)")
	flag.DurationVar(&sc.calDur, "sim-calibrate", 2*time.Second, "simulation: closed-loop measurement of each request's CPU")
	flag.Float64Var(&sc.budget, "sim-budget", 0.7, "simulation: the share of a core the statement of clusters per replica lets the hook use")
	project := flag.String("project", "1000,10000", "simulation: fleet sizes to project from the fleet scenario's costs (\"\" none)")
	flag.Float64Var(&sc.fleet.syncRate, "fleet-sync-rate", fleetSyncRate, "projection: syncs/s per idle EtcdCluster under Metacontroller (e2e/RESULTS-fleet.md)")
	flag.DurationVar(&sc.fleet.mcCPU, "fleet-mc-cpu", fleetMCCPU, "projection: Metacontroller CPU per sync")
	flag.Float64Var(&sc.fleet.mcRSSPer, "fleet-mc-rss", fleetMCRSS, "projection: Metacontroller MiB per EtcdCluster")
	flag.IntVar(&sc.fleet.workers, "fleet-workers", 20, "projection: Metacontroller --workers (install/metacontroller/settings.yaml)")
	flag.DurationVar(&sc.fleet.syncWall, "fleet-sync-wall", fleetSyncWall, "projection: one sync's time in a Metacontroller worker")
	flag.Parse()
	if *serve != "" {
		serveChild(*serve, *childWait)
		return
	}
	if *sim {
		sc.busyReq, sc.busyResp, sc.deadline = c.reqFile, c.respFile, maxSimRun
		var err error
		if sc.project, err = parseSizes(*project); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			os.Exit(2)
		}
		if err := sc.validate(); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			os.Exit(2)
		}
		if err := simulate(sc); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			os.Exit(1)
		}
		return
	}
	for _, f := range strings.Split(*ratesFlag, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 || v > c.maxRate {
			fmt.Fprintf(os.Stderr, "loadtest: rate %q: want a number in (0, %g]\n", f, c.maxRate)
			os.Exit(2)
		}
		c.rates = append(c.rates, v)
	}
	for _, f := range strings.Split(*waits, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 {
			fmt.Fprintf(os.Stderr, "loadtest: queue wait %q: want a duration >= 0\n", f)
			os.Exit(2)
		}
		c.compareWaits = append(c.compareWaits, d)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

// ---- child servers ----

type stats struct {
	CPUNanos   int64  `json:"cpuNanos"`
	Mallocs    uint64 `json:"mallocs"`
	AllocBytes uint64 `json:"allocBytes"`
	NumGC      uint32 `json:"numGC"`
	HWMKiB     int64  `json:"hwmKiB"`
	RSSKiB     int64  `json:"rssKiB"`
}

func serveChild(kind string, wait time.Duration) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var hs *http.Server
	switch kind {
	case "hook":
		cfg := hooks.Config{
			Options: etcdsync.Options{Image: fixtureImage},
			Now:     func() time.Time { return fixtureNow },
			// The production JSON logger, formatting every line, without the write to a terminal.
			Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
			// Every load request replays one recorded parent, standing in for many clusters: the
			// one-per-parent gate (hooks/fairness.go) would measure the gate, not the computation.
			MaxInFlightPerParent: 1 << 20,
		}
		if wait == 0 {
			cfg.MaxQueue = -1
		} else {
			cfg.QueueWait = wait
		}
		hs = hooks.New(cfg).HTTPServer("")
	case "floor":
		hs = &http.Server{Handler: http.HandlerFunc(floor), ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout: 15 * time.Second, WriteTimeout: 15 * time.Second, IdleTimeout: 120 * time.Second}
	default:
		fmt.Fprintln(os.Stderr, "unknown server", kind)
		os.Exit(2)
	}
	go func() { _ = hs.Serve(ln) }()
	fmt.Println(ln.Addr().String())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "reset": // return freed memory, then peak RSS starts again from the current RSS
			debug.FreeOSMemory()
			err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
			fmt.Println(errString(err))
		case "stats":
			b, _ := json.Marshal(selfStats())
			fmt.Println(string(b))
		}
	}
	// The driver closed stdin: done.
}

func errString(err error) string {
	if err != nil {
		return err.Error()
	}
	return "ok"
}

// floor answers what the least JSON hook must: read the body, decode it, encode an answer.
func floor(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, hooks.MaxBodyBytes))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b, _ := json.Marshal(map[string]any{"status": map[string]any{"phase": "Running"}, "children": []any{},
		"resyncAfterSeconds": 30, "finalized": false, "groups": len(req)})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func selfStats() stats {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := stats{
		CPUNanos:   ru.Utime.Nano() + ru.Stime.Nano(),
		Mallocs:    ms.Mallocs,
		AllocBytes: ms.TotalAlloc,
		NumGC:      ms.NumGC,
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				switch f[0] {
				case "VmHWM:":
					s.HWMKiB = v
				case "VmRSS:":
					s.RSSKiB = v
				}
			}
		}
	}
	return s
}

// child is a running child server, driven over its stdin and stdout.
type child struct {
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	url  string
}

func startChild(ctx context.Context, kind string, wait time.Duration) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, "-serve", kind, "-queue-wait", wait.String())
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	name := kind
	switch {
	case kind != "hook":
	case wait == 0:
		name = "hook, no queue"
	case wait != hooks.DefaultQueueWait:
		name = "hook, queue wait " + wait.String()
	}
	c := &child{name: name, cmd: cmd, in: in, out: bufio.NewScanner(outPipe)}
	addr, err := c.line()
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("%s: no address: %w", kind, err)
	}
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		c.stop()
		return nil, fmt.Errorf("%s listens on %q, not loopback", kind, addr)
	}
	c.url = "http://" + addr + "/sync"
	return c, nil
}

func (c *child) line() (string, error) {
	if !c.out.Scan() {
		if err := c.out.Err(); err != nil {
			return "", err
		}
		return "", io.EOF
	}
	return c.out.Text(), nil
}

func (c *child) ask(cmd string) (string, error) {
	if _, err := fmt.Fprintln(c.in, cmd); err != nil {
		return "", err
	}
	return c.line()
}

func (c *child) stats() (stats, error) {
	var s stats
	l, err := c.ask("stats")
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal([]byte(l), &s)
}

func (c *child) stop() {
	_ = c.in.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// ---- load ----

type outcome struct {
	code int // 0: transport error
	lat  time.Duration
}

type loader struct {
	client *http.Client
	body   []byte
}

func (l *loader) do(ctx context.Context, url string, body []byte) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		return 0
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return 0
	}
	return resp.StatusCode
}

// newLoader makes a loader whose requests time out after 5 s, with a connection for each request that
// may be in the air.
func newLoader(body []byte) *loader {
	return &loader{body: body, client: &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConns:        maxOutstanding,
			MaxIdleConnsPerHost: maxOutstanding,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		},
	}}
}

// maxOutstanding bounds the requests in the air at once; a send due beyond it is counted, not made.
const maxOutstanding = 512

// openLoop sends rate requests per second for dur, each at its scheduled time whatever the answers
// before it, and waits for the answers (each bounded by the client timeout).
func (l *loader) openLoop(ctx context.Context, url string, bodies [][]byte, rate float64, dur time.Duration) (out []outcome, dropped int) {
	n := int(rate * dur.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxOutstanding)
	start := time.Now().Add(5 * time.Millisecond)
	for k := 0; k < n && ctx.Err() == nil; k++ {
		at := start.Add(time.Duration(k) * interval)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		select {
		case sem <- struct{}{}:
		default:
			dropped++
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := l.do(ctx, url, bodies[k%len(bodies)])
			lat := time.Since(at)
			<-sem
			mu.Lock()
			out = append(out, outcome{code, lat})
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out, dropped
}

// closedLoop keeps workers requests in the air for dur and returns the 200 answers per second.
func (l *loader) closedLoop(ctx context.Context, url string, workers int, dur time.Duration) float64 {
	n, elapsed := l.closedLoopN(ctx, url, workers, dur)
	return float64(n) / elapsed.Seconds()
}

// closedLoopN keeps workers requests in the air for dur and returns the 200 answers and the time taken.
func (l *loader) closedLoopN(ctx context.Context, url string, workers int, dur time.Duration) (int, time.Duration) {
	var ok sync.WaitGroup
	var mu sync.Mutex
	count := 0
	start := time.Now()
	end := start.Add(dur)
	for range workers {
		ok.Add(1)
		go func() {
			defer ok.Done()
			for time.Now().Before(end) && ctx.Err() == nil {
				if l.do(ctx, url, l.body) == http.StatusOK {
					mu.Lock()
					count++
					mu.Unlock()
				}
			}
		}()
	}
	ok.Wait()
	return count, time.Since(start)
}

// ---- phases and report ----

type result struct {
	server       string
	label        string
	rate         float64
	sent         int
	ok           int
	shed         int
	errs         int
	dropped      int
	p50, p99     time.Duration
	shedP99      time.Duration
	cpu          time.Duration // the child's CPU over the phase
	cpuPerOK     time.Duration
	allocsPerOK  float64
	kbPerOK      float64
	hwmMiB       float64
	gcs          uint32
	elapsed      time.Duration
	peakResetErr string
	codes        map[int]int
	cpuPerSent   time.Duration
	kbPerSent    float64
	size         int
}

// settle waits (at most 15 s) until the child has used under 2 ms of CPU in 200 ms: work a phase left
// behind (requests its client gave up on) must not be counted in the next.
func (c *child) settle(ctx context.Context) error {
	prev, err := c.stats()
	if err != nil {
		return err
	}
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end) && ctx.Err() == nil; {
		time.Sleep(200 * time.Millisecond)
		cur, err := c.stats()
		if err != nil {
			return err
		}
		if cur.CPUNanos-prev.CPUNanos < 2e6 {
			return nil
		}
		prev = cur
	}
	return nil
}

func phase(ctx context.Context, l *loader, c *child, label string, bodies [][]byte, rate float64, dur time.Duration) (result, error) {
	r := result{server: c.name, label: label, rate: rate}
	if err := c.settle(ctx); err != nil {
		return r, err
	}
	reset, err := c.ask("reset")
	if err != nil {
		return r, err
	}
	if reset != "ok" {
		r.peakResetErr = reset
	}
	before, err := c.stats()
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	outs, dropped := l.openLoop(ctx, c.url, bodies, rate, dur)
	r.elapsed = time.Since(t0)
	after, err := c.stats()
	if err != nil {
		return r, err
	}
	r.sent, r.dropped = len(outs), dropped
	r.codes = map[int]int{}
	if r.sent > 0 {
		r.cpuPerSent = time.Duration((after.CPUNanos - before.CPUNanos) / int64(r.sent))
		r.kbPerSent = float64(after.AllocBytes-before.AllocBytes) / 1e3 / float64(r.sent)
	}
	var okLat, shedLat []time.Duration
	for _, o := range outs {
		r.codes[o.code]++
		switch o.code {
		case http.StatusOK:
			okLat = append(okLat, o.lat)
		case http.StatusTooManyRequests:
			shedLat = append(shedLat, o.lat)
		default:
			r.errs++
		}
	}
	r.ok, r.shed = len(okLat), len(shedLat)
	r.p50, r.p99 = percentile.Of(okLat, 50), percentile.Of(okLat, 99)
	r.shedP99 = percentile.Of(shedLat, 99)
	r.cpu = time.Duration(after.CPUNanos - before.CPUNanos)
	if r.ok > 0 {
		r.cpuPerOK = time.Duration((after.CPUNanos - before.CPUNanos) / int64(r.ok))
		r.allocsPerOK = float64(after.Mallocs-before.Mallocs) / float64(r.ok)
		r.kbPerOK = float64(after.AllocBytes-before.AllocBytes) / 1e3 / float64(r.ok)
	}
	r.hwmMiB = float64(after.HWMKiB) / 1024
	r.gcs = after.NumGC - before.NumGC
	return r, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }

func run(c config) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.deadline)
	defer cancel()
	body, err := os.ReadFile(c.reqFile)
	if err != nil {
		return err
	}
	l := newLoader(body)

	var children []*child
	defer func() {
		for _, ch := range children {
			ch.stop()
		}
	}()
	start := func(kind string, wait time.Duration) (*child, error) {
		ch, err := startChild(ctx, kind, wait)
		if err == nil {
			children = append(children, ch)
		}
		return ch, err
	}
	hook, err := start("hook", hooks.DefaultQueueWait)
	if err != nil {
		return err
	}
	fl, err := start("floor", 0)
	if err != nil {
		return err
	}
	variants := map[time.Duration]*child{hooks.DefaultQueueWait: hook}
	for _, w := range c.compareWaits {
		if variants[w] == nil {
			if variants[w], err = start("hook", w); err != nil {
				return err
			}
		}
	}
	for _, ch := range children {
		if ch == fl {
			continue
		}
		if err := checkAnswer(ctx, l, ch.url, c.respFile); err != nil {
			return fmt.Errorf("%s: %w", ch.name, err)
		}
	}
	if code := l.do(ctx, fl.url, body); code != http.StatusOK {
		return fmt.Errorf("floor answered %d", code)
	}
	fmt.Fprintf(os.Stderr, "request %s (%d bytes); GOMAXPROCS %d; hook max in flight %d, queue %d x %s\n",
		c.reqFile, len(body), runtime.GOMAXPROCS(0), hooks.DefaultMaxInFlight(), hooks.DefaultMaxInFlight(), hooks.DefaultQueueWait)

	// Warm each server up (not measured), then measure capacity closed-loop: as many workers as the hook
	// computes at once, so the hook never sheds here.
	workers := hooks.DefaultMaxInFlight()
	for _, ch := range children {
		l.closedLoop(ctx, ch.url, workers, 500*time.Millisecond)
	}
	hookCap := l.closedLoop(ctx, hook.url, workers, c.capDur)
	floorCap := l.closedLoop(ctx, fl.url, workers, c.capDur)
	fmt.Fprintf(os.Stderr, "capacity (closed loop, %d workers, %s): hook %.0f/s, floor %.0f/s\n", workers, c.capDur, hookCap, floorCap)

	measure := func(ch *child, label string, bodies [][]byte, rate float64, dur time.Duration) (result, error) {
		if ctx.Err() != nil {
			return result{}, ctx.Err()
		}
		r, err := phase(ctx, l, ch, label, bodies, rate, dur)
		if err != nil {
			return r, fmt.Errorf("%s %s at %.0f/s: %w", ch.name, label, rate, err)
		}
		fmt.Fprintf(os.Stderr, "%-22s %-12s %5.0f/s: codes %v, p50 %s, p99 %s, cpu/200 %s, peak RSS %.1f MiB\n",
			r.server, r.label, r.rate, r.codes, ms(r.p50), ms(r.p99), ms(r.cpuPerOK), r.hwmMiB)
		return r, nil
	}
	var results []result
	phases := slices.Clone(c.rates)
	if c.overload > 0 {
		phases = append(phases, min(c.overload*hookCap, c.maxRate))
	}
	for i, rate := range phases {
		label := ""
		if i >= len(c.rates) {
			label = fmt.Sprintf("%gx capacity", c.overload)
		}
		for _, ch := range []*child{hook, fl} {
			r, err := measure(ch, label, [][]byte{body}, rate, c.dur)
			if err != nil {
				return err
			}
			results = append(results, r)
		}
	}

	// The queue waits compared at the same rates, alternating, so that a change in the machine's other
	// load falls on every variant alike.
	var compared []result
	if len(c.compareWaits) > 1 && c.compareReps > 0 {
		for _, f := range []float64{c.compareNear, c.overload} {
			if f <= 0 {
				continue
			}
			rate := min(f*hookCap, c.maxRate)
			label := fmt.Sprintf("%gx capacity", f)
			for range c.compareReps {
				for _, w := range c.compareWaits {
					r, err := measure(variants[w], label, [][]byte{body}, rate, c.compareDur)
					if err != nil {
						return err
					}
					compared = append(compared, r)
				}
			}
		}
	}

	var hostile []result
	if c.hostileRate > 0 {
		for _, h := range hostileBodies(body) {
			r, err := measure(hook, h.name, [][]byte{h.body}, c.hostileRate, c.hostileDur)
			if err != nil {
				return err
			}
			r.size = len(h.body)
			hostile = append(hostile, r)
		}
	}
	report(os.Stdout, results, hookCap, floorCap, c)
	reportCompared(os.Stdout, compared, c)
	reportHostile(os.Stdout, hostile, c.hostileRate, c.hostileDur)
	return nil
}

type namedBody struct {
	name string
	body []byte
}

// hostileBodies are requests no cluster makes, each built from the real one by replacing its Pods:
// what goal 1 of the load issue is about (one 8 MB request of 45k small objects took 500 MB). The
// 1000-object one is the largest the object bound lets through, so it is decoded.
func hostileBodies(real []byte) []namedBody {
	var req map[string]json.RawMessage
	_ = json.Unmarshal(real, &req)
	var children map[string]map[string]json.RawMessage
	_ = json.Unmarshal(req["children"], &children)
	nChildren := 0
	for _, g := range children {
		nChildren += len(g)
	}
	withPods := func(pods string) []byte {
		b := bytes.Buffer{}
		b.WriteString("{")
		for k, v := range req {
			if k == "related" {
				continue
			}
			fmt.Fprintf(&b, "%q:%s,", k, v)
		}
		fmt.Fprintf(&b, `"related":{%q:{},%q:{%s}}}`, wire.KeyPVC, wire.KeyPod, pods)
		return b.Bytes()
	}
	pod := func(i int) string {
		return fmt.Sprintf(`"demo-%d":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"demo-%d","namespace":"prod","labels":{"app.kubernetes.io/instance":"demo"}},"spec":{"containers":[{"name":"etcd"}]}}`, i, i)
	}
	many := func(n int) []byte {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(pod(i))
		}
		return withPods(b.String())
	}
	dense := `"demo-0":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"demo-0","namespace":"prod"},"spec":{"containers":[` +
		strings.Repeat(`{},`, 320000) + `{}]}}`
	return []namedBody{
		{"45k objects", many(45000)},
		{"1001 objects", many(1001)},
		{"1000 objects (accepted)", many(hooks.MaxObjects - nChildren)},
		{"320k array elements, 1 MB", withPods(dense)},
	}
}

func reportHostile(w io.Writer, rs []result, rate float64, dur time.Duration) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nHostile requests to the hook, %.0f/s for %s each:\n\n", rate, dur)
	fmt.Fprintln(w, "| request | body | sent | answers | CPU / request | KB alloc / request | peak RSS |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range rs {
		var codes []string
		for _, c := range slices.Sorted(maps.Keys(r.codes)) {
			name := strconv.Itoa(c)
			if c == 0 {
				name = "transport error"
			}
			codes = append(codes, fmt.Sprintf("%d x %s", r.codes[c], name))
		}
		fmt.Fprintf(w, "| %s | %.2f MB | %d | %s | %s | %.0f | %.1f MiB |\n", r.label, float64(r.size)/1e6, r.sent,
			strings.Join(codes, ", "), ms(r.cpuPerSent), r.kbPerSent, r.hwmMiB)
	}
}

// checkAnswer posts the request once and compares the answer with the expected one, so that the load
// measures the real decision and not an error path.
func checkAnswer(ctx context.Context, l *loader, url, respFile string) error {
	want, err := os.ReadFile(respFile)
	if err != nil {
		return err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(l.body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("hook answered %d: %s", resp.StatusCode, got)
	}
	var v any
	if err := json.Unmarshal(got, &v); err != nil {
		return err
	}
	var canon bytes.Buffer
	enc := json.NewEncoder(&canon)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	if !bytes.Equal(canon.Bytes(), want) {
		return errors.New("hook's answer differs from " + respFile)
	}
	return nil
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func report(w io.Writer, rs []result, hookCap, floorCap float64, c config) {
	fmt.Fprintf(w, "Capacity (closed loop, %d in flight): hook %.0f req/s, floor %.0f req/s. Each open-loop phase %s.\n\n",
		hooks.DefaultMaxInFlight(), hookCap, floorCap, c.dur)
	fmt.Fprintln(w, "| server | offered | sent | 200 | 429 | errors | p50 (200) | p99 (200) | p99 (429) | CPU / 200 | allocs / 200 | KB alloc / 200 | peak RSS |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range rs {
		offered := fmt.Sprintf("%.0f/s", r.rate)
		if r.label != "" {
			offered += " (" + r.label + ")"
		}
		errs := strconv.Itoa(r.errs)
		if r.dropped > 0 {
			errs += fmt.Sprintf(" (+%d not sent)", r.dropped)
		}
		shedP99 := "-"
		if r.shed > 0 {
			shedP99 = ms(r.shedP99)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %s | %s | %s | %s | %s | %.0f | %.0f | %.1f MiB |\n",
			r.server, offered, r.sent, r.ok, r.shed, errs, ms(r.p50), ms(r.p99), shedP99, ms(r.cpuPerOK), r.allocsPerOK, r.kbPerOK, r.hwmMiB)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| offered | hook CPU / request | floor CPU / request | hook / floor |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	find := func(server, label string, rate float64) *result {
		for i := range rs {
			if rs[i].server == server && rs[i].label == label && rs[i].rate == rate {
				return &rs[i]
			}
		}
		return nil
	}
	worst := 0.0
	for _, r := range rs {
		if r.server != "hook" {
			continue
		}
		f := find("floor", r.label, r.rate)
		if f == nil || f.cpuPerOK == 0 || r.cpuPerOK == 0 {
			continue
		}
		ratio := float64(r.cpuPerOK) / float64(f.cpuPerOK)
		worst = max(worst, ratio)
		offered := fmt.Sprintf("%.0f/s", r.rate)
		if r.label != "" {
			offered += " (" + r.label + ")"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.1fx |\n", offered, ms(r.cpuPerOK), ms(f.cpuPerOK), ratio)
	}
	// The fixed rates together: a stall of the shared machine during one phase weighs less.
	var hookCPU, floorCPU time.Duration
	var hookOK, floorOK int
	for _, r := range rs {
		if r.label != "" {
			continue
		}
		switch r.server {
		case "hook":
			hookCPU, hookOK = hookCPU+r.cpu, hookOK+r.ok
		case "floor":
			floorCPU, floorOK = floorCPU+r.cpu, floorOK+r.ok
		}
	}
	pooled := 0.0
	if hookOK > 0 && floorOK > 0 && floorCPU > 0 {
		h, f := hookCPU/time.Duration(hookOK), floorCPU/time.Duration(floorOK)
		pooled = float64(h) / float64(f)
		fmt.Fprintf(w, "| the %d rates together | %s | %s | %.2fx |\n", len(c.rates), ms(h), ms(f), pooled)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "- CPU per 9-member sync <= 1.3x the floor's: %s (%.2fx over the %d rates; worst single phase %.1fx)\n",
		verdict(pooled > 0 && pooled <= 1.3), pooled, len(c.rates), worst)
	for _, rate := range c.rates {
		if rate != 400 {
			continue
		}
		if r := find("hook", "", rate); r != nil {
			fmt.Fprintf(w, "- p99 < 10 ms at 400 req/s: %s (p99 %s; %d of %d answered 200, %d shed)\n",
				verdict(r.p99 < 10*time.Millisecond && r.ok == r.sent), ms(r.p99), r.ok, r.sent, r.shed)
		}
	}
	for _, r := range rs {
		if r.server == "hook" && r.label != "" {
			fmt.Fprintf(w, "- under %s (%.0f req/s) peak RSS < 100 MiB, with shedding: %s (%.1f MiB; %d shed, %d errors)\n",
				r.label, r.rate, verdict(r.hwmMiB < 100 && r.shed > 0 && r.errs == 0), r.hwmMiB, r.shed, r.errs)
		}
	}
	for _, r := range rs {
		if r.peakResetErr != "" {
			fmt.Fprintf(w, "- note: peak RSS could not be reset (%s): figures are peaks since start\n", r.peakResetErr)
			break
		}
	}
}

// reportCompared gives, per queue wait and rate, the medians over the alternating repetitions.
func reportCompared(w io.Writer, rs []result, c config) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nQueue in front of the %d computations (%d waiters), %d alternating runs of %s each; medians, and the worst peak RSS:\n\n",
		hooks.DefaultMaxInFlight(), hooks.DefaultMaxInFlight(), c.compareReps, c.compareDur)
	fmt.Fprintln(w, "| server | offered | 200 | 429 | errors | p50 (200) | p99 (200) | p99 (429) | peak RSS |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	type key struct {
		server, label string
		rate          float64
	}
	var order []key
	groups := map[key][]result{}
	for _, r := range rs {
		k := key{r.server, r.label, r.rate}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	slices.SortStableFunc(order, func(a, b key) int { return strings.Compare(a.label, b.label) })
	for _, k := range order {
		g := groups[k]
		med := func(f func(result) float64) float64 {
			v := make([]float64, len(g))
			for i, r := range g {
				v[i] = f(r)
			}
			slices.Sort(v)
			return v[len(v)/2]
		}
		hwm := 0.0
		for _, r := range g {
			hwm = max(hwm, r.hwmMiB)
		}
		shedP99 := "-"
		if med(func(r result) float64 { return float64(r.shed) }) > 0 {
			shedP99 = ms(time.Duration(med(func(r result) float64 { return float64(r.shedP99) })))
		}
		fmt.Fprintf(w, "| %s | %.0f/s (%s) | %.0f | %.0f | %.0f | %s | %s | %s | %.1f MiB |\n", k.server, k.rate, k.label,
			med(func(r result) float64 { return float64(r.ok) }), med(func(r result) float64 { return float64(r.shed) }),
			med(func(r result) float64 { return float64(r.errs) }),
			ms(time.Duration(med(func(r result) float64 { return float64(r.p50) }))),
			ms(time.Duration(med(func(r result) float64 { return float64(r.p99) }))), shedP99, hwm)
	}
}
