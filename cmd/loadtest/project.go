package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// The projection (-simulate -project 1000,10000): what a fleet of N EtcdClusters asks of one hook and one
// Metacontroller, from the hook's per-sync CPU this simulation measured and the per-cluster costs the
// fleet scenario measured under the real Metacontroller (e2e/RESULTS-fleet.md, TestFleet). It is
// arithmetic on measured figures, not a run at that size: the limits it names are where to look.

// fleetCosts are the fleet scenario's measured costs, the projection's inputs.
type fleetCosts struct {
	// syncRate: hook syncs per second per EtcdCluster, the fleet idling (Lease renewals, pod readiness
	// and resyncs wake Metacontroller).
	syncRate float64
	// mcCPU: Metacontroller's CPU per sync (its informers, 3-way merges, status writes).
	mcCPU time.Duration
	// mcRSSPer: Metacontroller's resident memory per EtcdCluster (its RSS over the fleet's size: the
	// informer caches of the parent and its children; an upper bound, the base included).
	mcRSSPer float64
	// workers: Metacontroller's --workers; syncWall: one sync's time in a worker (hook round trip).
	workers  int
	syncWall time.Duration
}

// parseSizes reads -project: cluster counts, comma-separated.
func parseSizes(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 1000000 {
			return nil, fmt.Errorf("-project %q: want cluster counts from 1 to 1000000", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// Where one Metacontroller stops being enough: its leader does every sync (a standby shares nothing),
// so one core of it, workers more than 70% busy, or 2 GiB of caches (a pod's usual limit) end it.
const (
	mcCoreLimit   = 1.0
	mcWorkerLimit = 0.7
	mcRSSLimitMiB = 2048
)

// projection is one fleet size's figures.
type projection struct {
	clusters                         int
	syncs, hookCores, mcCores, mcRSS float64
	workerBusy                       float64
	hookReplicas                     int
	enough                           bool
	limit                            string
}

func project(n int, hookCPU time.Duration, budget float64, f fleetCosts) projection {
	p := projection{clusters: n}
	p.syncs = float64(n) * f.syncRate
	p.hookCores = p.syncs * hookCPU.Seconds()
	p.hookReplicas = max(2, int(p.hookCores/budget)+1) // two at least: the chart's, for availability
	p.mcCores = p.syncs * f.mcCPU.Seconds()
	p.mcRSS = float64(n) * f.mcRSSPer
	p.workerBusy = p.syncs * f.syncWall.Seconds() / float64(max(f.workers, 1))
	var limits []string
	if p.mcCores > mcCoreLimit {
		limits = append(limits, fmt.Sprintf("%.1f cores", p.mcCores))
	}
	if p.workerBusy > mcWorkerLimit {
		limits = append(limits, fmt.Sprintf("workers %.0f%% busy", 100*p.workerBusy))
	}
	if p.mcRSS > mcRSSLimitMiB {
		limits = append(limits, fmt.Sprintf("%.1f GiB of caches", p.mcRSS/1024))
	}
	p.enough = len(limits) == 0
	p.limit = strings.Join(limits, ", ")
	return p
}

func reportProjection(w io.Writer, sizes []int, hookCPU time.Duration, budget float64, f fleetCosts) {
	fmt.Fprintf(w, "\nProjection from the fleet scenario's costs (%.3f syncs/s per idle EtcdCluster, %s of Metacontroller CPU per sync, %.1f MiB of Metacontroller memory per cluster, %d workers at %s a sync) and this run's %s of hook CPU per idle sync:\n\n",
		f.syncRate, ms(f.mcCPU), f.mcRSSPer, f.workers, ms(f.syncWall), ms(hookCPU))
	fmt.Fprintln(w, "| EtcdClusters | syncs/s | hook cores (replicas at the budget) | Metacontroller cores | Metacontroller memory | workers busy | one Metacontroller |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- |")
	last := 0
	for _, n := range sizes {
		p := project(n, hookCPU, budget, f)
		verdict := "enough"
		if !p.enough {
			verdict = "not enough: " + p.limit
		} else {
			last = n
		}
		fmt.Fprintf(w, "| %d | %.0f | %.2f (%d) | %.2f | %.0f MiB | %.0f%% | %s |\n", n, p.syncs, p.hookCores, p.hookReplicas, p.mcCores, p.mcRSS, 100*p.workerBusy, verdict)
	}
	// The largest fleet one Metacontroller holds, each limit solved for n.
	perCluster := []float64{
		mcCoreLimit / (f.syncRate * f.mcCPU.Seconds()),
		mcWorkerLimit * float64(f.workers) / (f.syncRate * f.syncWall.Seconds()),
		mcRSSLimitMiB / f.mcRSSPer,
	}
	most := perCluster[0]
	for _, v := range perCluster[1:] {
		most = min(most, v)
	}
	fmt.Fprintf(w, "\nOne Metacontroller holds about %.0f EtcdClusters (the first of its limits: one core %.0f, workers 70%% busy %.0f, 2 GiB %.0f)", most, perCluster[0], perCluster[1], perCluster[2])
	if last > 0 {
		fmt.Fprintf(w, "; of the sizes asked, %d was the largest within them", last)
	}
	fmt.Fprintln(w, ". Beyond it, shard: a CompositeController per shard with spec.parentResource.labelSelector on a label of the EtcdClusters, each served by its own Metacontroller started with --target-label-selector for that controller (docs/install.md, Metacontroller settings).")
}

// The fleet scenario's figures (TestFleet, e2e/RESULTS-fleet.md of 2026-11-27: 100 EtcdClusters, 25 of
// them paused, idling under Metacontroller with install/metacontroller/settings.yaml): the projection's
// defaults.
//   - syncRate: 8.1 syncs/s over 100 clusters. The run predates the paused clusters' idle pace (60 s, not
//     5 s), so this is an upper bound: about 0.035 without that.
//   - mcCPU: 4% of a core over 8.1 syncs/s, both replicas counted.
//   - mcRSS: the release defaults' single replica held 99 MiB for the 100 clusters, its base included
//     (an upper bound per cluster).
//   - syncWall is an estimate, not a measurement: the hook answers an idle sync in about 2 ms
//     (docs/performance.md), and an idle sync writes nothing; 10 ms leaves room for the round trip.
const (
	fleetSyncRate = 0.081
	fleetMCCPU    = 4900 * time.Microsecond
	fleetMCRSS    = 1.0
	fleetSyncWall = 10 * time.Millisecond
)
