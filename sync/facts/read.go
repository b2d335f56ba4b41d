package facts

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// Read reads one request into its Facts: the record, the Leases, the cluster ID, the member list (truth),
// the Jobs and the alarms, distrusting each (docs/design/08-safety-rules.md).
func Read(o *wire.Observed, now time.Time) *Facts {
	p := &o.Parent
	f := &Facts{
		Now:              now,
		Names:            api.Names{Cluster: p.Name, Namespace: p.Namespace},
		Parent:           p,
		ClusterUID:       string(p.UID),
		Observed:         o,
		Leases:           map[int]*Lease{},
		Pods:             map[int]*corev1.Pod{},
		PVCs:             map[int]*corev1.PersistentVolumeClaim{},
		RemoveJobs:       map[string][]*Job{},
		DeleteVolumeJobs: map[int][]*Job{},
		GrowJobs:         map[int][]*Job{},
	}
	f.Truth.Primary = map[int]*Member{}
	// Before anything reads a value carried inside a string or a status list (bounds.go).
	f.Distrusted = boundObserved(o, f.Names.ConfigMap())
	f.StatefulSet = o.StatefulSets[f.Names.StatefulSet()]
	f.cm = o.ConfigMaps[f.Names.ConfigMap()]
	if f.cm != nil {
		if s, ok := f.cm.Data[api.ConfigKeySpec]; ok {
			f.Applied, f.Recorded = f.readSpecRecord(s)
		}
	}
	if f.cm != nil {
		// A ConfigMap written before the key existed belongs to a cluster that was running then.
		v, ok := f.cm.Data[api.ConfigKeyFormed]
		f.Formed = v == "true" || !ok
		f.DefragNowDone = f.cm.Data[api.ConfigKeyDefragNowDone]
		if v := f.cm.Data[api.ConfigKeyStandbyPromoted]; v != "" {
			var err error
			if f.StandbyPromoted, err = api.ParseStandbyPromoted(v); err != nil {
				// Kept as recorded (a promotion is never undone by a hand edit), but said.
				f.Distrusted = append(f.Distrusted, fmt.Sprintf("ConfigMap %s key %s does not parse (%v): the standby counts as promoted", f.Names.ConfigMap(), api.ConfigKeyStandbyPromoted, err))
				f.StandbyPromoted = &api.StandbyPromoted{Token: "unreadable"}
			}
		}
		f.readSpaceRecords()
	}
	for _, pod := range o.Pods {
		if i := f.Names.PodOrdinal(pod.Name); i >= 0 && ownedByStatefulSet(pod, f.Names.StatefulSet()) {
			f.Pods[i] = pod
		}
	}
	for _, pvc := range o.PVCs {
		if i := f.Names.PVCOrdinal(pvc.Name); i >= 0 {
			f.PVCs[i] = pvc
		}
	}
	f.readInPlace()
	f.readLeases()
	f.readStatic()
	f.readClusterID()
	if f.chooseInPlace() {
		// A restore starts or is abandoned: what is retired changed, and with it every report's worth.
		f.readLeases()
		f.readClusterID()
	}
	if f.unretireLive() {
		f.readLeases()
		f.readClusterID()
	}
	f.readTruth()
	f.readAlarms()
	f.readJobs()
	f.finishInPlace()
	f.InPlace.Refusal, f.InPlace.RestoreFrom = f.refusal(), f.restoreFrom()
	f.Candidate = f.checkCandidate()
	return f
}

func ownedByStatefulSet(pod *corev1.Pod, name string) bool {
	for _, r := range pod.OwnerReferences {
		if r.Kind == "StatefulSet" && r.Name == name && r.Controller != nil && *r.Controller {
			return true
		}
	}
	return false
}

func (f *Facts) readLeases() {
	lists := map[string][]api.Member{} // each distinct member list parsed once
	for _, l := range f.Observed.Leases {
		i := f.Names.LeaseOrdinal(l.Name)
		if i < 0 {
			continue
		}
		lv := &Lease{Ordinal: i, Lease: l}
		lv.Report, lv.reportErr = api.ParseReportUsing(l.Annotations, lists)
		if lv.reportErr != nil && !slices.Contains(f.reportErrs, l.Name) {
			// readLeases runs again after a restore's choice: each Lease is named once.
			f.reportErrs = append(f.reportErrs, l.Name)
			f.Distrusted = append(f.Distrusted, fmt.Sprintf("Lease %s: %v: its member list is ignored", l.Name, lv.reportErr))
		}
		if l.Spec.HolderIdentity != nil {
			lv.Holder = *l.Spec.HolderIdentity
		}
		lv.Renewed = l.CreationTimestamp.Time
		if l.Spec.RenewTime != nil {
			lv.Renewed = l.Spec.RenewTime.Time
		}
		// Freshness is judged on the hook's clock with the renewal interval the agent follows
		// (api.RenewInterval), not the duration written in the Lease: a hand-edited duration or a
		// renewTime from the future (beyond the skew bound) makes a report stale, never fresh for ever.
		// A healthy voter renews rarely; its slow interval counts only while its pod is Ready (the
		// kubelet's probe is then its heartbeat): with the pod not Ready, the agent is judged by the
		// interval of a member in trouble, as if its report were not a healthy voter's.
		interval := renewInterval(api.Report{})
		if f.PodReady(i) {
			interval = renewInterval(lv.Report)
		}
		d := UnhealthyAfterDurations * interval
		age := f.Now.Sub(lv.Renewed)
		lv.Fresh = l.Spec.RenewTime != nil && age <= d && age >= -MaxClockSkew
		if l.Spec.RenewTime != nil && age < -MaxClockSkew {
			f.Distrusted = append(f.Distrusted, fmt.Sprintf("Lease %s renewTime %s is ahead of the hook's clock by more than %s: its report is ignored",
				l.Name, lv.Renewed.UTC().Format(time.RFC3339), MaxClockSkew))
		}
		lv.Intent = l.Annotations[api.AnnIntent]
		lv.IntentSince = l.Annotations[api.AnnIntentSince]
		lv.JoinPermitted = l.Annotations[api.AnnJoinPermitted]
		lv.joinDeadline = l.Annotations[api.AnnJoinDeadline]
		// The steps asked, read as the agents read them (api.ParseIntent): a value an agent ignores (a
		// hand edit; the agent reports it as a LeaseProblem) asks for nothing here either, and so holds
		// no other step as a restart in place that never comes.
		in, _ := api.ParseIntent(l.Annotations)
		lv.Defrag = in.Defrag
		lv.CARotation, lv.CARestart = in.CARotation, in.CARestart
		lv.PeerScheme = in.PeerScheme
		lv.Recover = in.Recover
		// Read as the agent reads it: a window the agent would not join under is no permission here.
		if lv.Join, _ = api.ParseJoinWindow(lv.JoinPermitted, lv.joinDeadline); lv.Join.IsZero() {
			lv.JoinPermitted, lv.joinDeadline = "", ""
		}
		// A report from another parent (a deleted cluster of the same name) says nothing about ours.
		if lv.Report.ClusterUID != "" && lv.Report.ClusterUID != f.ClusterUID {
			lv.Report = api.Report{Error: lv.Report.Error, Role: api.RoleNone}
		}
		// Nor does a report of a cluster an in-place restore replaced (its member has not restarted yet).
		// Once a restore is committed no pod of a replaced cluster can run (every member stopped before
		// the Job, and agents move replaced data aside before starting): a ready pod holding its Lease
		// that reports such an ID as a healthy voter means the record lies (a hand edit), see
		// unretireLive.
		if f.retired[lv.Report.ClusterID] {
			if r := f.InPlace.Record; r != nil && (r.Committed || r.Done) && lv.Fresh && lv.Report.IsVoter() && lv.Report.Healthy &&
				f.PodReady(i) && lv.Holder == string(f.Pods[i].UID) && !slices.Contains(f.liveRetired, lv.Report.ClusterID) {
				f.liveRetired = append(f.liveRetired, lv.Report.ClusterID)
			}
			lv.Report = api.Report{Role: api.RoleNone}
		}
		f.Leases[i] = lv
	}
}

// readClusterID latches the cluster ID and the bootstrapped flag from every source (docs/design/05-request.md §5.4).
func (f *Facts) readClusterID() {
	f.ClusterID, f.ClusterIDs = "", nil
	ids := map[string]bool{}
	add := func(id string) {
		if id != "" && !f.retired[id] {
			ids[id] = true
		}
	}
	add(f.Parent.Status.ClusterID)
	if f.cm != nil {
		add(f.cm.Data[api.ConfigKeyClusterID])
	}
	for _, lv := range f.SortedLeases() {
		add(lv.Report.ClusterID)
	}
	for id := range ids {
		f.ClusterIDs = append(f.ClusterIDs, id)
	}
	sort.Strings(f.ClusterIDs)
	f.SplitBrain = len(f.ClusterIDs) > 1
	// The first source in order of authority wins: status, then ConfigMap, then the reports.
	switch {
	case f.Parent.Status.ClusterID != "" && !f.retired[f.Parent.Status.ClusterID]:
		f.ClusterID = f.Parent.Status.ClusterID
	case f.cm != nil && f.cm.Data[api.ConfigKeyClusterID] != "" && !f.retired[f.cm.Data[api.ConfigKeyClusterID]]:
		f.ClusterID = f.cm.Data[api.ConfigKeyClusterID]
	case len(f.ClusterIDs) > 0:
		f.ClusterID = f.ClusterIDs[0]
	}
	// Replicas above one are evidence of a bootstrap, except beside the record of a static creation,
	// which renders every member at once (static.go).
	f.Bootstrapped = f.ClusterID != "" || f.Parent.Status.Bootstrapped ||
		(f.cm != nil && f.cm.Data[api.ConfigKeyBootstrapped] == "true") ||
		(f.StaticRecord == 0 && f.StatefulSet != nil && f.StatefulSet.Spec.Replicas != nil && *f.StatefulSet.Spec.Replicas > 1)
	for _, lv := range f.Leases {
		switch lv.Report.Role {
		case api.RoleLeader, api.RoleVoter, api.RoleLearner, api.RoleLeft:
			f.Bootstrapped = true
		}
	}
	// A claim of this cluster (its UID label) at an ordinal above 0 exists only because the hook once
	// raised replicas, which it does only after bootstrap: evidence that survives a wiped status, a
	// deleted ConfigMap, emptied Leases and a StatefulSet scaled back to one.
	// With adoptExistingData, kept claims of an old cluster of this name above ordinal 0 are the same
	// evidence: their data is a cluster to adopt, never one to seed beside.
	for i, pvc := range f.PVCs {
		// A static creation in force makes every claim at once: they are evidence only beside a record
		// that does not agree (then the creation is held, or over).
		if i > 0 && f.Static == 0 && (pvc.Labels[api.LabelClusterUID] == f.ClusterUID || f.Parent.Spec.AdoptExistingData) {
			f.Bootstrapped = true
		}
	}
}

// readTruth picks the freshest member list a healthy voter reported and maps its members to ordinals.
func (f *Facts) readTruth() {
	// One pass over the healthy voters' lists: the freshest is the truth; the union of all of them (the
	// highest ordinal any lists, the most voters any counts) is the safe view for lowering decisions.
	var best *Lease
	f.Truth.UnionHighest = -1
	for _, lv := range f.SortedLeases() {
		if lv.Report.Members == nil || !f.ReportsHealthyVoter(lv.Ordinal, "") {
			continue
		}
		if best == nil || lv.Renewed.After(best.Renewed) {
			best = lv
		}
		voters := 0
		for _, m := range lv.Report.Members {
			if i := f.Names.PeerURLOrdinal(m.PeerURL); i > f.Truth.UnionHighest {
				f.Truth.UnionHighest = i
			}
			if !m.Learner {
				voters++
			}
		}
		f.Truth.UnionVoters = max(f.Truth.UnionVoters, voters)
	}
	versions := map[api.SemVer]bool{}
	for _, lv := range f.Leases {
		if lv.Report.MemberID == "" {
			continue
		}
		if v, err := api.ParseVersion(lv.Report.Version); err == nil {
			versions[v] = true
		}
	}
	// Without a report, the versions the members last ran are taken from the hook's own record (the
	// ConfigMap), then from status: the floor of the upgrade path must not vanish with the reports.
	if len(versions) == 0 && f.cm != nil {
		for _, s := range strings.Fields(f.cm.Data[api.ConfigKeyRunning]) {
			if v, err := api.ParseVersion(s); err == nil {
				versions[v] = true
			}
		}
	}
	if v, err := api.ParseVersion(f.Parent.Status.CurrentVersion); err == nil && len(versions) == 0 {
		versions[v] = true
	}
	for v := range versions {
		f.Running = append(f.Running, v)
	}
	f.readImageVersions()
	sort.Slice(f.Running, func(i, j int) bool { return f.Running[i].Less(f.Running[j]) })
	if best == nil {
		return
	}
	f.Truth.list = best.Report.Members
	f.Truth.from = best.Ordinal
	f.Truth.LeaderID = best.Report.LeaderID
	deadAfter := time.Duration(api.DefaultDeadMemberSeconds) * time.Second
	if f.Applied != nil {
		deadAfter = time.Duration(*f.Applied.Timeouts.DeadMemberSeconds) * time.Second
	}
	byOrdinal := map[int][]*Member{}
	for _, m := range f.Truth.list {
		mv := &Member{Member: m, Ordinal: f.Names.PeerURLOrdinal(m.PeerURL)}
		if mv.Ordinal >= api.MaxSize {
			mv.Ordinal = -1
		}
		if mv.Ordinal >= 0 {
			lv := f.Leases[mv.Ordinal]
			if lv != nil && lv.Report.MemberID == m.ID {
				mv.Version = lv.Report.Version
				mv.DBSize, mv.DBSizeInUse = lv.Report.DBSize, lv.Report.DBSizeInUse
				if t, err := time.Parse(time.RFC3339, lv.Report.LastDefrag); err == nil && !t.After(f.Now.Add(MaxClockSkew)) {
					mv.LastDefrag = &metav1.Time{Time: t.UTC()}
				}
			}
			if m.Learner {
				mv.Healthy = lv != nil && lv.Fresh && lv.Report.MemberID == m.ID && lv.Report.Healthy
			} else {
				mv.Healthy = f.ReportsHealthyVoter(mv.Ordinal, m.ID)
			}
			// Dead: no renewal and no ready pod for deadMemberSeconds. Both clocks count: a healthy
			// voter renews only every api.HealthyRenewSeconds, so a Lease that old says nothing on its
			// own, and a readiness blip of a healthy member must not make it dead. Without a pod at all
			// (no Ready pod "for ever"), the Lease is stale only once the renewal its last report
			// promised is overdue (overdueAfter): a roll leaves an ordinal without a pod for a moment,
			// and with deadMemberSeconds below a healthy voter's renewal interval a sync in that moment
			// made the member dead and replaced it (TestUpgradeEtcdhook's downgrade, deadMemberSeconds
			// 120). A pod that exists (Pending, or being deleted) is judged by the plain rule.
			stale := lv == nil
			if lv != nil {
				age := f.Now.Sub(lv.Renewed)
				stale = age >= deadAfter && (f.Pods[mv.Ordinal] != nil || age >= overdueAfter(lv.Report))
			}
			mv.Dead = !mv.Healthy && stale && f.notReadyFor(mv.Ordinal) >= deadAfter
			byOrdinal[mv.Ordinal] = append(byOrdinal[mv.Ordinal], mv)
		} else {
			mv.Dead = true
			f.Truth.Orphans = append(f.Truth.Orphans, mv)
		}
		f.Truth.Members = append(f.Truth.Members, mv)
	}
	// A second ID at one ordinal is an orphan: keep the one the ordinal's agent reports, else a started voter.
	for i, ms := range byOrdinal {
		sort.Slice(ms, func(a, b int) bool { return f.preferMember(i, ms[a], ms[b]) })
		f.Truth.Primary[i] = ms[0]
		for _, m := range ms[1:] {
			m.Ordinal = -1
			f.Truth.Orphans = append(f.Truth.Orphans, m)
		}
	}
	sort.Slice(f.Truth.Orphans, func(a, b int) bool { return f.Truth.Orphans[a].ID < f.Truth.Orphans[b].ID })
	f.Truth.countVoters()
	sort.Slice(f.Truth.Members, func(a, b int) bool {
		if f.Truth.Members[a].Ordinal != f.Truth.Members[b].Ordinal {
			return f.Truth.Members[a].Ordinal < f.Truth.Members[b].Ordinal
		}
		return f.Truth.Members[a].ID < f.Truth.Members[b].ID
	})
}

// readImageVersions reads the versions in the etcd images of the pods whose etcd container ran
// (started, running, or restarted: a pod that never pulled its image wrote nothing).
func (f *Facts) readImageVersions() {
	seen := map[api.SemVer]bool{}
	add := func(image string) {
		if v, ok := imageVersion(image); ok && !seen[v] {
			seen[v] = true
			f.ImageVersions = append(f.ImageVersions, v)
		}
	}
	// Not the template's image: it is what the hook asked for, and a tag that never started (an
	// upgrade whose image cannot be pulled) must not forbid going back.
	for _, i := range slices.Sorted(maps.Keys(f.Pods)) {
		for _, cs := range f.Pods[i].Status.ContainerStatuses {
			ran := cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil ||
				cs.RestartCount > 0 || (cs.Started != nil && *cs.Started)
			if cs.Name == "etcd" && ran {
				add(cs.Image)
			}
		}
	}
}

// imageVersion reads the version of an etcd image reference: its tag, v3.6.16 (as rendered) or
// 3.6.16, before any digest. Another tag is no evidence.
func imageVersion(image string) (api.SemVer, bool) {
	ref, _, _ := strings.Cut(image, "@")
	i := strings.LastIndexByte(ref, ':')
	if i < 0 || strings.Contains(ref[i:], "/") {
		return api.SemVer{}, false
	}
	v, err := api.ParseVersion(strings.TrimPrefix(ref[i+1:], "v"))
	return v, err == nil
}

func (f *Facts) preferMember(i int, a, b *Member) bool {
	if lv := f.Leases[i]; lv != nil {
		if (lv.Report.MemberID == a.ID) != (lv.Report.MemberID == b.ID) {
			return lv.Report.MemberID == a.ID
		}
	}
	if a.Started != b.Started {
		return a.Started
	}
	if a.Learner != b.Learner {
		return !a.Learner
	}
	return a.ID < b.ID
}

// TruthOf is a known truth of members alone (their list), counted as readTruth counts one: for tests
// of the decision that build their facts by hand.
func TruthOf(members []*Member) Truth {
	t := Truth{Members: members, list: []api.Member{}}
	for _, m := range members {
		t.list = append(t.list, m.Member)
	}
	t.countVoters()
	return t
}

// countVoters counts the truth's voters once its members are known (readTruth).
func (t *Truth) countVoters() {
	t.allVoters, t.healthyVoters = 0, 0
	for _, m := range t.Members {
		if m.Voter() {
			t.allVoters++
			if m.Healthy {
				t.healthyVoters++
			}
		}
	}
}

func (f *Facts) readJobs() {
	rmPrefix := f.Names.Cluster + "-rm-"
	deleteVolumePrefix := f.Names.Cluster + "-pvc-"
	growPrefix := f.Names.Cluster + "-grow-"
	templatePrefix := f.Names.Cluster + "-vct-"
	for _, j := range f.Observed.Jobs {
		jv := &Job{Job: j, ordinal: -1}
		jv.State, jv.Finished = JobStatus(j)
		jv.Refused = jv.State == JobFailed && jobRefused(j)
		switch {
		case strings.HasPrefix(j.Name, rmPrefix):
			id, n, ok := splitAttempt(strings.TrimPrefix(j.Name, rmPrefix))
			if !ok {
				continue
			}
			if _, err := api.ParseID(id); err != nil {
				continue
			}
			jv.memberID, jv.Attempt = id, n
			f.RemoveJobs[id] = append(f.RemoveJobs[id], jv)
		case strings.HasPrefix(j.Name, deleteVolumePrefix):
			addOrdinalJob(f.DeleteVolumeJobs, jv, strings.TrimPrefix(j.Name, deleteVolumePrefix), false)
		case strings.HasPrefix(j.Name, growPrefix):
			addOrdinalJob(f.GrowJobs, jv, strings.TrimPrefix(j.Name, growPrefix), true)
		case strings.HasPrefix(j.Name, templatePrefix):
			n, err := strconv.Atoi(strings.TrimPrefix(j.Name, templatePrefix))
			if err != nil || n < 1 || strconv.Itoa(n) != strings.TrimPrefix(j.Name, templatePrefix) {
				continue
			}
			jv.Attempt = n
			f.TemplateJobs = append(f.TemplateJobs, jv)
		}
	}
	for _, js := range f.GrowJobs {
		sort.Slice(js, func(a, b int) bool { return js[a].Attempt < js[b].Attempt })
	}
	sort.Slice(f.TemplateJobs, func(a, b int) bool { return f.TemplateJobs[a].Attempt < f.TemplateJobs[b].Attempt })
	for _, js := range f.RemoveJobs {
		sort.Slice(js, func(a, b int) bool { return js[a].Attempt < js[b].Attempt })
	}
	for _, js := range f.DeleteVolumeJobs {
		sort.Slice(js, func(a, b int) bool { return js[a].Attempt < js[b].Attempt })
	}
}

// addOrdinalJob files a per-member Job under its ordinal, read from its name's "<ordinal>-<attempt>"
// suffix (splitAttempt) with the ordinal below api.MaxSize; a Job whose suffix does not read is left out.
// canonical also refuses an ordinal not written as strconv.Itoa writes it ("01", "+1"): grow Jobs are
// read that way, claim-delete Jobs (pvc) have always been read without it.
func addOrdinalJob(into map[int][]*Job, jv *Job, suffix string, canonical bool) {
	o, n, ok := splitAttempt(suffix)
	if !ok {
		return
	}
	i, err := strconv.Atoi(o)
	if err != nil || i < 0 || i >= api.MaxSize || (canonical && strconv.Itoa(i) != o) {
		return
	}
	jv.ordinal, jv.Attempt = i, n
	into[i] = append(into[i], jv)
}

func splitAttempt(s string) (string, int, bool) {
	i := strings.LastIndexByte(s, '-')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n < 1 || strconv.Itoa(n) != s[i+1:] {
		return "", 0, false
	}
	return s[:i], n, true
}

// readAlarms collects the alarms of the fresh reports. An alarm may name a member that is no longer in
// the member list: etcd keeps an alarm after its member is removed, and it still refuses writes
// cluster-wide, so it counts (the NOSPACE recovery disarms it, steps.Defrag). A hand edit of the
// agent-owned annotation is rewritten from etcd at the agent's next report.
func (f *Facts) readAlarms() {
	for _, lv := range f.SortedLeases() {
		if !lv.Fresh {
			continue
		}
		for _, a := range lv.Report.Alarms {
			typ, id, _ := strings.Cut(a, "@")
			if f.Alarms == nil {
				f.Alarms = map[string][]string{}
			}
			if !slices.Contains(f.Alarms[typ], id) {
				f.Alarms[typ] = append(f.Alarms[typ], id)
			}
		}
	}
}

// readSpaceRecords reads the raised quota and storage the hook recorded. A value that does not parse
// is ignored, and said: the records only ever raise, so dropping one renders the spec's (smaller)
// figure, which the next sync raises again if the data still needs it.
func (f *Facts) readSpaceRecords() {
	if v := f.ConfigValue(api.ConfigKeySpaceQuota); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			f.Distrusted = append(f.Distrusted, fmt.Sprintf("ConfigMap %s key %s %q is ignored: not a positive number of bytes", f.Names.ConfigMap(), api.ConfigKeySpaceQuota, v))
		} else {
			f.SpaceQuota = n
		}
	}
	if v := f.ConfigValue(api.ConfigKeySpaceStorage); v != "" {
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() <= 0 {
			f.Distrusted = append(f.Distrusted, fmt.Sprintf("ConfigMap %s key %s %q is ignored: not a positive quantity", f.Names.ConfigMap(), api.ConfigKeySpaceStorage, v))
		} else {
			f.SpaceStorage = &q
		}
	}
}
