//go:build e2e

package e2e

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/percentile"
)

// The fleet scenario (issue 26 §2): many EtcdClusters under one Metacontroller, measured with the
// settings install/metacontroller/settings.yaml ships and with the release's defaults, in the same run. It is the
// full tier's (make e2e), not CI's: about 15 minutes, and a node near its pod limit.

var (
	fleetSize    = flag.Int("e2e.fleet", 100, "EtcdClusters in the fleet scenario (TestFleet)")
	fleetResults = flag.String("e2e.fleet-results", "RESULTS-fleet.md", "where TestFleet writes its figures (beside RESULTS.md, which CI's tier rewrites without them)")
)

// fleetComposition: mostly size 1 with small requests, some paused (the hook creates nothing for them),
// a few of size 3. 70 + 5*3 = 85 member pods for 100 clusters, and 10 more while 10 scale 1 -> 2: the
// local node allows 110 pods.
func fleetComposition(n int) (three, paused int) { return n / 20, n / 4 }

const fleetScaling = 10

// fleetMember is one EtcdCluster of the fleet, in the fleet's namespace.
func (s *scenario) fleetMember(i int) *scenario {
	c := *s
	c.name = fmt.Sprintf("c%03d", i)
	return &c
}

func fleetSpec(size int, paused bool) map[string]any {
	sp := spec(size, *etcdVersion)
	sp["resources"] = map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "32Mi"}}
	if paused {
		sp["paused"] = true
	}
	return sp
}

func TestFleet(t *testing.T) {
	n := *fleetSize
	three, paused := fleetComposition(n)
	s := newScenario(t, "fleet")
	sizeOf := func(i int) int {
		if i < three {
			return 3
		}
		return 1
	}
	isPaused := func(i int) bool { return i >= three && i < three+paused }

	// Created ten at a time, each batch settled before the next (a paused one only gets its status).
	// The bound is the scheduler's: a pod found unschedulable while its claim was still being bound can
	// wait up to 5 minutes for its next try on a loaded node (podMaxInUnschedulablePodsDuration).
	const createTimeout = 7 * time.Minute
	start := time.Now()
	for b := 0; b < n; b += 10 {
		for i := b; i < min(b+10, n); i++ {
			s.fleetMember(i).apply(fleetSpec(sizeOf(i), isPaused(i)))
		}
		for i := b; i < min(b+10, n); i++ {
			m := s.fleetMember(i)
			if isPaused(i) {
				m.waitFor(m.name+" paused", createTimeout, func() bool { return m.cluster().Status.Phase == api.PhasePaused })
				continue
			}
			m.waitFor(m.name+" settled", createTimeout, m.settled(sizeOf(i)))
		}
	}
	created := time.Since(start)
	t.Logf("fleet of %d created in %s", n, created.Round(time.Second))

	// The clusters that take part: changes on size-1 clusters after the scaling ones.
	first := three + paused
	scaling := make([]int, 0, fleetScaling)
	for i := first; i < first+fleetScaling; i++ {
		scaling = append(scaling, i)
	}
	probes := make([]int, 0, 20)
	for i := first + fleetScaling; i < n && len(probes) < 20; i++ {
		probes = append(probes, i)
	}
	require.Len(t, probes, 20, "the fleet is too small for 20 latency probes")

	var report []string
	round := 0
	measure := func(settings string) {
		idle := s.fleetIdle(time.Minute)
		var toSTS, toStatus []time.Duration
		for _, i := range probes[:10] {
			a, b := s.fleetMember(i).timeChange(round)
			toSTS, toStatus = append(toSTS, a), append(toStatus, b)
		}
		// 10 clusters scale 1 -> 2 at once while 10 others change.
		from, to := 1, 2
		busy := s.fleetIdleStart()
		scaled := make([]time.Duration, len(scaling))
		var wg sync.WaitGroup
		for k, i := range scaling {
			s.fleetMember(i).apply(map[string]any{"size": int64(to)})
			wg.Add(1)
			go func() {
				defer wg.Done()
				began := time.Now()
				m := s.fleetMember(i)
				for time.Since(began) < stepTimeout && !m.settled(to)() {
					time.Sleep(500 * time.Millisecond)
				}
				scaled[k] = time.Since(began)
			}()
		}
		var busySTS, busyStatus []time.Duration
		for _, i := range probes[10:] {
			a, b := s.fleetMember(i).timeChange(round)
			busySTS, busyStatus = append(busySTS, a), append(busyStatus, b)
		}
		wg.Wait()
		for k, i := range scaling {
			require.Less(t, scaled[k], stepTimeout, "c%03d did not settle at size %d", i, to)
		}
		load := busy.stop()
		report = append(report, fmt.Sprintf("| %s, idle | %s | %s | %s |", settings, idle, pct(toSTS), pct(toStatus)),
			fmt.Sprintf("| %s, %d clusters scaling %d -> %d (settled p50 %s, p99 %s) | %s | %s | %s |", settings, fleetScaling, from, to,
				q(scaled, 50), q(scaled, 99), load, pct(busySTS), pct(busyStatus)))
		t.Logf("%s\n%s", report[len(report)-2], report[len(report)-1])
		round++
	}
	measure("shipped settings (install/metacontroller/settings.yaml)")
	// The scaled clusters back to size 1 (not measured), then the same again under the release defaults.
	for _, i := range scaling {
		s.fleetMember(i).apply(map[string]any{"size": int64(1)})
	}
	for _, i := range scaling {
		m := s.fleetMember(i)
		m.waitFor(m.name+" back to size 1", stepTimeout, m.settled(1))
	}
	s.setMetacontrollerDefaults(t)
	t.Cleanup(func() { s.restoreMetacontrollerSettings(t) })
	measure("release defaults (workers 5, QPS 5, burst 10, one replica)")

	body := fmt.Sprintf("# Fleet under one Metacontroller\n\nWritten by TestFleet (make e2e) on %s: fleet of %d EtcdClusters (%d of size 3, %d paused, %d of size 1; requests 10m CPU, 32Mi): created ten at a time in %s.\n\n"+
		"| Metacontroller | hook syncs/s, CPU and RSS of Metacontroller and the hook over the window (every replica) | spec change to StatefulSet updated, p50 / p99 | spec change to status observed, p50 / p99 |\n|---|---|---|---|\n%s\n",
		time.Now().UTC().Format("2006-01-02"), n, three, paused, n-three-paused, created.Round(time.Second), strings.Join(report, "\n"))
	require.NoError(t, os.WriteFile(*fleetResults, []byte(body), 0o644))
	t.Log(body)
}

// timeChange changes the spec in a way that updates the StatefulSet (an etcd option), and times it to the
// StatefulSet's new generation and to status.observedGeneration.
func (s *scenario) timeChange(round int) (toSTS, toStatus time.Duration) {
	s.t.Helper()
	before := read(s, "the StatefulSet", func() (int64, error) {
		sts, err := s.e.kube.AppsV1().StatefulSets(s.ns).Get(s.ctx, s.name, metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		return sts.Generation, nil
	})
	start := time.Now()
	s.apply(map[string]any{"options": map[string]any{"snapshot-count": fmt.Sprint(100000 + round)}})
	gen := s.cluster().Generation
	toSTS = s.waitFor("the StatefulSet updated", stepTimeout, func() bool {
		sts, err := s.e.kube.AppsV1().StatefulSets(s.ns).Get(s.ctx, s.name, metav1.GetOptions{})
		return err == nil && sts.Generation > before
	})
	s.waitFor("the status observed", stepTimeout, func() bool { return s.cluster().Status.ObservedGeneration >= gen })
	return toSTS, time.Since(start)
}

// window measures Metacontroller's and the hook's processes (their own /metrics: the Go process
// collector) and the hook's syncs between its start and stop.
type window struct {
	s     *scenario
	start time.Time
	a     procStats
}

type procStats struct{ mcCPU, hookCPU, mcRSS, hookRSS, syncs float64 }

func (s *scenario) fleetIdleStart() *window {
	return &window{s: s, start: time.Now(), a: s.procStats()}
}

func (w *window) stop() string {
	b := w.s.procStats()
	secs := time.Since(w.start).Seconds()
	// A counter that went down is a process that restarted in the window: no figure, rather than a wrong one.
	rate := func(from, to float64, unit string, scale float64) string {
		if to < from {
			return "n/a (a pod restarted in the window)"
		}
		return fmt.Sprintf("%.1f%s", scale*(to-from)/secs, unit)
	}
	return fmt.Sprintf("%s; Metacontroller %s CPU, %.0f MiB; hook %s CPU, %.0f MiB",
		rate(w.a.syncs, b.syncs, " syncs/s", 1), rate(w.a.mcCPU, b.mcCPU, "%", 100), b.mcRSS/(1<<20), rate(w.a.hookCPU, b.hookCPU, "%", 100), b.hookRSS/(1<<20))
}

// fleetIdle measures a window of d in which nothing is changed.
func (s *scenario) fleetIdle(d time.Duration) string {
	w := s.fleetIdleStart()
	time.Sleep(d)
	return w.stop()
}

// procStats sums the process figures over every pod of Metacontroller and of the hook (the standby
// replicas included: they are what the settings cost), and the hook's sync requests.
func (s *scenario) procStats() procStats {
	s.t.Helper()
	var p procStats
	scrape := func(ns, selector string, port int, add func(cpu, rss, syncs float64)) {
		pods := read(s, "pods of "+ns, func() (*corev1.PodList, error) {
			return s.e.kube.CoreV1().Pods(ns).List(s.ctx, metav1.ListOptions{LabelSelector: selector})
		})
		for _, pod := range pods.Items {
			if pod.Status.PodIP == "" || !podReady(pod) {
				continue
			}
			fams := read(s, "metrics of "+pod.Name, func() (map[string]float64, error) {
				return scrapeSums(fmt.Sprintf("http://%s:%d/metrics", pod.Status.PodIP, port))
			})
			add(fams["process_cpu_seconds_total"], fams["process_resident_memory_bytes"], fams[`etcdhook_hook_requests_total{hook="sync"}`])
		}
	}
	scrape(mcNamespace, mcSelector, 9999, func(cpu, rss, _ float64) { p.mcCPU += cpu; p.mcRSS += rss })
	scrape(hookNamespace, "app.kubernetes.io/name=etcdhook,app.kubernetes.io/component=hook", 8080, func(cpu, rss, syncs float64) {
		p.hookCPU += cpu
		p.hookRSS += rss
		p.syncs += syncs
	})
	return p
}

// scrapeSums reads a Prometheus text page: each family's samples summed, and the hook's request counter
// for the sync hook alone.
func scrapeSums(url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			out[name] += v
			if name == "etcdhook_hook_requests_total" {
				for _, l := range m.GetLabel() {
					if l.GetName() == "hook" && l.GetValue() == "sync" {
						out[`etcdhook_hook_requests_total{hook="sync"}`] += v
					}
				}
			}
		}
	}
	return out, nil
}

// setMetacontrollerDefaults runs Metacontroller as its release manifests install it (one replica, the
// release's args) and waits for it to sync again.
func (s *scenario) setMetacontrollerDefaults(t *testing.T) {
	s.patchMetacontroller(t, `{"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"metacontroller","args":["--zap-log-level=4","--discovery-interval=20s"]}]}}}}`)
}

// restoreMetacontrollerSettings puts install/metacontroller/settings.yaml back for the scenarios after this one.
func (s *scenario) restoreMetacontrollerSettings(t *testing.T) {
	b, err := os.ReadFile("../install/metacontroller/settings.yaml")
	require.NoError(t, err)
	j, err := yaml.YAMLToJSON(b)
	require.NoError(t, err)
	s.patchMetacontroller(t, string(j))
}

func (s *scenario) patchMetacontroller(t *testing.T, patch string) {
	t.Helper()
	_, err := s.e.kube.AppsV1().StatefulSets(mcNamespace).Patch(s.ctx, "metacontroller", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	s.waitFor("Metacontroller rolled", 4*time.Minute, func() bool {
		sts, err := s.e.kube.AppsV1().StatefulSets(mcNamespace).Get(s.ctx, "metacontroller", metav1.GetOptions{})
		return err == nil && sts.Status.ObservedGeneration >= sts.Generation && sts.Status.UpdateRevision == sts.Status.CurrentRevision &&
			sts.Status.ReadyReplicas == *sts.Spec.Replicas && sts.Status.Replicas == *sts.Spec.Replicas
	})
	// Leader election and informer caches: a change of a paused cluster (nothing rolls) must be synced.
	three, _ := fleetComposition(*fleetSize)
	m := s.fleetMember(three)
	gen := m.cluster().Generation
	m.apply(map[string]any{"options": map[string]any{"snapshot-count": fmt.Sprint(time.Now().Unix())}})
	m.waitFor("Metacontroller syncing again", 2*time.Minute, func() bool { return m.cluster().Status.ObservedGeneration > gen })
}

// q is the p-th percentile (nearest rank) of ds, to a tenth of a second.
func q(ds []time.Duration, p float64) time.Duration {
	return percentile.Of(ds, p).Round(100 * time.Millisecond)
}

func pct(ds []time.Duration) string { return fmt.Sprintf("%s / %s", q(ds, 50), q(ds, 99)) }
