package facts

import (
	"fmt"
	"maps"
	"math"
	"slices"
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
	"github.com/etcdhook/etcdhook/sync/wire"
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

// Lease is one member Lease: the hook's intent and the agent's report, judged against now.
type Lease struct {
	Ordinal       int
	Lease         *coordv1.Lease
	Report        api.Report
	reportErr     error
	Holder        string
	Renewed       time.Time
	Fresh         bool
	Intent        string
	IntentSince   string
	JoinPermitted string
	joinDeadline  string
	Join          api.JoinWindow
	// defrag: the defragmentation pass this Lease asks for, as the hook last answered (observed).
	Defrag string
	// caRotation and caRestart: the CA rotation step and restart this Lease asks for (observed).
	CARotation api.CARotationIntent
	CARestart  string
	// PeerScheme: the scheme this Lease lets its member move its peer URL to (observed).
	PeerScheme string
	// recover: the recovery part this Lease asks of its member (observed; recovery.go).
	Recover api.RecoverIntent
}

// permitLive: the Lease carries a join permission whose deadline has not passed.
func (lv *Lease) PermitLive(now time.Time) bool {
	if lv == nil {
		return false
	}
	open, _ := lv.Join.OpenAt(now)
	return open
}

// Member is one member of the membership truth, mapped to an ordinal (-1: orphan).
type Member struct {
	api.Member
	Ordinal int
	Healthy bool
	// dead: its Lease has not been renewed for spec.timeouts.deadMemberSeconds and its pod is not ready.
	Dead    bool
	Version string
	// dbSize and dbSizeInUse as the ordinal's agent reports them for this member (0: unknown).
	DBSize, DBSizeInUse int64
	// lastDefrag: when the agent reports it last defragmented (nil: never, or not a time, or ahead of
	// the hook's clock beyond the skew bound).
	LastDefrag *metav1.Time
}

func (m *Member) Voter() bool { return !m.Learner }

// Job is a remove or pvc-delete Job parsed from its name and status.
type Job struct {
	Job      *batchv1.Job
	memberID string // remove Jobs
	ordinal  int    // pvc Jobs
	Attempt  int
	State    JobState
	Finished time.Time
	// refused: the Job failed by its pod failure policy, on the exit code of a cause another attempt
	// would meet again (api.RestoreExitRefused): it is not retried.
	Refused bool
}

type JobState int

const (
	JobActive JobState = iota
	JobSucceeded
	JobFailed
)

// facts is everything the decision reads, derived once from the request.
type Facts struct {
	Now        time.Time
	Names      api.Names
	Parent     *api.EtcdCluster
	ClusterUID string
	Observed   *wire.Observed

	StatefulSet *appsv1.StatefulSet
	cm          *corev1.ConfigMap
	Leases      map[int]*Lease
	Pods        map[int]*corev1.Pod
	PVCs        map[int]*corev1.PersistentVolumeClaim

	// applied is the spec the children were last rendered from (ConfigMap), nil before the first render
	// and when the record fails validation. recorded is the record as read, valid or not (nil when it
	// does not parse): a record an older hook wrote under looser rules is still what the cluster runs,
	// so a new spec is judged against it (immutable fields, defaults), but nothing is rendered from it.
	Applied  *api.ClusterSpec
	Recorded *api.ClusterSpec
	// Candidate: the parent's spec, validated (spec.go).
	Candidate Candidate

	// formed: the cluster has had all its members healthy at least once (the ConfigMap's record).
	Formed bool
	// defragNowDone: the last etcd.io/defrag-now value whose pass completed (the ConfigMap's record).
	DefragNowDone string
	// StandbyPromoted: the standby's promotion recorded (ConfigKeyStandbyPromoted); nil before it.
	StandbyPromoted *api.StandbyPromoted
	// spaceQuota and spaceStorage: the raised quota and claim size recorded (ConfigKeySpaceQuota,
	// ConfigKeySpaceStorage); 0 and nil when absent or ignored (space.go).
	SpaceQuota   int64
	SpaceStorage *resource.Quantity
	// alarms: the cluster's alarms as the fresh reports read them, by type, each the member IDs that
	// raised it (readAlarms); an alarm naming no member of the cluster is ignored (distrusted).
	Alarms map[string][]string
	// inPlace: what the facts say about in-place restores (inplace.go); retired: the cluster IDs
	// in-place restores replaced, whose reports count for nothing (inplace.go).
	InPlace InPlace
	retired map[string]bool
	// liveRetired: retired IDs a ready member pod reports as a healthy voter after the restore was
	// committed (unretireLive).
	liveRetired []string

	// static: the member count of a static creation in force (static.go), 0 none; staticRecord: a
	// valid record on the StatefulSet, in force or not (it is rendered again as it is).
	Static, StaticRecord int

	ClusterID    string
	SplitBrain   bool
	ClusterIDs   []string
	Bootstrapped bool

	// truth: the member list and its members (readTruth).
	Truth   Truth
	Running []api.SemVer
	// imageVersions: the etcd versions the member pods whose etcd ran carry in their image tags (readImageVersions): evidence of what wrote the data that outlives
	// every report and record (all members restarting, status wiped, the ConfigMap edited).
	ImageVersions []api.SemVer

	RemoveJobs       map[string][]*Job // by member ID, attempts ascending
	DeleteVolumeJobs map[int][]*Job    // by ordinal, attempts ascending
	// Volume growth (volumes.go): claim-growing Jobs by ordinal, and the Jobs re-creating the StatefulSet
	// for its claim template; attempts ascending.
	GrowJobs     map[int][]*Job
	TemplateJobs []*Job
	// distrusted: inputs that were ignored as impossible (hand edits, skewed clocks), for status.
	Distrusted []string
	// reportErrs: the Leases whose report did not parse, each named once in distrusted.
	reportErrs []string
}

// Truth is the membership truth: the freshest member list a healthy voter reported, its members
// mapped to ordinals, and the safe view over every healthy voter's list (readTruth).
type Truth struct {
	// list is the freshest member list reported by a healthy voter; nil when none is known. from is the
	// ordinal whose Lease reported it.
	list    []api.Member
	from    int
	Members []*Member // every truth member, by ordinal then ID; orphans (ordinal -1) first
	Primary map[int]*Member
	Orphans []*Member
	// leaderID: the leader the list's reporter names.
	LeaderID string
	// The safest view over every fresh healthy voter's report, for decisions that lower replicas or
	// weaken the disruption budget: the highest member ordinal any of them lists, and the most voters.
	UnionHighest int
	UnionVoters  int
	// allVoters and healthyVoters count the truth's voters, and its healthy ones (readTruth): the
	// quorum rule asks them for every candidate removal, so they are counted once.
	allVoters, healthyVoters int
}

// InPlace is what the facts say about in-place restores (inplace.go).
type InPlace struct {
	// record: the ConfigMap's record of the last in-place restore, as chosen for this sync (nil: none).
	Record *InPlaceRecord
	// withdrawn: the request was withdrawn while its restore Job runs.
	Withdrawn bool
	// refusal is why the etcd.io/restore-from value on the parent (or restoreOnQuorumLoss's restore) was
	// refused, "" when it was not; restoreFrom is the etcd.io/restore-from value, "" when none.
	Refusal, RestoreFrom string
}

func (f *Facts) SortedLeases() []*Lease {
	out := make([]*Lease, 0, len(f.Leases))
	for _, lv := range f.Leases {
		out = append(out, lv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ordinal < out[j].Ordinal })
	return out
}

// ConfigValue is a key of the observed ConfigMap, "" without one.
func (f *Facts) ConfigValue(key string) string {
	if f.cm == nil {
		return ""
	}
	return f.cm.Data[key]
}

// PodReady says whether ordinal i has a pod, not being deleted, whose Ready condition is true.
func (f *Facts) PodReady(i int) bool {
	pod := f.Pods[i]
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
	return renewInterval(r) + UnhealthyAfterDurations*renewInterval(api.Report{})
}

// renewInterval is how often an agent that wrote report r renews it: the interval the agent follows
// (api.RenewInterval) under the Lease duration it is configured with, never the one written in the Lease.
func renewInterval(r api.Report) time.Duration {
	return api.RenewInterval(r, api.DefaultLeaseDurationSeconds*time.Second)
}

// notReadyFor is how long ordinal i has had no Ready pod: since its pod's Ready condition last turned
// false (or, without a transition time, since the pod was created; for a pod being deleted, since it was
// asked to go if it was ready then), for ever when there is no pod. A time from the future counts as
// now: it can only delay a removal.
func (f *Facts) notReadyFor(i int) time.Duration {
	if f.PodReady(i) {
		return 0
	}
	pod := f.Pods[i]
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
	if d := f.Now.Sub(since); d > 0 {
		return d
	}
	return 0
}

// ReportsHealthyVoter: the Lease at i is fresh, held by the pod at i when that pod is known, and reports
// a healthy voter of this cluster with member ID id ("" = any).
func (f *Facts) ReportsHealthyVoter(i int, id string) bool {
	lv := f.Leases[i]
	if lv == nil || !lv.Fresh || !lv.Report.IsVoter() || !lv.Report.Healthy {
		return false
	}
	if id != "" && lv.Report.MemberID != id {
		return false
	}
	if f.ClusterID != "" && lv.Report.ClusterID != f.ClusterID {
		return false
	}
	// A known pod must be the Lease's holder and ready: a report outlives its pod by up to three
	// Lease durations, readiness does not.
	if pod := f.Pods[i]; pod != nil && (string(pod.UID) != lv.Holder || !f.PodReady(i)) {
		return false
	}
	return true
}

// known: a member list is known.
func (t *Truth) Known() bool { return t.list != nil }

// voters counts voting members of the truth and those that are healthy.
func (t *Truth) Voters() (all, healthy int) { return t.allVoters, t.healthyVoters }

// learner is the truth's learner, nil when none.
func (t *Truth) Learner() *Member {
	for _, m := range t.Members {
		if m.Learner {
			return m
		}
	}
	return nil
}

// highestOrdinal is the highest ordinal with a member, -1 when none.
func (t *Truth) HighestOrdinal() int {
	h := -1
	for i := range t.Primary {
		if i > h {
			h = i
		}
	}
	return h
}

func MemberName(f *Facts, m *Member) string {
	if m.Ordinal >= 0 {
		return f.Names.Pod(m.Ordinal)
	}
	if m.Name != "" {
		return m.Name
	}
	return "orphan-" + m.ID
}

func PeerScheme(url string) string {
	if strings.HasPrefix(url, "https://") {
		return "https"
	}
	return "http"
}

// member finds a truth member by ID.
func (t *Truth) Member(id string) *Member {
	for _, m := range t.Members {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// reporting is m's Lease when its agent reports fresh about m, nil otherwise.
func (f *Facts) Reporting(m *Member) *Lease {
	if m == nil || m.Ordinal < 0 {
		return nil
	}
	if lv := f.Leases[m.Ordinal]; lv != nil && lv.Fresh && lv.Report.MemberID == m.ID {
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

func JobStatus(j *batchv1.Job) (JobState, time.Time) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			return JobSucceeded, c.LastTransitionTime.Time
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			return JobFailed, c.LastTransitionTime.Time
		}
	}
	if j.Status.Succeeded > 0 {
		t := j.CreationTimestamp.Time
		if j.Status.CompletionTime != nil {
			t = j.Status.CompletionTime.Time
		}
		return JobSucceeded, t
	}
	return JobActive, time.Time{}
}

// CARotationUnderway: by the agents' reports (never by the step this hook wrote, which the same answer
// may clear), a CA rotation is not over: the CA Secret holds a next CA, or a member's etcd trusts other
// CAs than the Secret's one.
func (f *Facts) CARotationUnderway() bool {
	for _, lv := range f.SortedLeases() {
		if !lv.Fresh {
			continue
		}
		s, ok := api.ParseCASecretState(lv.Report.TLSCASecret)
		if ok && (s.Next != "" || s.Current != "" && lv.Report.TLSCAs != "" && lv.Report.TLSCAs != s.Current) {
			return true
		}
	}
	return false
}

// TLSSwitchSeen: a switch is under way by the observed objects: the StatefulSet's annotation, or
// members whose peer URLs are not all on the applied spec's scheme.
func (f *Facts) TLSSwitchSeen() bool {
	if f.StatefulSet != nil && f.StatefulSet.Annotations[api.AnnTLSSwitch] != "" {
		return true
	}
	if f.Applied == nil {
		return false
	}
	want := api.Scheme(f.Applied.Security.TLS.TLSOn())
	for _, m := range f.Truth.Members {
		if m.Ordinal >= 0 && PeerScheme(m.PeerURL) != want {
			return true
		}
	}
	return false
}

// LeaseReport is the report under key on Lease l (the backup Lease: the Jobs' reports) when it is one
// mine accepts, nil otherwise. One that does not parse, or is dated (at) ahead of now, is ignored and
// named in the returned note (for InputIgnored; "" when none): the Lease is writable by the backup Jobs
// and by hand. It writes nothing: the caller records the note where its own notes go.
func LeaseReport[R any](now time.Time, l *coordv1.Lease, key string, parse func(string) (*R, error), mine func(*R) bool, at func(*R) time.Time) (*R, string) {
	r, err := parse(l.Annotations[key])
	switch {
	case err != nil:
		return nil, fmt.Sprintf("Lease %s annotation %s does not parse (%v): ignored", l.Name, key, err)
	case r == nil || !mine(r):
		return nil, ""
	case at(r).After(now.Add(maxClockSkew)):
		return nil, fmt.Sprintf("Lease %s annotation %s is dated %s, ahead of the hook's clock: ignored", l.Name, key, at(r).UTC().Format(time.RFC3339))
	}
	return r, ""
}

// maxClockSkew is how far ahead of the hook's clock a reported time may be before it is distrusted.
const maxClockSkew = 2 * time.Minute

// AuthReport is the auth report of the leader's agent: the freshest Lease, held by its pod, whose
// report says leader and carries one. nil when none does.
func (f *Facts) AuthReport() *api.AuthReport {
	for _, i := range slices.Sorted(maps.Keys(f.Leases)) {
		if r, ok := f.AgentReport(i); ok && r.Role == api.RoleLeader && r.Auth != nil {
			return r.Auth
		}
	}
	return nil
}

// SeedRefused: a new cluster's seed reports that its restore cannot succeed as written (or it gave up
// retrying): the restore has ended, and the phase is Failed until a new seed pod succeeds.
func (f *Facts) SeedRefused() bool {
	if f.Bootstrapped {
		return false
	}
	for _, lv := range f.SortedLeases() {
		if lv.Report.Reason() == api.ReasonRestoreRefused {
			return true
		}
	}
	return false
}

// StorageFloor is the largest storage a claim of the cluster asks for, or its StatefulSet's claim
// template: spec.storage.size may go back down to it (a growth that could not happen), never below.
func (f *Facts) StorageFloor() *resource.Quantity {
	var floor *resource.Quantity
	take := func(q resource.Quantity) {
		if floor == nil || q.Cmp(*floor) > 0 {
			c := q.DeepCopy()
			floor = &c
		}
	}
	for _, pvc := range f.PVCs {
		if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
			take(q)
		}
	}
	if f.StatefulSet != nil {
		if q, ok := api.TemplateSize(f.StatefulSet.Spec.VolumeClaimTemplates); ok {
			take(q)
		}
	}
	return floor
}
