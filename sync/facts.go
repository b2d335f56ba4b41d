package sync

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// A Lease not renewed for UnhealthyAfterDurations renewal intervals (api.RenewInterval) makes its report
// stale.
const (
	UnhealthyAfterDurations = 3
	// MaxClockSkew bounds how far in the future a renewTime may be and still count: a hand edit must
	// not make its report the freshest for ever. renewTime is the API server's time (the agent takes it
	// from the Date header), so this bounds the hook's clock lag behind the API server: one Lease
	// duration. A hook whose clock lags more sees every report as from the future and freezes
	// membership (InputIgnored names it).
	MaxClockSkew = api.DefaultLeaseDurationSeconds * time.Second
)

// leaseView is one member Lease: the hook's intent and the agent's report, judged against now.
type leaseView struct {
	ordinal       int
	lease         *coordv1.Lease
	report        api.Report
	reportErr     error
	holder        string
	renewed       time.Time
	fresh         bool
	intent        string
	intentSince   string
	joinPermitted string
	joinDeadline  string
	join          api.JoinWindow
	// defrag: the defragmentation pass this Lease asks for, as the hook last answered (observed).
	defrag string
	// caRotation and caRestart: the CA rotation step and restart this Lease asks for (observed).
	caRotation api.CARotationIntent
	caRestart  string
	// peerScheme: the scheme this Lease lets its member move its peer URL to (observed).
	peerScheme string
	// recover: the recovery part this Lease asks of its member (observed; recovery.go).
	recover api.RecoverIntent
}

// permitLive: the Lease carries a join permission whose deadline has not passed.
func (lv *leaseView) permitLive(now time.Time) bool {
	if lv == nil {
		return false
	}
	open, _ := lv.join.OpenAt(now)
	return open
}

// memberView is one member of the membership truth, mapped to an ordinal (-1: orphan).
type memberView struct {
	api.Member
	ordinal int
	healthy bool
	// dead: its Lease has not been renewed for spec.timeouts.deadMemberSeconds and its pod is not ready.
	dead    bool
	version string
	// dbSize and dbSizeInUse as the ordinal's agent reports them for this member (0: unknown).
	dbSize, dbSizeInUse int64
	// lastDefrag: when the agent reports it last defragmented (nil: never, or not a time, or ahead of
	// the hook's clock beyond the skew bound).
	lastDefrag *metav1.Time
}

func (m *memberView) voter() bool { return !m.Learner }

// jobView is a remove or pvc-delete Job parsed from its name and status.
type jobView struct {
	job      *batchv1.Job
	memberID string // remove Jobs
	ordinal  int    // pvc Jobs
	attempt  int
	state    jobState
	finished time.Time
	// refused: the Job failed by its pod failure policy, on the exit code of a cause another attempt
	// would meet again (api.RestoreExitRefused): it is not retried.
	refused bool
}

type jobState int

const (
	jobActive jobState = iota
	jobSucceeded
	jobFailed
)

// facts is everything the decision reads, derived once from the request.
type facts struct {
	now        time.Time
	names      api.Names
	parent     *api.EtcdCluster
	clusterUID string
	obs        *Observed

	sts    *appsv1.StatefulSet
	cm     *corev1.ConfigMap
	leases map[int]*leaseView
	pods   map[int]*corev1.Pod
	pvcs   map[int]*corev1.PersistentVolumeClaim

	// applied is the spec the children were last rendered from (ConfigMap), nil before the first render
	// and when the record fails validation. recorded is the record as read, valid or not (nil when it
	// does not parse): a record an older hook wrote under looser rules is still what the cluster runs,
	// so a new spec is judged against it (immutable fields, defaults), but nothing is rendered from it.
	applied  *api.ClusterSpec
	recorded *api.ClusterSpec

	// formed: the cluster has had all its members healthy at least once (the ConfigMap's record).
	formed bool
	// defragNowDone: the last etcd.io/defrag-now value whose pass completed (the ConfigMap's record).
	defragNowDone string
	// spaceQuota and spaceStorage: the raised quota and claim size recorded (ConfigKeySpaceQuota,
	// ConfigKeySpaceStorage); 0 and nil when absent or ignored (space.go).
	spaceQuota   int64
	spaceStorage *resource.Quantity
	// alarms: the cluster's alarms as the fresh reports read them, by type, each the member IDs that
	// raised it (readAlarms); an alarm naming no member of the cluster is ignored (distrusted).
	alarms map[string][]string
	// inPlace: the ConfigMap's record of the last in-place restore (nil: none); retired: the cluster IDs
	// in-place restores replaced, whose reports count for nothing (inplace.go).
	inPlace *inPlaceRecord
	retired map[string]bool
	// liveRetired: retired IDs a ready member pod reports as a healthy voter after the restore was
	// committed (unretireLive).
	liveRetired []string
	// inPlaceWithdrawn: the request was withdrawn while its restore Job runs.
	inPlaceWithdrawn bool

	// static: the member count of a static creation in force (staticfacts.go), 0 none; staticRecord: a
	// valid record on the StatefulSet, in force or not (it is rendered again as it is).
	static, staticRecord int

	clusterID    string
	splitBrain   bool
	clusterIDs   []string
	bootstrapped bool

	// truth is the freshest member list reported by a healthy voter; nil when none is known.
	truth     []api.Member
	truthFrom int
	members   []*memberView // every truth member, by ordinal then ID; orphans (ordinal -1) first
	primary   map[int]*memberView
	orphans   []*memberView
	leaderID  string
	running   []api.SemVer
	// imageVersions: the etcd versions the member pods whose etcd ran carry in their image tags (readImageVersions): evidence of what wrote the data that outlives
	// every report and record (all members restarting, status wiped, the ConfigMap edited).
	imageVersions []api.SemVer

	removeJobs       map[string][]*jobView // by member ID, attempts ascending
	deleteVolumeJobs map[int][]*jobView    // by ordinal, attempts ascending
	// Volume growth (volumes.go): claim-growing Jobs by ordinal, and the Jobs re-creating the StatefulSet
	// for its claim template; attempts ascending.
	growJobs     map[int][]*jobView
	templateJobs []*jobView

	// The safest view over every fresh healthy voter's report, for decisions that lower replicas or
	// weaken the disruption budget: the highest member ordinal any of them lists, and the most voters.
	unionHighest int
	unionVoters  int
	// distrusted: inputs that were ignored as impossible (hand edits, skewed clocks), for status.
	distrusted []string
	// reportErrs: the Leases whose report did not parse, each named once in distrusted.
	reportErrs []string
	// allVoters and healthyVoters count the truth's voters, and its healthy ones (readTruth): the
	// quorum rule asks them for every candidate removal, so they are counted once.
	allVoters, healthyVoters int
}

func (f *facts) sortedLeases() []*leaseView {
	out := make([]*leaseView, 0, len(f.leases))
	for _, lv := range f.leases {
		out = append(out, lv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ordinal < out[j].ordinal })
	return out
}

// configValue is a key of the observed ConfigMap, "" without one.
func (f *facts) configValue(key string) string {
	if f.cm == nil {
		return ""
	}
	return f.cm.Data[key]
}

// podReady says whether ordinal i has a pod, not being deleted, whose Ready condition is true.
func (f *facts) podReady(i int) bool {
	pod := f.pods[i]
	return pod != nil && pod.DeletionTimestamp == nil && podReadyCondition(pod)
}

// podReadyCondition: the pod's Ready condition is true.
func podReadyCondition(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// overdueAfter is how long after its last renewal an agent that wrote report r is overdue: the interval
// that report promised (api.RenewInterval), plus the margin the freshness rule gives a member in trouble
// (UnhealthyAfterDurations of its interval) for a renewal on its way.
func overdueAfter(r api.Report) time.Duration {
	lease := api.DefaultLeaseDurationSeconds * time.Second
	return api.RenewInterval(r, lease) + UnhealthyAfterDurations*api.RenewInterval(api.Report{}, lease)
}

// notReadyFor is how long ordinal i has had no Ready pod: since its pod's Ready condition last turned
// false (or, without a transition time, since the pod was created; for a pod being deleted, since it was
// asked to go if it was ready then), for ever when there is no pod. A time
// from the future counts as now: it can only delay a removal.
func (f *facts) notReadyFor(i int) time.Duration {
	if f.podReady(i) {
		return 0
	}
	pod := f.pods[i]
	if pod == nil {
		return math.MaxInt64
	}
	since := pod.CreationTimestamp.Time
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && !c.LastTransitionTime.IsZero() {
			since = c.LastTransitionTime.Time
		}
	}
	// A pod being deleted stopped counting as ready when it was asked to go (a roll deletes ready pods),
	// unless it was not ready before.
	if d := pod.DeletionTimestamp; d != nil && (podReadyCondition(pod) || d.Time.Before(since)) {
		since = d.Time
	}
	if since.IsZero() {
		return math.MaxInt64
	}
	if d := f.now.Sub(since); d > 0 {
		return d
	}
	return 0
}

// reportsHealthyVoter: the Lease at i is fresh, held by the pod at i when that pod is known, and reports
// a healthy voter of this cluster with member ID id ("" = any).
func (f *facts) reportsHealthyVoter(i int, id string) bool {
	lv := f.leases[i]
	if lv == nil || !lv.fresh || !lv.report.IsVoter() || !lv.report.Healthy {
		return false
	}
	if id != "" && lv.report.MemberID != id {
		return false
	}
	if f.clusterID != "" && lv.report.ClusterID != f.clusterID {
		return false
	}
	// A known pod must be the Lease's holder and ready: a report outlives its pod by up to three
	// Lease durations, readiness does not.
	if pod := f.pods[i]; pod != nil && (string(pod.UID) != lv.holder || !f.podReady(i)) {
		return false
	}
	return true
}

func (f *facts) truthKnown() bool { return f.truth != nil }

// voters counts voting members of the truth and those that are healthy.
func (f *facts) voters() (all, healthy int) { return f.allVoters, f.healthyVoters }

func (f *facts) learner() *memberView {
	for _, m := range f.members {
		if m.Learner {
			return m
		}
	}
	return nil
}

// highestMemberOrdinal is the highest ordinal with a member, -1 when none.
func (f *facts) highestMemberOrdinal() int {
	h := -1
	for i := range f.primary {
		if i > h {
			h = i
		}
	}
	return h
}

func memberName(f *facts, m *memberView) string {
	if m.ordinal >= 0 {
		return f.names.Pod(m.ordinal)
	}
	if m.Name != "" {
		return m.Name
	}
	return "orphan-" + m.ID
}

func peerScheme(url string) string {
	if strings.HasPrefix(url, "https://") {
		return "https"
	}
	return "http"
}

// member finds a truth member by ID.
func (f *facts) member(id string) *memberView {
	for _, m := range f.members {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// reporting is m's Lease when its agent reports fresh about m, nil otherwise.
func (f *facts) reporting(m *memberView) *leaseView {
	if m == nil || m.ordinal < 0 {
		return nil
	}
	if lv := f.leases[m.ordinal]; lv != nil && lv.fresh && lv.report.MemberID == m.ID {
		return lv
	}
	return nil
}

// jobRefused: the Job failed by its pod failure policy (FailJob on api.RestoreExitRefused, the exit
// code of a terminal cause), not by running out of attempts or time.
func jobRefused(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Reason == batchv1.JobReasonPodFailurePolicy {
			return true
		}
	}
	return false
}

func jobStatus(j *batchv1.Job) (jobState, time.Time) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			return jobSucceeded, c.LastTransitionTime.Time
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			return jobFailed, c.LastTransitionTime.Time
		}
	}
	if j.Status.Succeeded > 0 {
		t := j.CreationTimestamp.Time
		if j.Status.CompletionTime != nil {
			t = j.Status.CompletionTime.Time
		}
		return jobSucceeded, t
	}
	return jobActive, time.Time{}
}

// caRotationUnderway: by the agents' reports (never by the step this hook wrote, which the same answer
// may clear), a CA rotation is not over: the CA Secret holds a next CA, or a member's etcd trusts other
// CAs than the Secret's one.
func (f *facts) caRotationUnderway() bool {
	for _, lv := range f.sortedLeases() {
		if !lv.fresh {
			continue
		}
		s, ok := api.ParseCASecretState(lv.report.TLSCASecret)
		if ok && (s.Next != "" || s.Current != "" && lv.report.TLSCAs != "" && lv.report.TLSCAs != s.Current) {
			return true
		}
	}
	return false
}

// tlsSwitchSeen: a switch is under way by the observed objects: the StatefulSet's annotation, or
// members whose peer URLs are not all on the applied spec's scheme.
func (f *facts) tlsSwitchSeen() bool {
	if f.sts != nil && f.sts.Annotations[api.AnnTLSSwitch] != "" {
		return true
	}
	if f.applied == nil {
		return false
	}
	want := api.Scheme(f.applied.Security.TLS.TLSOn())
	for _, m := range f.members {
		if m.ordinal >= 0 && peerScheme(m.PeerURL) != want {
			return true
		}
	}
	return false
}

// leaseReport is the report under key on Lease l (the backup Lease: the Jobs' reports) when it is one
// mine accepts, nil otherwise. One that does not parse, or is dated (at) ahead of the hook's clock, is
// named (InputIgnored) and ignored: the Lease is writable by the backup Jobs and by hand.
func leaseReport[R any](f *facts, l *coordv1.Lease, key string, parse func(string) (*R, error), mine func(*R) bool, at func(*R) time.Time) *R {
	r, err := parse(l.Annotations[key])
	switch {
	case err != nil:
		f.distrusted = append(f.distrusted, fmt.Sprintf("Lease %s annotation %s does not parse (%v): ignored", l.Name, key, err))
		return nil
	case r == nil || !mine(r):
		return nil
	case at(r).After(f.now.Add(maxClockSkew)):
		f.distrusted = append(f.distrusted, fmt.Sprintf("Lease %s annotation %s is dated %s, ahead of the hook's clock: ignored", l.Name, key, at(r).UTC().Format(time.RFC3339)))
		return nil
	}
	return r
}

// maxClockSkew is how far ahead of the hook's clock a reported time may be before it is distrusted.
const maxClockSkew = 2 * time.Minute
