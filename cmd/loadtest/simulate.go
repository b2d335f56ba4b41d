package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/etcdhook/etcdhook/hooks"
	"github.com/etcdhook/etcdhook/internal/percentile"
)

// The simulation (-simulate): many clusters syncing at their own rates against one hook replica, open
// loop, each replaying a recorded request: idle clusters a settled 9-member cluster's request
// (hooks/testdata/bench/nine-members-idle), busy ones the scaling 9-member request. Every cluster
// syncs at its rate from a random phase, so the hook sees the steady mix a fleet sends, not bursts.

type simConfig struct {
	idleReq, idleResp string
	busyReq, busyResp string
	idle, busy        int
	idleRate          float64 // syncs per second, per cluster
	busyRate          float64
	dur               time.Duration
	calDur            time.Duration
	budget            float64 // the share of a core the statement lets the hook use
	deadline          time.Duration
	// project: fleet sizes to project (project.go) from the fleet scenario's costs.
	project []int
	fleet   fleetCosts
}

// maxSimRun bounds the whole simulation: the open-loop run, the two calibrations and 10 s for the
// rest (start, checks, warm-up, waiting for the last answers).
const maxSimRun = 60 * time.Second

func (c simConfig) validate() error {
	switch {
	case c.idle < 0 || c.busy < 0 || c.idle+c.busy == 0 || c.idle+c.busy > 100000:
		return fmt.Errorf("clusters: want 1 to 100000 in all, have %d idle and %d busy", c.idle, c.busy)
	case c.idleRate <= 0 || c.busyRate <= 0 || c.idleRate > 10 || c.busyRate > 10:
		return fmt.Errorf("rates: want (0, 10] syncs/s per cluster")
	case c.dur <= 0 || c.calDur <= 0 || c.dur+2*c.calDur > maxSimRun-10*time.Second:
		return fmt.Errorf("-sim-duration + 2 x -sim-calibrate: want at most %s", maxSimRun-10*time.Second)
	case float64(c.idle)*c.idleRate+float64(c.busy)*c.busyRate > 2000:
		return fmt.Errorf("offered load over 2000 syncs/s")
	}
	return nil
}

// send is one scheduled sync.
type send struct {
	at   time.Duration
	busy bool
}

// schedule lists every sync of every cluster within dur, each cluster at its rate from a random phase.
func schedule(c simConfig, rng *rand.Rand) []send {
	var out []send
	add := func(n int, rate float64, busy bool) {
		period := time.Duration(float64(time.Second) / rate)
		for range n {
			for at := time.Duration(rng.Int64N(int64(period))); at < c.dur; at += period {
				out = append(out, send{at, busy})
			}
		}
	}
	add(c.idle, c.idleRate, false)
	add(c.busy, c.busyRate, true)
	slices.SortFunc(out, func(a, b send) int { return int(a.at - b.at) })
	return out
}

type classResult struct {
	sent, ok, shed, errs int
	p50, p99             time.Duration
}

type simResult struct {
	idle, busy   classResult
	dropped      int
	elapsed      time.Duration
	cpu          time.Duration
	hwmMiB       float64
	idleCPU      time.Duration // per sync, closed-loop calibration
	busyCPU      time.Duration
	procs        int
	resetErr     string
	gcs          uint32
	allocsPerOK  float64
	offeredTotal float64
}

func simulate(c simConfig) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.deadline)
	defer cancel()
	idleBody, err := os.ReadFile(c.idleReq)
	if err != nil {
		return err
	}
	busyBody, err := os.ReadFile(c.busyReq)
	if err != nil {
		return err
	}
	l := newLoader(idleBody)
	hook, err := startChild(ctx, "hook", hooks.DefaultQueueWait)
	if err != nil {
		return err
	}
	defer hook.stop()
	for _, b := range []struct {
		body []byte
		resp string
	}{{idleBody, c.idleResp}, {busyBody, c.busyResp}} {
		l.body = b.body
		if err := checkAnswer(ctx, l, hook.url, b.resp); err != nil {
			return err
		}
	}

	// Warm up, then the CPU one sync of each kind costs the hook, closed loop (as many in the air as it
	// computes at once): the per-cluster cost the statement scales.
	r := simResult{procs: runtime.GOMAXPROCS(0)}
	workers := hooks.DefaultMaxInFlight()
	l.body = busyBody
	l.closedLoop(ctx, hook.url, workers, 500*time.Millisecond)
	for _, cal := range []struct {
		body []byte
		out  *time.Duration
	}{{idleBody, &r.idleCPU}, {busyBody, &r.busyCPU}} {
		if err := hook.settle(ctx); err != nil {
			return err
		}
		before, err := hook.stats()
		if err != nil {
			return err
		}
		l.body = cal.body
		n, _ := l.closedLoopN(ctx, hook.url, workers, c.calDur)
		after, err := hook.stats()
		if err != nil {
			return err
		}
		if n > 0 {
			*cal.out = time.Duration((after.CPUNanos - before.CPUNanos) / int64(n))
		}
	}

	sends := schedule(c, rand.New(rand.NewPCG(1, 2)))
	r.offeredTotal = float64(c.idle)*c.idleRate + float64(c.busy)*c.busyRate
	fmt.Fprintf(os.Stderr, "simulation: %d idle clusters at %g/s and %d busy at %g/s: %.0f syncs/s, %d in %s\n",
		c.idle, c.idleRate, c.busy, c.busyRate, r.offeredTotal, len(sends), c.dur)
	if err := hook.settle(ctx); err != nil {
		return err
	}
	if reset, err := hook.ask("reset"); err != nil {
		return err
	} else if reset != "ok" {
		r.resetErr = reset
	}
	before, err := hook.stats()
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var idleLat, busyLat []time.Duration
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxOutstanding)
	t0 := time.Now().Add(5 * time.Millisecond)
	for _, s := range sends {
		if ctx.Err() != nil {
			break
		}
		at := t0.Add(s.at)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		cr := &r.idle
		body := idleBody
		if s.busy {
			cr, body = &r.busy, busyBody
		}
		select {
		case sem <- struct{}{}:
		default:
			r.dropped++
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := l.do(ctx, hook.url, body)
			lat := time.Since(at)
			<-sem
			mu.Lock()
			defer mu.Unlock()
			cr.sent++
			switch code {
			case http.StatusOK:
				cr.ok++
				if s.busy {
					busyLat = append(busyLat, lat)
				} else {
					idleLat = append(idleLat, lat)
				}
			case http.StatusTooManyRequests:
				cr.shed++
			default:
				cr.errs++
			}
		}()
	}
	wg.Wait()
	r.elapsed = time.Since(t0)
	after, err := hook.stats()
	if err != nil {
		return err
	}
	r.cpu = time.Duration(after.CPUNanos - before.CPUNanos)
	r.hwmMiB = float64(after.HWMKiB) / 1024
	r.gcs = after.NumGC - before.NumGC
	if ok := r.idle.ok + r.busy.ok; ok > 0 {
		r.allocsPerOK = float64(after.Mallocs-before.Mallocs) / float64(ok)
	}
	r.idle.p50, r.idle.p99 = percentile.Of(idleLat, 50), percentile.Of(idleLat, 99)
	r.busy.p50, r.busy.p99 = percentile.Of(busyLat, 50), percentile.Of(busyLat, 99)
	reportSim(os.Stdout, c, r)
	return nil
}

func reportSim(w io.Writer, c simConfig, r simResult) {
	secs := r.elapsed.Seconds()
	fmt.Fprintf(w, "Simulation: %d idle 9-member clusters at %g sync/s each and %d scaling ones at %g sync/s each (%.0f syncs/s offered), open loop for %s; GOMAXPROCS %d.\n\n",
		c.idle, c.idleRate, c.busy, c.busyRate, r.offeredTotal, c.dur, r.procs)
	fmt.Fprintln(w, "| clusters | syncs sent | 200 | 429 | errors | achieved | p50 (200) | p99 (200) |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	row := func(name string, cr classResult) {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %.1f/s | %s | %s |\n", name, cr.sent, cr.ok, cr.shed, cr.errs,
			float64(cr.ok)/secs, ms(cr.p50), ms(cr.p99))
	}
	row(fmt.Sprintf("%d idle", c.idle), r.idle)
	row(fmt.Sprintf("%d scaling", c.busy), r.busy)
	ok := r.idle.ok + r.busy.ok
	share := r.cpu.Seconds() / secs
	fmt.Fprintf(w, "\nHook: %.2f cores of CPU on average (%.0f%% of its %d), %s CPU and %.0f allocations per answered sync, %d GCs, peak RSS %.1f MiB",
		share, 100*share/float64(r.procs), r.procs, ms(time.Duration(float64(r.cpu)/float64(max(ok, 1)))), r.allocsPerOK, r.gcs, r.hwmMiB)
	if r.dropped > 0 {
		fmt.Fprintf(w, "; %d syncs not sent (%d already in the air)", r.dropped, maxOutstanding)
	}
	if r.resetErr != "" {
		fmt.Fprintf(w, " (peak RSS not reset: %s)", r.resetErr)
	}
	fmt.Fprintln(w, ".")
	fmt.Fprintf(w, "Calibration (closed loop, %s each): %s of hook CPU per idle sync, %s per scaling sync.\n", c.calDur, ms(r.idleCPU), ms(r.busyCPU))
	if r.idleCPU <= 0 || r.busyCPU <= 0 {
		return
	}
	// A sync costs more CPU in the open loop than closed loop (more connections and wake-ups, the same
	// GC): each kind's calibrated cost is scaled by what the mix cost against what it predicted.
	predicted := float64(r.idle.ok)*r.idleCPU.Seconds() + float64(r.busy.ok)*r.busyCPU.Seconds()
	scale := 1.0
	if predicted > 0 {
		scale = r.cpu.Seconds() / predicted
	}
	idleCost := time.Duration(float64(r.idleCPU) * scale)
	busyCost := time.Duration(float64(r.busyCPU) * scale)
	// One core at the budgeted share: clusters of one kind that fit.
	idlePerCore := c.budget / (c.idleRate * idleCost.Seconds())
	busyPerCore := c.budget / (c.busyRate * busyCost.Seconds())
	fmt.Fprintf(w, "Open loop, the mix cost %.2fx the calibration: %s per idle sync, %s per scaling sync.\n", scale, ms(idleCost), ms(busyCost))
	fmt.Fprintf(w, "\nOne hook replica serves, per core it is given (at most %.0f%% busy, the rest for bursts): about %.0f idle 9-member clusters at %g sync/s, or %.0f scaling ones at %g sync/s, or a mix with idle/%.0f + scaling/%.0f <= 1. "+
		"The measured mix (%d idle + %d scaling) used %.2f cores.\n",
		100*c.budget, idlePerCore, c.idleRate, busyPerCore, c.busyRate, idlePerCore, busyPerCore, c.idle, c.busy, share)
	if len(c.project) > 0 {
		reportProjection(w, c.project, idleCost, c.budget, c.fleet)
	}
}
