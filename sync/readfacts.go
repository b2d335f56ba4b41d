package sync

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// newFacts reads one request into facts: the record, the Leases, the cluster ID, the member list (truth),
// the Jobs and the alarms, distrusting each (docs/design/08-safety-rules.md).
func newFacts(o *Observed, now time.Time) *facts {
	p := &o.Parent
	f := &facts{
		now:              now,
		names:            api.Names{Cluster: p.Name, Namespace: p.Namespace},
		parent:           p,
		clusterUID:       string(p.UID),
		obs:              o,
		leases:           map[int]*leaseView{},
		pods:             map[int]*corev1.Pod{},
		pvcs:             map[int]*corev1.PersistentVolumeClaim{},
		primary:          map[int]*memberView{},
		removeJobs:       map[string][]*jobView{},
		deleteVolumeJobs: map[int][]*jobView{},
		growJobs:         map[int][]*jobView{},
	}
	// Before anything reads a value carried inside a string or a status list (bounds.go).
	f.distrusted = boundObserved(o, f.names.ConfigMap())
	f.sts = o.StatefulSets[f.names.StatefulSet()]
	f.cm = o.ConfigMaps[f.names.ConfigMap()]
	if f.cm != nil {
		if s, ok := f.cm.Data[api.ConfigKeySpec]; ok {
			f.applied, f.recorded = f.readSpecRecord(s)
		}
	}
	if f.cm != nil {
		// A ConfigMap written before the key existed belongs to a cluster that was running then.
		v, ok := f.cm.Data[api.ConfigKeyFormed]
		f.formed = v == "true" || !ok
		f.defragNowDone = f.cm.Data[api.ConfigKeyDefragNowDone]
		f.readSpaceRecords()
	}
	for _, pod := range o.Pods {
		if i := f.names.PodOrdinal(pod.Name); i >= 0 && ownedByStatefulSet(pod, f.names.StatefulSet()) {
			f.pods[i] = pod
		}
	}
	for _, pvc := range o.PVCs {
		if i := f.names.PVCOrdinal(pvc.Name); i >= 0 {
			f.pvcs[i] = pvc
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
	return f
}

// readSpecRecord reads the spec the hook recorded (ConfigMap spec.json). The record is an input like
// any other: the namespace's editors can write the ConfigMap. It is rendered from only if it passes the
// validation the parent's spec passes (Validate: applied); one that does not is named, and nothing it
// says is rendered: the hook adopts the parent's spec if that is valid against the record (recorded:
// ValidateChange, defaults) and no step is in flight, else it answers the children unchanged. The next
// answer records the spec in force again. Before, a record with --force-new-cluster in its options, or
// a size of 100000, was rendered whenever the parent's spec was invalid or paused.
func (f *facts) readSpecRecord(s string) (applied, recorded *api.ClusterSpec) {
	var spec api.ClusterSpec
	if err := wire.Unmarshal([]byte(s), &spec); err != nil {
		f.distrusted = append(f.distrusted, fmt.Sprintf("ConfigMap %s key %s is ignored: %v", f.names.ConfigMap(), api.ConfigKeySpec, err))
		return nil, nil
	}
	if spec.Security.TLS.Enabled == nil {
		// Recorded before TLS existed: that cluster runs without it.
		spec.Security.TLS.Enabled = ptr(false)
	}
	if spec.Network.Policy == nil {
		// Recorded before the NetworkPolicy existed: its clients may come from anywhere.
		spec.Network.Policy = ptr(false)
	}
	spec = api.Defaulted(spec)
	if ps := api.Validate(f.parent.Name, spec); len(ps) > 0 {
		msgs := make([]string, 0, len(ps))
		for _, p := range ps {
			msgs = append(msgs, p.Message)
		}
		f.distrusted = append(f.distrusted, fmt.Sprintf("ConfigMap %s key %s is ignored: the recorded spec fails validation (%s)",
			f.names.ConfigMap(), api.ConfigKeySpec, strings.Join(msgs, "; ")))
		return nil, &spec
	}
	return &spec, &spec
}

func ownedByStatefulSet(pod *corev1.Pod, name string) bool {
	for _, r := range pod.OwnerReferences {
		if r.Kind == "StatefulSet" && r.Name == name && r.Controller != nil && *r.Controller {
			return true
		}
	}
	return false
}

func (f *facts) readLeases() {
	lists := map[string][]api.Member{} // each distinct member list parsed once
	for _, l := range f.obs.Leases {
		i := f.names.LeaseOrdinal(l.Name)
		if i < 0 {
			continue
		}
		lv := &leaseView{ordinal: i, lease: l}
		lv.report, lv.reportErr = api.ParseReportUsing(l.Annotations, lists)
		if lv.reportErr != nil && !slices.Contains(f.reportErrs, l.Name) {
			// readLeases runs again after a restore's choice: each Lease is named once.
			f.reportErrs = append(f.reportErrs, l.Name)
			f.distrusted = append(f.distrusted, fmt.Sprintf("Lease %s: %v: its member list is ignored", l.Name, lv.reportErr))
		}
		if l.Spec.HolderIdentity != nil {
			lv.holder = *l.Spec.HolderIdentity
		}
		lv.renewed = l.CreationTimestamp.Time
		if l.Spec.RenewTime != nil {
			lv.renewed = l.Spec.RenewTime.Time
		}
		// Freshness is judged on the hook's clock with the renewal interval the agent follows
		// (api.RenewInterval), not the duration written in the Lease: a hand-edited duration or a
		// renewTime from the future (beyond the skew bound) makes a report stale, never fresh for ever.
		// A healthy voter renews rarely; its slow interval counts only while its pod is Ready (the
		// kubelet's probe is then its heartbeat): with the pod not Ready, the agent is judged by the
		// interval of a member in trouble, as if its report were not a healthy voter's.
		interval := api.RenewInterval(api.Report{}, api.DefaultLeaseDurationSeconds*time.Second)
		if f.podReady(i) {
			interval = api.RenewInterval(lv.report, api.DefaultLeaseDurationSeconds*time.Second)
		}
		d := UnhealthyAfterDurations * interval
		age := f.now.Sub(lv.renewed)
		lv.fresh = l.Spec.RenewTime != nil && age <= d && age >= -MaxClockSkew
		if l.Spec.RenewTime != nil && age < -MaxClockSkew {
			f.distrusted = append(f.distrusted, fmt.Sprintf("Lease %s renewTime %s is ahead of the hook's clock by more than %s: its report is ignored",
				l.Name, lv.renewed.UTC().Format(time.RFC3339), MaxClockSkew))
		}
		lv.intent = l.Annotations[api.AnnIntent]
		lv.intentSince = l.Annotations[api.AnnIntentSince]
		lv.joinPermitted = l.Annotations[api.AnnJoinPermitted]
		lv.joinDeadline = l.Annotations[api.AnnJoinDeadline]
		// The steps asked, read as the agents read them (api.ParseIntent): a value an agent ignores (a
		// hand edit; the agent reports it as a LeaseProblem) asks for nothing here either, and so holds
		// no other step as a restart in place that never comes.
		in, _ := api.ParseIntent(l.Annotations)
		lv.defrag = in.Defrag
		lv.caRotation, lv.caRestart = in.CARotation, in.CARestart
		lv.peerScheme = in.PeerScheme
		lv.recover = in.Recover
		// Read as the agent reads it: a window the agent would not join under is no permission here.
		if lv.join, _ = api.ParseJoinWindow(lv.joinPermitted, lv.joinDeadline); lv.join.IsZero() {
			lv.joinPermitted, lv.joinDeadline = "", ""
		}
		// A report from another parent (a deleted cluster of the same name) says nothing about ours.
		if lv.report.ClusterUID != "" && lv.report.ClusterUID != f.clusterUID {
			lv.report = api.Report{Error: lv.report.Error, Role: api.RoleNone}
		}
		// Nor does a report of a cluster an in-place restore replaced (its member has not restarted yet).
		// Once a restore is committed no pod of a replaced cluster can run (every member stopped before
		// the Job, and agents move replaced data aside before starting): a ready pod holding its Lease
		// that reports such an ID as a healthy voter means the record lies (a hand edit), see
		// unretireLive.
		if f.retired[lv.report.ClusterID] {
			if r := f.inPlace; r != nil && (r.Committed || r.Done) && lv.fresh && lv.report.IsVoter() && lv.report.Healthy &&
				f.podReady(i) && lv.holder == string(f.pods[i].UID) && !slices.Contains(f.liveRetired, lv.report.ClusterID) {
				f.liveRetired = append(f.liveRetired, lv.report.ClusterID)
			}
			lv.report = api.Report{Role: api.RoleNone}
		}
		f.leases[i] = lv
	}
}

// readClusterID latches the cluster ID and the bootstrapped flag from every source (docs/design/05-request.md §5.4).
func (f *facts) readClusterID() {
	f.clusterID, f.clusterIDs = "", nil
	ids := map[string]bool{}
	add := func(id string) {
		if id != "" && !f.retired[id] {
			ids[id] = true
		}
	}
	add(f.parent.Status.ClusterID)
	if f.cm != nil {
		add(f.cm.Data[api.ConfigKeyClusterID])
	}
	for _, lv := range f.sortedLeases() {
		add(lv.report.ClusterID)
	}
	for id := range ids {
		f.clusterIDs = append(f.clusterIDs, id)
	}
	sort.Strings(f.clusterIDs)
	f.splitBrain = len(f.clusterIDs) > 1
	// The first source in order of authority wins: status, then ConfigMap, then the reports.
	switch {
	case f.parent.Status.ClusterID != "" && !f.retired[f.parent.Status.ClusterID]:
		f.clusterID = f.parent.Status.ClusterID
	case f.cm != nil && f.cm.Data[api.ConfigKeyClusterID] != "" && !f.retired[f.cm.Data[api.ConfigKeyClusterID]]:
		f.clusterID = f.cm.Data[api.ConfigKeyClusterID]
	case len(f.clusterIDs) > 0:
		f.clusterID = f.clusterIDs[0]
	}
	// Replicas above one are evidence of a bootstrap, except beside the record of a static creation,
	// which renders every member at once (staticfacts.go).
	f.bootstrapped = f.clusterID != "" || f.parent.Status.Bootstrapped ||
		(f.cm != nil && f.cm.Data[api.ConfigKeyBootstrapped] == "true") ||
		(f.staticRecord == 0 && f.sts != nil && f.sts.Spec.Replicas != nil && *f.sts.Spec.Replicas > 1)
	for _, lv := range f.leases {
		switch lv.report.Role {
		case api.RoleLeader, api.RoleVoter, api.RoleLearner, api.RoleLeft:
			f.bootstrapped = true
		}
	}
	// A claim of this cluster (its UID label) at an ordinal above 0 exists only because the hook once
	// raised replicas, which it does only after bootstrap: evidence that survives a wiped status, a
	// deleted ConfigMap, emptied Leases and a StatefulSet scaled back to one.
	// With adoptExistingData, kept claims of an old cluster of this name above ordinal 0 are the same
	// evidence: their data is a cluster to adopt, never one to seed beside.
	for i, pvc := range f.pvcs {
		// A static creation in force makes every claim at once: they are evidence only beside a record
		// that does not agree (then the creation is held, or over).
		if i > 0 && f.static == 0 && (pvc.Labels[api.LabelClusterUID] == f.clusterUID || f.parent.Spec.AdoptExistingData) {
			f.bootstrapped = true
		}
	}
}

// readTruth picks the freshest member list a healthy voter reported and maps its members to ordinals.
func (f *facts) readTruth() {
	// One pass over the healthy voters' lists: the freshest is the truth; the union of all of them (the
	// highest ordinal any lists, the most voters any counts) is the safe view for lowering decisions.
	var best *leaseView
	f.unionHighest = -1
	for _, lv := range f.sortedLeases() {
		if lv.report.Members == nil || !f.reportsHealthyVoter(lv.ordinal, "") {
			continue
		}
		if best == nil || lv.renewed.After(best.renewed) {
			best = lv
		}
		voters := 0
		for _, m := range lv.report.Members {
			if i := f.names.PeerURLOrdinal(m.PeerURL); i > f.unionHighest {
				f.unionHighest = i
			}
			if !m.Learner {
				voters++
			}
		}
		f.unionVoters = max(f.unionVoters, voters)
	}
	versions := map[api.SemVer]bool{}
	for _, lv := range f.leases {
		if lv.report.MemberID == "" {
			continue
		}
		if v, err := api.ParseVersion(lv.report.Version); err == nil {
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
	if v, err := api.ParseVersion(f.parent.Status.CurrentVersion); err == nil && len(versions) == 0 {
		versions[v] = true
	}
	for v := range versions {
		f.running = append(f.running, v)
	}
	f.readImageVersions()
	sort.Slice(f.running, func(i, j int) bool { return f.running[i].Less(f.running[j]) })
	if best == nil {
		return
	}
	f.truth = best.report.Members
	f.truthFrom = best.ordinal
	f.leaderID = best.report.LeaderID
	deadAfter := time.Duration(api.DefaultDeadMemberSeconds) * time.Second
	if f.applied != nil {
		deadAfter = time.Duration(*f.applied.Timeouts.DeadMemberSeconds) * time.Second
	}
	byOrdinal := map[int][]*memberView{}
	for _, m := range f.truth {
		mv := &memberView{Member: m, ordinal: f.names.PeerURLOrdinal(m.PeerURL)}
		if mv.ordinal >= api.MaxSize {
			mv.ordinal = -1
		}
		if mv.ordinal >= 0 {
			lv := f.leases[mv.ordinal]
			if lv != nil && lv.report.MemberID == m.ID {
				mv.version = lv.report.Version
				mv.dbSize, mv.dbSizeInUse = lv.report.DBSize, lv.report.DBSizeInUse
				if t, err := time.Parse(time.RFC3339, lv.report.LastDefrag); err == nil && !t.After(f.now.Add(MaxClockSkew)) {
					mv.lastDefrag = &metav1.Time{Time: t.UTC()}
				}
			}
			if m.Learner {
				mv.healthy = lv != nil && lv.fresh && lv.report.MemberID == m.ID && lv.report.Healthy
			} else {
				mv.healthy = f.reportsHealthyVoter(mv.ordinal, m.ID)
			}
			// Dead: no renewal and no ready pod for deadMemberSeconds. Both clocks count: a healthy
			// voter renews only every api.HealthyRenewSeconds, so a Lease that old says nothing on its
			// own, and a readiness blip of a healthy member must not make it dead. Nor is a Lease stale
			// before the renewal its last report promised is overdue (overdueAfter): with
			// deadMemberSeconds below that interval, every roll made a healthy voter dead in the moment
			// its pod was gone (no Ready pod "for ever", a Lease older than deadMemberSeconds) and
			// replaced it (TestUpgradeEtcdhook's downgrade, 3 members, deadMemberSeconds 120).
			stale := lv == nil || f.now.Sub(lv.renewed) >= max(deadAfter, overdueAfter(lv.report))
			mv.dead = !mv.healthy && stale && f.notReadyFor(mv.ordinal) >= deadAfter
			byOrdinal[mv.ordinal] = append(byOrdinal[mv.ordinal], mv)
		} else {
			mv.dead = true
			f.orphans = append(f.orphans, mv)
		}
		f.members = append(f.members, mv)
	}
	// A second ID at one ordinal is an orphan: keep the one the ordinal's agent reports, else a started voter.
	for i, ms := range byOrdinal {
		sort.Slice(ms, func(a, b int) bool { return f.preferMember(i, ms[a], ms[b]) })
		f.primary[i] = ms[0]
		for _, m := range ms[1:] {
			m.ordinal = -1
			f.orphans = append(f.orphans, m)
		}
	}
	sort.Slice(f.orphans, func(a, b int) bool { return f.orphans[a].ID < f.orphans[b].ID })
	f.countVoters()
	sort.Slice(f.members, func(a, b int) bool {
		if f.members[a].ordinal != f.members[b].ordinal {
			return f.members[a].ordinal < f.members[b].ordinal
		}
		return f.members[a].ID < f.members[b].ID
	})
}

// readImageVersions reads the versions in the etcd images of the pods whose etcd container ran
// (started, running, or restarted: a pod that never pulled its image wrote nothing).
func (f *facts) readImageVersions() {
	seen := map[api.SemVer]bool{}
	add := func(image string) {
		if v, ok := imageVersion(image); ok && !seen[v] {
			seen[v] = true
			f.imageVersions = append(f.imageVersions, v)
		}
	}
	// Not the template's image: it is what the hook asked for, and a tag that never started (an
	// upgrade whose image cannot be pulled) must not forbid going back.
	for _, i := range sortedKeys(f.pods) {
		for _, cs := range f.pods[i].Status.ContainerStatuses {
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

func (f *facts) preferMember(i int, a, b *memberView) bool {
	if lv := f.leases[i]; lv != nil {
		if (lv.report.MemberID == a.ID) != (lv.report.MemberID == b.ID) {
			return lv.report.MemberID == a.ID
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

// countVoters counts the truth's voters once its members are known (readTruth).
func (f *facts) countVoters() {
	f.allVoters, f.healthyVoters = 0, 0
	for _, m := range f.members {
		if m.voter() {
			f.allVoters++
			if m.healthy {
				f.healthyVoters++
			}
		}
	}
}

func (f *facts) readJobs() {
	rmPrefix := f.names.Cluster + "-rm-"
	deleteVolumePrefix := f.names.Cluster + "-pvc-"
	growPrefix := f.names.Cluster + "-grow-"
	templatePrefix := f.names.Cluster + "-vct-"
	for _, j := range f.obs.Jobs {
		jv := &jobView{job: j, ordinal: -1}
		jv.state, jv.finished = jobStatus(j)
		jv.refused = jv.state == jobFailed && jobRefused(j)
		switch {
		case strings.HasPrefix(j.Name, rmPrefix):
			id, n, ok := splitAttempt(strings.TrimPrefix(j.Name, rmPrefix))
			if !ok {
				continue
			}
			if _, err := api.ParseID(id); err != nil {
				continue
			}
			jv.memberID, jv.attempt = id, n
			f.removeJobs[id] = append(f.removeJobs[id], jv)
		case strings.HasPrefix(j.Name, deleteVolumePrefix):
			addOrdinalJob(f.deleteVolumeJobs, jv, strings.TrimPrefix(j.Name, deleteVolumePrefix), false)
		case strings.HasPrefix(j.Name, growPrefix):
			addOrdinalJob(f.growJobs, jv, strings.TrimPrefix(j.Name, growPrefix), true)
		case strings.HasPrefix(j.Name, templatePrefix):
			n, err := strconv.Atoi(strings.TrimPrefix(j.Name, templatePrefix))
			if err != nil || n < 1 || strconv.Itoa(n) != strings.TrimPrefix(j.Name, templatePrefix) {
				continue
			}
			jv.attempt = n
			f.templateJobs = append(f.templateJobs, jv)
		}
	}
	for _, js := range f.growJobs {
		sort.Slice(js, func(a, b int) bool { return js[a].attempt < js[b].attempt })
	}
	sort.Slice(f.templateJobs, func(a, b int) bool { return f.templateJobs[a].attempt < f.templateJobs[b].attempt })
	for _, js := range f.removeJobs {
		sort.Slice(js, func(a, b int) bool { return js[a].attempt < js[b].attempt })
	}
	for _, js := range f.deleteVolumeJobs {
		sort.Slice(js, func(a, b int) bool { return js[a].attempt < js[b].attempt })
	}
}

// addOrdinalJob files a per-member Job under its ordinal, read from its name's "<ordinal>-<attempt>"
// suffix (splitAttempt) with the ordinal below api.MaxSize; a Job whose suffix does not read is left out.
// canonical also refuses an ordinal not written as strconv.Itoa writes it ("01", "+1"): grow Jobs are
// read that way, claim-delete Jobs (pvc) have always been read without it.
func addOrdinalJob(into map[int][]*jobView, jv *jobView, suffix string, canonical bool) {
	o, n, ok := splitAttempt(suffix)
	if !ok {
		return
	}
	i, err := strconv.Atoi(o)
	if err != nil || i < 0 || i >= api.MaxSize || (canonical && strconv.Itoa(i) != o) {
		return
	}
	jv.ordinal, jv.attempt = i, n
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
// cluster-wide, so it counts (the NOSPACE recovery disarms it, decideDefrag). A hand edit of the
// agent-owned annotation is rewritten from etcd at the agent's next report.
func (f *facts) readAlarms() {
	for _, lv := range f.sortedLeases() {
		if !lv.fresh {
			continue
		}
		for _, a := range lv.report.Alarms {
			typ, id, _ := strings.Cut(a, "@")
			if f.alarms == nil {
				f.alarms = map[string][]string{}
			}
			if !slices.Contains(f.alarms[typ], id) {
				f.alarms[typ] = append(f.alarms[typ], id)
			}
		}
	}
}
