package hooks

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdhook/etcdhook/api"
	etcdsync "github.com/etcdhook/etcdhook/sync"
)

// Per-cluster gauges: what this replica's last answer about each EtcdCluster said. docs/monitoring.md
// lists them and how the alerts read them.
//
// Every replica exports what it answered, and Metacontroller spreads a cluster's syncs over the
// replicas, so two replicas can show different (one older) values for the same cluster: consumers take
// the replica with the newest etcdhook_cluster_last_sync_timestamp_seconds (the recording rule
// etcdhook:cluster_latest_replica in manifests/monitoring/prometheusrule.yaml does).
const (
	// LastBackupMetric is reserved for the time of a cluster's last successful backup; backups do not
	// exist yet. The alert EtcdBackupStale reads this name, so whatever exports backup times must use it
	// with the labels namespace and etcd_cluster.
	LastBackupMetric = "etcdhook_cluster_last_backup_timestamp_seconds"

	// ClusterMetricsTTL is how long a cluster's series stay without a sync answered by this replica.
	// Metacontroller resyncs every EtcdCluster at least every 60 s (resyncPeriodSeconds, and every
	// answer's resyncAfterSeconds), spread over the replicas; a cluster deleted without the finalize hook
	// (which is not registered by default) gets no last call, so this bounds how long its series outlive
	// it. Ten minutes is ten resyncs: a live cluster's series do not flap on one replica.
	ClusterMetricsTTL = 10 * time.Minute
)

// Labels of every per-cluster series. etcd_cluster, not cluster: the member PodMonitor relabels the
// pods' app.kubernetes.io/instance to the same name, so hook and member series join on
// (namespace, etcd_cluster); and `cluster` is the label multi-cluster Prometheus setups already use for
// the Kubernetes cluster.
var clusterLabels = []string{"namespace", "etcd_cluster"}

// phases are the values of status.phase, in the order etcdhook_cluster_phase lists them.
var phases = [...]string{api.PhaseCreating, api.PhaseRunning, api.PhaseScaling, api.PhaseUpgrading, api.PhaseDegraded, api.PhaseFailed, api.PhasePaused, api.PhaseRestoring}

// steps are the reasons of a true Progressing condition (sync/render/status.go): the kind of change in
// flight. A stalled step (Progressing false, StepDeadlineExceeded) is etcdhook_cluster_step_stalled.
var steps = [...]string{"Bootstrapping", "MembershipChange", "RollingUpdate", "SpecPending", "RestoringInPlace", "VolumeGrowth", "CARotation", "TLSSwitch"}

const stepStalledReason = "StepDeadlineExceeded"

// clusterSample is one answer, reduced to numbers: it holds no string of the request (those point into
// a pooled body buffer) and no pointer, so that storing it over the previous one allocates nothing.
type clusterSample struct {
	namespace, name string // substrings of the map key, which the sync package built (not the body)
	phase           int8   // index into phases, -1 if none
	step            int8   // index into steps, -1 if none
	stalled         bool
	available       bool
	hasTarget       bool
	desired         int32
	replicas        int32
	ready           int32
	members         int32
	voters          int32
	healthyVoters   int32
	learners        int32
	synced          time.Time
	// hasBackup: the cluster has backups (status.backup); backupSuccess its newest success (zero: none).
	hasBackup     bool
	backupSuccess time.Time
	// restorable: the continuous backup's newest restorable point (zero: no report yet); lagging:
	// BackupLagging is true.
	restorable time.Time
	lagging    bool
	// standby: the cluster is a standby not yet promoted (status.standby); standbyLagging:
	// StandbyLagging is true; standbyLag the lag its applier reported.
	standby, hasStandbyLag bool
	standbyLagging         bool
	standbyLag             time.Duration
	// userCert: the earliest expiry of a spec.auth user's certificate (status.auth.users; zero: none).
	userCert time.Time
}

// clusterMetrics collects the samples and turns them into series at scrape time.
type clusterMetrics struct {
	now func() time.Time
	ttl time.Duration

	mu       sync.Mutex
	clusters map[string]clusterSample // by "namespace/name"

	phase, step, stalled, available, desired, replicas, ready, members, voters, healthyVoters, learners, lastSync, backupSuccess, restorable, lagging, userCert, standbyLagging, standbyLag *prometheus.Desc
}

func newClusterMetrics(reg prometheus.Registerer, now func() time.Time, ttl time.Duration) *clusterMetrics {
	d := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append(append([]string(nil), clusterLabels...), extra...), nil)
	}
	m := &clusterMetrics{
		now: now, ttl: ttl, clusters: map[string]clusterSample{},
		phase: d("etcdhook_cluster_phase",
			"1 for the EtcdCluster's status.phase in the hook's last answer, 0 for the other phases.", "phase"),
		step: d("etcdhook_cluster_step_in_flight",
			"1 for the kind of change in flight (the reason of a true Progressing condition), 0 for the others.", "step"),
		stalled: d("etcdhook_cluster_step_stalled",
			"1 when a step passed its deadline (Progressing false, reason StepDeadlineExceeded)."),
		available: d("etcdhook_cluster_available",
			"1 when the Available condition is true: a quorum of voters reports a healthy cluster."),
		desired: d("etcdhook_cluster_desired_members",
			"The size the hook works towards (status.target.size); absent until a spec was valid."),
		replicas: d("etcdhook_cluster_replicas",
			"The StatefulSet replicas the hook asks for (status.replicas)."),
		ready: d("etcdhook_cluster_ready_members",
			"The StatefulSet's ready member pods (status.readyReplicas)."),
		members: d("etcdhook_cluster_members",
			"Members in the membership truth (status.members): voters, learners and orphans."),
		voters: d("etcdhook_cluster_voters",
			"Voting members (leader included)."),
		healthyVoters: d("etcdhook_cluster_healthy_voters",
			"Voting members whose agent reports them healthy."),
		learners: d("etcdhook_cluster_learners",
			"Learners (members not yet promoted)."),
		lastSync: d("etcdhook_cluster_last_sync_timestamp_seconds",
			"When this replica last answered a sync of the cluster (the hook's clock)."),
		restorable: d("etcdhook_cluster_backup_restorable_timestamp_seconds",
			"The continuous backup's newest restorable point (status.backup.continuous.time); absent until its writer reports."),
		lagging: d("etcdhook_cluster_backup_lagging",
			"1 while BackupLagging is true: the newest restorable point is older than spec.backup.continuous.maxLag; absent without spec.backup."),
		userCert: d("etcdhook_cluster_user_certificate_expiry_timestamp_seconds",
			"The earliest expiry of a spec.auth user's certificate (status.auth.users); absent without spec.auth or before the first is issued."),
		standbyLagging: d("etcdhook_cluster_standby_lagging",
			"1 while StandbyLagging is true: the standby is further behind its primary's newest chunk than spec.standby.maxLag, or its applier is silent as long; absent but for a standby not promoted."),
		standbyLag: d("etcdhook_cluster_standby_lag_seconds",
			"How far the standby is behind its primary's newest chunk stored (status.standby.lag); absent but for a standby not promoted, and before its applier reports."),
		backupSuccess: d("etcdhook_cluster_last_backup_timestamp_seconds",
			"When the newest backup of the cluster succeeded (status.backup.lastSuccessTime); 0 until one did, absent without spec.backup."),
	}
	reg.MustRegister(m)
	return m
}

// observe records a sync answer, or forgets the cluster when the answer is a finalize call's: the
// cluster is being deleted, and its series must not outlive it.
func (m *clusterMetrics) observe(resp *etcdsync.Response) {
	key := resp.Parent
	if resp.Finalizing {
		m.mu.Lock()
		delete(m.clusters, key)
		m.mu.Unlock()
		return
	}
	if resp.Status == nil {
		return
	}
	s := sample(resp.Status)
	s.namespace, s.name, _ = strings.Cut(key, "/")
	s.synced = m.now()
	m.mu.Lock()
	m.clusters[key] = s
	m.mu.Unlock()
}

func sample(st *api.ClusterStatus) clusterSample {
	s := clusterSample{phase: -1, step: -1, replicas: st.Replicas, ready: st.ReadyReplicas, members: int32(len(st.Members))}
	for i, p := range phases {
		if st.Phase == p {
			s.phase = int8(i)
		}
	}
	if st.Target != nil {
		s.hasTarget, s.desired = true, st.Target.Size
	}
	if st.Backup != nil {
		s.hasBackup = true
		if st.Backup.LastSuccessTime != nil {
			s.backupSuccess = st.Backup.LastSuccessTime.Time
		}
		if c := st.Backup.Continuous; c != nil && c.Time != nil {
			s.restorable = c.Time.Time
		}
	}
	if sb := st.Standby; sb != nil && sb.Promoted == nil {
		s.standby = true
		if sb.Lag != nil {
			s.hasStandbyLag, s.standbyLag = true, sb.Lag.Duration
		}
	}
	if a := st.Auth; a != nil {
		for i := range a.Users {
			if t, err := time.Parse(time.RFC3339, a.Users[i].NotAfter); err == nil && (s.userCert.IsZero() || t.Before(s.userCert)) {
				s.userCert = t
			}
		}
	}
	for i := range st.Members {
		switch st.Members[i].Role {
		case api.RoleLearner:
			s.learners++
		case api.RoleVoter, api.RoleLeader:
			s.voters++
			if st.Members[i].Healthy {
				s.healthyVoters++
			}
		}
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		switch c.Type {
		case api.CondAvailable:
			s.available = c.Status == "True"
		case api.CondBackupLagging:
			s.lagging = c.Status == "True"
		case api.CondStandbyLagging:
			s.standbyLagging = c.Status == "True"
		case api.CondProgressing:
			if c.Status == "True" {
				for j, r := range steps {
					if c.Reason == r {
						s.step = int8(j)
					}
				}
			}
			s.stalled = c.Reason == stepStalledReason
		}
	}
	return s
}

// Describe implements prometheus.Collector.
func (m *clusterMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.phase, m.step, m.stalled, m.available, m.desired, m.replicas, m.ready,
		m.members, m.voters, m.healthyVoters, m.learners, m.lastSync, m.backupSuccess, m.restorable, m.lagging, m.userCert, m.standbyLagging, m.standbyLag} {
		ch <- d
	}
}

// Collect implements prometheus.Collector; it also drops the clusters no sync has named for the TTL.
func (m *clusterMetrics) Collect(ch chan<- prometheus.Metric) {
	now := m.now()
	m.mu.Lock()
	samples := make([]clusterSample, 0, len(m.clusters))
	for k, s := range m.clusters {
		if now.Sub(s.synced) > m.ttl {
			delete(m.clusters, k)
			continue
		}
		samples = append(samples, s)
	}
	m.mu.Unlock()
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	for _, s := range samples {
		g := func(d *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{s.namespace, s.name}, extra...)...)
		}
		for i, p := range phases {
			g(m.phase, b2f(int(s.phase) == i), p)
		}
		for i, st := range steps {
			g(m.step, b2f(int(s.step) == i), st)
		}
		g(m.stalled, b2f(s.stalled))
		g(m.available, b2f(s.available))
		if s.hasTarget {
			g(m.desired, float64(s.desired))
		}
		g(m.replicas, float64(s.replicas))
		g(m.ready, float64(s.ready))
		g(m.members, float64(s.members))
		g(m.voters, float64(s.voters))
		g(m.healthyVoters, float64(s.healthyVoters))
		g(m.learners, float64(s.learners))
		g(m.lastSync, float64(s.synced.UnixNano())/1e9)
		if !s.userCert.IsZero() {
			g(m.userCert, float64(s.userCert.Unix()))
		}
		if s.standby {
			g(m.standbyLagging, b2f(s.standbyLagging))
			if s.hasStandbyLag {
				g(m.standbyLag, s.standbyLag.Seconds())
			}
		}
		if s.hasBackup {
			// 0 until the first success: EtcdBackupStale then fires for backups that never succeed.
			v := 0.0
			if !s.backupSuccess.IsZero() {
				v = float64(s.backupSuccess.Unix())
			}
			g(m.backupSuccess, v)
			g(m.lagging, b2f(s.lagging))
			if !s.restorable.IsZero() {
				g(m.restorable, float64(s.restorable.UnixNano())/1e9)
			}
		}
	}
}
