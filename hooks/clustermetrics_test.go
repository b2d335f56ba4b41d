package hooks

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
	etcdsync "github.com/etcdhook/etcdhook/sync"
)

// clusterSeries gathers the etcdhook_cluster_* series of one cluster as "name{extra label}" → value.
func clusterSeries(t *testing.T, reg *prometheus.Registry, namespace, cluster string) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "etcdhook_cluster_") {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			var extra []string
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
				if l.GetName() != "namespace" && l.GetName() != "etcd_cluster" {
					extra = append(extra, l.GetName()+"="+l.GetValue())
				}
			}
			require.Contains(t, labels, "namespace", f.GetName())
			require.Contains(t, labels, "etcd_cluster", f.GetName())
			require.Equal(t, "GAUGE", f.GetType().String(), f.GetName())
			if labels["namespace"] != namespace || labels["etcd_cluster"] != cluster {
				continue
			}
			key := f.GetName()
			if len(extra) > 0 {
				key += "{" + strings.Join(extra, ",") + "}"
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

// want spells the full set of series one cluster should have: every phase and step listed, the one
// that applies at 1.
func want(phase, step string, stalled, available bool, desired, replicas, ready, members, voters, healthy, learners float64, synced time.Time) map[string]float64 {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	out := map[string]float64{
		"etcdhook_cluster_step_stalled":                b(stalled),
		"etcdhook_cluster_available":                   b(available),
		"etcdhook_cluster_replicas":                    replicas,
		"etcdhook_cluster_ready_members":               ready,
		"etcdhook_cluster_members":                     members,
		"etcdhook_cluster_voters":                      voters,
		"etcdhook_cluster_healthy_voters":              healthy,
		"etcdhook_cluster_learners":                    learners,
		"etcdhook_cluster_last_sync_timestamp_seconds": float64(synced.Unix()),
	}
	if desired >= 0 {
		out["etcdhook_cluster_desired_members"] = desired
	}
	for _, p := range []string{"Creating", "Running", "Scaling", "Upgrading", "Degraded", "Failed", "Paused", "Restoring"} {
		out["etcdhook_cluster_phase{phase="+p+"}"] = b(p == phase)
	}
	for _, s := range []string{"Bootstrapping", "MembershipChange", "RollingUpdate", "SpecPending", "RestoringInPlace", "VolumeGrowth", "CARotation", "TLSSwitch"} {
		out["etcdhook_cluster_step_in_flight{step="+s+"}"] = b(s == step)
	}
	return out
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b := mustRead(t, "testdata/"+name+".request.json")
	return b
}

// The gauges say what the last answer about each cluster said, a finalize call drops the cluster's
// series, and so does the TTL for a cluster no sync names any more (deleted without the finalize hook).
func TestClusterGaugesFollowTheLastAnswer(t *testing.T) {
	reg := prometheus.NewRegistry()
	var now atomic.Pointer[time.Time]
	t0 := fixtureNow
	now.Store(&t0)
	srv := New(Config{
		Options:  etcdsync.Options{Image: fixtureImage},
		Now:      func() time.Time { return *now.Load() },
		Logger:   discardLogger(),
		Registry: reg,
	})
	advance := func(d time.Duration) time.Time {
		t := now.Load().Add(d)
		now.Store(&t)
		return t
	}
	require.Empty(t, clusterSeries(t, reg, "prod", "demo"), "no series before a sync")

	// A learner waiting for promotion: 1 leader + 1 learner, 3 desired.
	require.Equal(t, 200, post(t, srv, "/sync", "application/json", readFixture(t, "sync/learner-pending")).Code)
	require.Equal(t, want("Scaling", "MembershipChange", false, true, 3, 3, 1, 2, 1, 1, 1, t0),
		clusterSeries(t, reg, "prod", "demo"))

	// A second cluster, in another namespace, bootstrapping (its 3 members start together): no members yet.
	var other map[string]any
	require.NoError(t, json.Unmarshal(readFixture(t, "sync/new-cluster"), &other))
	meta := other["parent"].(map[string]any)["metadata"].(map[string]any)
	meta["namespace"], meta["name"] = "staging", "other"
	body, err := json.Marshal(other)
	require.NoError(t, err)
	t1 := advance(time.Second)
	require.Equal(t, 200, post(t, srv, "/sync", "application/json", body).Code)
	require.Equal(t, want("Creating", "Bootstrapping", false, false, 3, 3, 0, 0, 0, 0, 0, t1),
		clusterSeries(t, reg, "staging", "other"))

	// The same first cluster, later: its learner missed its deadline (a stalled step, no step in
	// flight); the series are replaced, not added to.
	t2 := advance(time.Second)
	require.Equal(t, 200, post(t, srv, "/sync", "application/json", readFixture(t, "sync/learner-stuck-removed")).Code)
	require.Equal(t, want("Degraded", "", true, true, 4, 4, 3, 4, 3, 3, 1, t2),
		clusterSeries(t, reg, "prod", "demo"))

	// A refused request changes nothing.
	require.Equal(t, 400, post(t, srv, "/sync", "application/json", []byte(`{"parent":`)).Code)
	require.Equal(t, want("Degraded", "", true, true, 4, 4, 3, 4, 3, 3, 1, t2),
		clusterSeries(t, reg, "prod", "demo"))

	// The finalize call drops the cluster being deleted, and only it.
	require.Equal(t, 200, post(t, srv, "/finalize", "application/json", readFixture(t, "finalize/finalizing")).Code)
	require.Empty(t, clusterSeries(t, reg, "prod", "demo"))
	require.NotEmpty(t, clusterSeries(t, reg, "staging", "other"))

	// Without a sync for the TTL (a cluster deleted without the finalize hook), its series go too.
	advance(ClusterMetricsTTL - time.Second - (t2.Sub(t1)))
	require.NotEmpty(t, clusterSeries(t, reg, "staging", "other"), "within the TTL")
	advance(2 * time.Second)
	require.Empty(t, clusterSeries(t, reg, "staging", "other"), "past the TTL")
}

// A cluster without a valid spec has no target: no desired-members series rather than a made-up 0.
func TestClusterGaugesWithoutTarget(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv := New(Config{Options: etcdsync.Options{Image: fixtureImage}, Now: func() time.Time { return fixtureNow },
		Logger: discardLogger(), Registry: reg})
	require.Equal(t, 200, post(t, srv, "/sync", "application/json", readFixture(t, "sync/invalid-spec-new-cluster")).Code)
	require.Equal(t, want("Failed", "", false, false, -1, 0, 0, 0, 0, 0, 0, fixtureNow), clusterSeries(t, reg, "prod", "demo"))
}

// The metrics' closed sets follow the status the sync package writes: every phase is one
// etcdhook_cluster_phase lists, and every reason of the Progressing condition is either a step of
// etcdhook_cluster_step_in_flight (when true) or one of the known not-in-flight reasons. A new reason in
// sync/render/status.go fails here until the metric (and docs/monitoring.md) learn it.
func TestPhasesAndStepsCoverTheStatus(t *testing.T) {
	notInFlight := []string{"Stable", "Waiting", stepStalledReason}
	src, err := os.ReadFile(filepath.Join("..", "sync", "render", "status.go"))
	require.NoError(t, err)
	re := regexp.MustCompile(`add\(api\.CondProgressing, (true|false), "(\w+)"`)
	found := re.FindAllStringSubmatch(string(src), -1)
	require.GreaterOrEqual(t, len(found), 5, "sync/render/status.go no longer sets Progressing as this test reads it")
	seen := map[string]bool{}
	for _, m := range found {
		if m[1] == "true" {
			require.Contains(t, steps[:], m[2], "Progressing=True reason %s is not a step of etcdhook_cluster_step_in_flight", m[2])
		} else {
			require.Contains(t, notInFlight, m[2], "Progressing=False reason %s is unknown to the cluster metrics", m[2])
		}
		seen[m[2]] = true
	}
	for _, s := range steps {
		require.True(t, seen[s], "step %s is no longer a reason sync/render/status.go writes", s)
	}

	files, err := filepath.Glob("testdata/sync/*.response.json")
	require.NoError(t, err)
	bench, err := filepath.Glob("testdata/bench/*.response.json")
	require.NoError(t, err)
	files = append(files, bench...)
	phaseSeen := map[string]bool{}
	for _, f := range files {
		b := mustRead(t, f)
		var resp struct{ Status api.ClusterStatus }
		require.NoError(t, json.Unmarshal(b, &resp), f)
		s := sample(&resp.Status)
		require.GreaterOrEqual(t, s.phase, int8(0), "%s: phase %q", f, resp.Status.Phase)
		phaseSeen[resp.Status.Phase] = true
	}
	var all []string
	for p := range phaseSeen {
		all = append(all, p)
	}
	sort.Strings(all)
	require.Len(t, all, len(phases), "the fixtures cover every phase: %v", all)
}

// Recording a sync costs no allocation once the cluster is known (the hook is benchmarked per sync).
func TestObserveAllocatesNothing(t *testing.T) {
	m := newClusterMetrics(prometheus.NewRegistry(), func() time.Time { return fixtureNow }, time.Minute)
	resp := &etcdsync.Response{Parent: "prod/demo", Status: &api.ClusterStatus{
		Phase: api.PhaseRunning, Replicas: 3, ReadyReplicas: 3, Target: &api.Target{Size: 3},
		Members: []api.MemberStatus{{Role: api.RoleLeader, Healthy: true}, {Role: api.RoleVoter, Healthy: true}, {Role: api.RoleLearner}},
	}}
	m.observe(resp)
	require.Zero(t, testing.AllocsPerRun(100, func() { m.observe(resp) }))
}

// Syncs record and scrapes read the samples at the same time (run with -race): the map is guarded.
func TestClusterGaugesUnderConcurrentSyncsAndScrapes(t *testing.T) {
	// The fixtures are one parent's: computed at once on purpose.
	srv := New(Config{Options: etcdsync.Options{Image: fixtureImage}, Now: func() time.Time { return fixtureNow },
		Logger: discardLogger(), MaxInFlightPerParent: 8})
	bodies := [][]byte{readFixture(t, "sync/learner-pending"), readFixture(t, "finalize/finalizing"), readFixture(t, "sync/new-cluster")}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 30 {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("scrape: %d", rec.Code)
				return
			}
		}
	}()
	errs := make(chan int, 4)
	for g := range 4 {
		go func() {
			code := http.StatusOK
			for n := range 10 {
				path := "/sync"
				k := (g + n) % len(bodies)
				if k == 1 {
					path = "/finalize"
				}
				req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(bodies[k]))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				srv.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					code = rec.Code
				}
			}
			errs <- code
		}()
	}
	for range 4 {
		require.Equal(t, http.StatusOK, <-errs)
	}
	<-done
}

// The newest backup success of an answer is a series (EtcdBackupStale reads it): 0 for a cluster with
// backups that never succeeded (so the alert fires), absent for a cluster without backups.
func TestClusterBackupSuccessGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newClusterMetrics(reg, func() time.Time { return fixtureNow }, time.Minute)
	at := fixtureNow.Add(-90 * time.Minute).Truncate(time.Second)
	m.observe(&etcdsync.Response{Parent: "prod/a", Status: &api.ClusterStatus{Phase: api.PhaseRunning,
		Backup: &api.BackupStatus{LastSuccessTime: &metav1.Time{Time: at}}}})
	m.observe(&etcdsync.Response{Parent: "prod/b", Status: &api.ClusterStatus{Phase: api.PhaseRunning, Backup: &api.BackupStatus{}}})
	m.observe(&etcdsync.Response{Parent: "prod/c", Status: &api.ClusterStatus{Phase: api.PhaseRunning}})
	require.Equal(t, float64(at.Unix()), clusterSeries(t, reg, "prod", "a")["etcdhook_cluster_last_backup_timestamp_seconds"])
	v, ok := clusterSeries(t, reg, "prod", "b")["etcdhook_cluster_last_backup_timestamp_seconds"]
	require.True(t, ok)
	require.Zero(t, v)
	require.NotContains(t, clusterSeries(t, reg, "prod", "c"), "etcdhook_cluster_last_backup_timestamp_seconds")
}

// A standby not promoted has its lagging gauge (and its lag once reported); a promoted one, and a
// cluster that is no standby, have neither.
func TestClusterStandbyGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newClusterMetrics(reg, func() time.Time { return fixtureNow }, time.Minute)
	lagging := []metav1.Condition{{Type: api.CondStandbyLagging, Status: "True"}}
	m.observe(&etcdsync.Response{Parent: "dr/a", Status: &api.ClusterStatus{Phase: api.PhaseRunning, Conditions: lagging,
		Standby: &api.StandbyStatus{Lag: &metav1.Duration{Duration: 90 * time.Second}}}})
	m.observe(&etcdsync.Response{Parent: "dr/b", Status: &api.ClusterStatus{Phase: api.PhaseRunning, Standby: &api.StandbyStatus{}}})
	m.observe(&etcdsync.Response{Parent: "dr/c", Status: &api.ClusterStatus{Phase: api.PhaseRunning,
		Standby: &api.StandbyStatus{Promoted: &api.StandbyPromoted{Token: "t"}}}})
	a := clusterSeries(t, reg, "dr", "a")
	require.Equal(t, 1.0, a["etcdhook_cluster_standby_lagging"])
	require.Equal(t, 90.0, a["etcdhook_cluster_standby_lag_seconds"])
	b := clusterSeries(t, reg, "dr", "b")
	v, ok := b["etcdhook_cluster_standby_lagging"]
	require.True(t, ok)
	require.Zero(t, v)
	require.NotContains(t, b, "etcdhook_cluster_standby_lag_seconds", "no report yet")
	require.NotContains(t, clusterSeries(t, reg, "dr", "c"), "etcdhook_cluster_standby_lagging")
}
