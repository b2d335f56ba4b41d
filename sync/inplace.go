package sync

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/sync/render"
)

// An in-place restore (docs/design/16-backup-restore.md §16.8): the etcd.io/restore-from annotation replaces the running
// cluster's data with a snapshot. First a Job verifies the snapshot while the cluster serves (it is
// downloaded, checked against its manifest and etcd's hash, restored into scratch space by etcd's
// library, and refused if it is another cluster's): a request that cannot be carried out costs nothing.
// Then every member stops; one Job restores the snapshot into ordinal 0's
// volume (the old data moved aside there); pod 0 starts alone on it as a new one-member cluster, and the
// other members, whose agents move the replaced cluster's data aside, join it one at a time as in every
// scale-up. Nothing membership-related runs while the members are down, and the cluster IDs it replaces
// are retired: no report, member list or data directory of theirs counts again.

// maxRemembered bounds the record's lists (values seen, cluster IDs retired): the oldest go first.
const maxRemembered = 16

// inPlaceRecord is the ConfigMap's record of in-place restores (api.ConfigKeyRestoreInPlace): the last
// one (Request empty when there was none, or the last was withdrawn before any other ran) and the memory
// every restore adds to (Seen, Retired).
type inPlaceRecord struct {
	// Request is the source of the last restore: the etcd.io/restore-from value, or <destination>/latest
	// for an automatic one.
	Request string `json:"request,omitempty"`
	// Retired are the cluster IDs restores replaced, this one's included (the IDs known when it
	// started), newest last: no report, member list or data directory of theirs counts again.
	Retired []string `json:"retired,omitempty"`
	// Committed: the restore Job succeeded, ordinal 0's volume holds the snapshot. From here on the
	// restore finishes whatever the annotation says.
	Committed bool `json:"committed,omitempty"`
	// Done: a healthy voter of the restored cluster reports; the cluster grows back as in any scale-up.
	Done bool `json:"done,omitempty"`
	// Lost names the members that ran without their data when spec.backup.restoreOnQuorumLoss started
	// this restore (empty for one the annotation asked for).
	Lost []string `json:"lost,omitempty"`
	// Seen are the etcd.io/restore-from values acted on (carried out, refused or withdrawn), newest
	// last: a value is acted on once, whatever came after it.
	Seen []string `json:"seen,omitempty"`
	// Refused is the last value refused and why (shown while the annotation holds it).
	Refused    string `json:"refused,omitempty"`
	RefusedWhy string `json:"refusedWhy,omitempty"`
	// RefusedLost: the refused value was restoreOnQuorumLoss's (not the annotation's): no automatic
	// restore starts from it again until restoreOnQuorumLoss is switched off and on.
	RefusedLost bool `json:"refusedLost,omitempty"`
	// Verifying: the verify Job checks the snapshot while the cluster serves. Replacing are the cluster
	// IDs live when the restore started: retired (moved to Retired) only once the snapshot passed, so
	// that nothing is judged differently, and nothing stops, before.
	Verifying bool     `json:"verifying,omitempty"`
	Replacing []string `json:"replacing,omitempty"`
	// Snapshot and SHA256 are the snapshot the verification passed: the restore Job restores exactly
	// that one (a "latest" that moved on meanwhile still finds it by its hash).
	Snapshot string `json:"snapshot,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
	// AcceptCluster is the etcd.io/restore-foreign-cluster value when the restore started.
	AcceptCluster string `json:"acceptCluster,omitempty"`
	// Prior is the record this restore replaced, kept until it commits: a restore withdrawn before its
	// data was replaced goes back to it (its retired IDs, its last restore).
	Prior *inPlaceRecord `json:"prior,omitempty"`
}

// inFlight: a restore that has not finished.
func (r *inPlaceRecord) inFlight() bool { return r != nil && r.Request != "" && !r.Done }

// scrub keeps only fingerprints of values that carry secrets, in the record and the one it may go back
// to: an older hook wrote them whole, and quoted a refused one whole in RefusedWhy.
func (r *inPlaceRecord) scrub() {
	for ; r != nil; r = r.Prior {
		for i, v := range r.Seen {
			r.Seen[i] = backup.Fingerprint(v)
		}
		if r.Refused != "" && backup.Fingerprint(r.Refused) != r.Refused {
			r.Refused = backup.Fingerprint(r.Refused)
			r.RefusedWhy = "refused (its reason quoted the value, which carries secrets, and is not kept)"
		}
		if r.Request != "" && !backup.Secretless(r.Request) {
			// Never started (a value with secrets is refused): not a request to carry on with.
			r.Request = ""
		}
	}
}

// seen: v was acted on. Values are remembered by backup.Fingerprint: one that carries secrets (user
// info, a signature) is remembered by its hash, never written into the record or status.
func (r *inPlaceRecord) seen(v string) bool {
	return r != nil && slices.Contains(r.Seen, backup.Fingerprint(v))
}

// key identifies one restore: its request and the IDs it replaces. The Job's name and the restored
// cluster's token derive from it, so a second restore of the same source (the automatic restore of a
// second disaster, from the same /latest) gets another Job and other member and cluster IDs.
func (r *inPlaceRecord) key() string {
	// The IDs it replaces, retired or not yet (while Verifying): one key from its start to its end.
	return r.Request + " " + strings.Join(remember(r.Retired, r.Replacing...), ",")
}

// memory is the record without its last restore: what a new one starts from.
func (r *inPlaceRecord) memory() *inPlaceRecord {
	if r == nil {
		return &inPlaceRecord{}
	}
	return &inPlaceRecord{Retired: slices.Clone(r.Retired), Seen: slices.Clone(r.Seen)}
}

// withoutPrior is the record as a new restore keeps it to go back to.
func (r *inPlaceRecord) withoutPrior() *inPlaceRecord {
	if r == nil {
		return nil
	}
	c := *r
	c.Prior = nil
	return &c
}

// remember appends values not already present, keeping the newest maxRemembered.
func remember(list []string, values ...string) []string {
	out := slices.Clone(list)
	for _, v := range values {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	if len(out) > maxRemembered {
		out = out[len(out)-maxRemembered:]
	}
	return out
}

// In-place restore phases, as status.restore.phase shows them.
const (
	inPlaceVerifying = "Verifying"
	inPlaceStopping  = "Stopping"
	inPlaceRestoring = "Restoring"
	inPlaceStarting  = "Starting"
	inPlaceRestored  = "Restored"
)

// readInPlace parses the hook's record: the ConfigMap's, else the one status.restore keeps (a deleted
// ConfigMap must not forget a restore in flight, nor the IDs it retired). A record that does not parse
// is a hand edit and ignored. The IDs it retired count from here on.
func (f *facts) readInPlace() {
	if s := f.configValue(api.ConfigKeyRestoreInPlace); s != "" {
		var rec inPlaceRecord
		if err := json.Unmarshal([]byte(s), &rec); err != nil {
			f.distrusted = append(f.distrusted, fmt.Sprintf("ConfigMap %s key %s does not parse as the hook's record: ignored", f.names.ConfigMap(), api.ConfigKeyRestoreInPlace))
		} else {
			// A value written by an older hook may carry a secret (a refused URL with credentials): from
			// here on only its fingerprint is kept.
			rec.scrub()
			f.inPlace = &rec
		}
	}
	// A restore status shows Verifying has neither stopped nor retired anything: it is not rebuilt, and
	// starts again from the annotation.
	if r := f.parent.Status.Restore; f.inPlace == nil && r != nil && r.InPlace && r.Source != "" && r.Phase != inPlaceVerifying {
		// Rebuilt from status, the record does not know which annotation values were acted on: the one
		// on the parent now counts as seen (a restore is never started from a record half lost).
		f.inPlace = &inPlaceRecord{Request: r.Source, Retired: r.ReplacedClusterIDs, Lost: r.LostMembers,
			Committed: r.Phase == inPlaceStarting || r.Phase == inPlaceRestored, Done: r.Phase == inPlaceRestored,
			Seen: remember(nil, backup.Fingerprint(f.restoreFrom()))}
	}
	f.setRetired()
}

// unretireLive drops from the record the retired IDs that live members report (liveRetired): retired,
// they would make every restarting agent move its cluster's data aside. The record is rewritten
// without them and the hand edit is named in InputIgnored.
func (f *facts) unretireLive() bool {
	if len(f.liveRetired) == 0 || f.inPlace == nil {
		return false
	}
	for _, id := range f.liveRetired {
		f.inPlace.Retired = slices.DeleteFunc(slices.Clone(f.inPlace.Retired), func(r string) bool { return r == id })
		if p := f.inPlace.Prior; p != nil {
			p.Retired = slices.DeleteFunc(slices.Clone(p.Retired), func(r string) bool { return r == id })
		}
		f.distrusted = append(f.distrusted, fmt.Sprintf("the in-place restore record (ConfigMap %s key %s) lists cluster ID %s as replaced, but a ready member pod reports it as a healthy voter: not retired", f.names.ConfigMap(), api.ConfigKeyRestoreInPlace, id))
	}
	f.liveRetired = nil
	f.setRetired()
	return true
}

func (f *facts) setRetired() {
	f.retired = map[string]bool{}
	if f.inPlace != nil {
		for _, id := range f.inPlace.Retired {
			f.retired[id] = true
		}
	}
}

// chooseInPlace decides which restore the record holds from this sync on, before anything is judged by
// cluster ID (the IDs a restore retires change what every report says). It returns true when the record
// changed: the caller reads the Leases and the cluster ID again.
//   - A restore not committed whose request was withdrawn (the annotation's value gone or another; for an
//     automatic one, restoreOnQuorumLoss off) is abandoned, unless its Job is still running (it may be
//     moving the old data aside right now): the record goes back to the one before it, and the value
//     stays seen. Its data was never replaced.
//   - A value not seen before starts a restore that retires every cluster ID live now, if it can be
//     carried out; otherwise it is refused (the record's Refused) and seen as well: a value is acted on once,
//     so a manifest copied with the annotation never restores over a cluster later.
//   - Nothing new starts while spec.paused (a restore in flight goes on: steps in flight finish).
//   - Without a value to act on, restoreOnQuorumLoss may start one (quorumDataLost).
func (f *facts) chooseInPlace() bool {
	rec := f.inPlace
	changed := false
	req := f.restoreFrom()
	live := slices.Clone(f.clusterIDs)
	if rec.inFlight() && !rec.Committed && f.withdrawn(rec, req) {
		if j := f.obs.Jobs[f.names.RestoreJob(rec.key())]; j != nil {
			if state, _ := jobStatus(j); state == jobActive {
				f.inPlaceWithdrawn = true
				return false
			}
		}
		var back *inPlaceRecord
		back, live = rec.back(live)
		rec, changed = back, true
	}
	if rec.inFlight() && !rec.Committed {
		if next, ok := f.judgeRestoreJobs(rec); ok {
			rec, changed = next, true
		}
	}
	if b := f.parent.Spec.Backup; rec != nil && rec.RefusedLost && (b == nil || !b.RestoreOnQuorumLoss) {
		// Switched off (the parent's word: forgetting a refusal changes nothing else): the next
		// automatic restore may try the destination again.
		c := *rec
		c.Refused, c.RefusedWhy, c.RefusedLost = "", "", false
		rec, changed = &c, true
	}
	paused := f.parent.Spec.Paused
	if !rec.inFlight() && req != "" && !rec.seen(req) && !paused {
		next := rec.memory()
		next.Seen = remember(next.Seen, backup.Fingerprint(req))
		if problem := f.restoreRequestProblem(req, live); problem == "" {
			next.Request, next.Replacing, next.Verifying, next.Prior = req, live, true, rec.withoutPrior()
			next.AcceptCluster = f.acceptCluster()
		} else {
			// Refused: the last restore stays what status shows.
			keep := rec.memory()
			if rec != nil {
				keep = rec.withoutPrior()
				keep.Prior = rec.Prior
			}
			keep.Seen, keep.Refused, keep.RefusedWhy = next.Seen, backup.Fingerprint(req), problem
			next = keep
		}
		rec, changed = next, true
	}
	// (The parent's word too: a restoreOnQuorumLoss switched off, not yet applied, starts nothing.)
	if b := f.parent.Spec.Backup; !rec.inFlight() && !paused && b != nil && b.RestoreOnQuorumLoss {
		if src, lost := f.quorumDataLost(); len(lost) > 0 && !(rec != nil && rec.RefusedLost && rec.Refused == backup.Fingerprint(src)) {
			next := rec.memory()
			next.Request, next.Replacing, next.Verifying, next.Lost, next.Prior = src, live, true, lost, rec.withoutPrior()
			rec, changed = next, true
		}
	}
	if !changed {
		return false
	}
	f.inPlace = rec
	f.setRetired()
	return true
}

// back is the record a restore not committed goes back to when it is withdrawn or refused (its data was
// never replaced): the one before it, with every value seen kept. live gains the IDs the abandoned
// restore retired that were live then: they are live again.
func (r *inPlaceRecord) back(live []string) (*inPlaceRecord, []string) {
	back := r.Prior
	if back == nil {
		back = r.memory()
		back.Retired = nil
	}
	back = back.withoutPrior()
	back.Seen = remember(r.Seen)
	for _, id := range r.Retired {
		if !slices.Contains(back.Retired, id) {
			live = remember(live, id)
		}
	}
	return back, live
}

// withdrawn: the restore is no longer asked for. One the annotation asked for, when its value is gone
// or another; an automatic one, when restoreOnQuorumLoss was switched off, or (while its snapshot is
// being verified, nothing stopped yet) when the quorum it would replace is no longer lost.
func (f *facts) withdrawn(rec *inPlaceRecord, req string) bool {
	if len(rec.Lost) > 0 {
		if rec.Verifying {
			if _, lost := f.quorumDataLost(); len(lost) == 0 {
				return true
			}
		}
		return !f.restoreOnQuorumLoss()
	}
	return req != rec.Request
}

// acceptCluster is the etcd.io/restore-foreign-cluster value on the parent, "" when none.
func (f *facts) acceptCluster() string {
	return strings.TrimSpace(f.parent.Annotations[api.AnnRestoreForeignCluster])
}

// judgeRestoreJobs moves a restore not committed on from what its Jobs did. The verify Job: passed (it
// succeeded and reported the snapshot by its hash), the restore retires the IDs it replaces and the
// members stop; failed, the restore is refused and the record goes back to the one before it, so the
// cluster, which never stopped, goes on. The restore Job: refused (a snapshot that changed since its
// verification, nothing touched), the same; the members start again on their own data. Any other
// failure of the restore Job is left to decideInPlace (inPlaceFailure: its data may need a look).
func (f *facts) judgeRestoreJobs(rec *inPlaceRecord) (*inPlaceRecord, bool) {
	name := f.names.RestoreJob(rec.key())
	if rec.Verifying {
		name = f.names.RestoreVerifyJob(rec.key())
	}
	j := f.obs.Jobs[name]
	if j == nil || j.DeletionTimestamp != nil {
		// (One being deleted is an earlier restore's of the same source and IDs, not this one's.)
		return rec, false
	}
	state, _ := jobStatus(j)
	report := f.restoreReport(name)
	refuse := func(why string) (*inPlaceRecord, bool) {
		back, _ := rec.back(nil)
		back.Refused, back.RefusedWhy = backup.Fingerprint(rec.Request), why
		back.RefusedLost = len(rec.Lost) > 0
		return back, true
	}
	switch {
	case rec.Verifying && state == jobSucceeded:
		if report == nil || report.Outcome != api.RestoreVerified || !api.IsSHA256(report.SHA256) {
			return refuse(fmt.Sprintf("verify Job %s succeeded, but its report on Lease %s (annotation %s) is missing or says otherwise: the snapshot is not trusted", name, f.names.BackupName(), api.AnnRestoreReport))
		}
		next := *rec
		next.Verifying, next.Retired, next.Replacing = false, remember(rec.Retired, rec.Replacing...), nil
		next.Snapshot, next.SHA256 = backup.Redact(report.Snapshot), report.SHA256
		return &next, true
	case rec.Verifying && state == jobFailed:
		why := fmt.Sprintf("verify Job %s failed (kubectl logs job/%s)", name, name)
		if report != nil && report.Message != "" {
			why = fmt.Sprintf("the snapshot failed verification (Job %s): %s", name, report.Message)
		}
		return refuse(why)
	case !rec.Verifying && state == jobFailed && report != nil && report.Outcome == api.RestoreRefused:
		return refuse(fmt.Sprintf("restore Job %s refused the snapshot before touching any data: %s; the members start again on their own data", name, report.Message))
	}
	return rec, false
}

// restoreReport is the restore report on the backup Lease when it is job's, nil otherwise (leaseReport).
func (f *facts) restoreReport(job string) *api.RestoreReport {
	l := f.obs.Leases[f.names.BackupName()]
	if l == nil {
		return nil
	}
	return leaseReport(f, l, api.AnnRestoreReport, api.ParseRestoreReport,
		func(r *api.RestoreReport) bool { return r.Job == job }, func(r *api.RestoreReport) time.Time { return r.Time })
}

// restoreOnQuorumLoss: the applied spec asks for automatic restores.
func (f *facts) restoreOnQuorumLoss() bool {
	return f.applied != nil && f.applied.Backup != nil && f.applied.Backup.RestoreOnQuorumLoss
}

// quorumDataLost is spec.backup.restoreOnQuorumLoss's trigger: the source (the destination's newest
// snapshot of this cluster) and the members that lost their data, when a quorum of the last known voters
// did. A member lost its data when its agent, in the pod of its ordinal, reports that it waits to join
// with no data (an unreadable directory is reported otherwise, never as no data) and its pod has not
// been ready for deadMemberSeconds; no voter may report a healthy cluster. The last known voters are
// status.members: the hook keeps them while no member list is known. Nothing is started for a cluster
// that never formed, or without that record.
func (f *facts) quorumDataLost() (string, []string) {
	if !f.restoreOnQuorumLoss() || !f.bootstrapped || !f.formed {
		return "", nil
	}
	for _, lv := range f.leases {
		if lv.fresh && lv.report.IsVoter() && lv.report.Healthy {
			return "", nil
		}
	}
	deadAfter := time.Duration(*f.applied.Timeouts.DeadMemberSeconds) * time.Second
	var voters int
	var lost []string
	for _, m := range f.parent.Status.Members {
		if m.Role != api.RoleLeader && m.Role != api.RoleVoter {
			continue
		}
		voters++
		i := f.names.PodOrdinal(m.Name)
		lv, pod := f.leases[i], f.pods[i]
		if i < 0 || lv == nil || pod == nil || !lv.fresh || lv.holder != string(pod.UID) {
			continue
		}
		if lv.report.MemberID == "" && lv.report.Reason() == api.ReasonWaitingForJoin && f.notReadyFor(i) >= deadAfter {
			lost = append(lost, m.Name)
		}
	}
	if voters == 0 || len(lost) < api.Quorum(voters) {
		return "", nil
	}
	d, err := backup.ParseDestination(f.applied.Backup.Destination)
	if err != nil {
		return "", nil
	}
	sort.Strings(lost)
	return d.ObjectURL(backup.Latest), lost
}

// finishInPlace marks a committed restore done once a healthy voter of the restored cluster reports
// (its cluster ID is none of the retired ones): from here the cluster grows back as any cluster below
// its size.
func (f *facts) finishInPlace() {
	if rec := f.inPlace; rec.inFlight() && rec.Committed && f.truthKnown() && f.clusterID != "" {
		done := *rec
		done.Done, done.Prior = true, nil
		f.inPlace = &done
	}
}

// restoreRequestProblem says why an etcd.io/restore-from value cannot be carried out, "" when it can.
// The snapshot is reached with spec.backup's credentials (and claim, for file://): a cluster restores
// from the store it backs up to. The spec is the applied one (the children are rendered from it).
func (f *facts) restoreRequestProblem(req string, live []string) string {
	src, err := backup.ParseSource(req)
	if err != nil {
		return fmt.Sprintf("annotation %s %q %v", api.AnnRestoreFrom, backup.Redact(req), err)
	}
	spec := api.Defaulted(f.parent.Spec)
	if f.applied != nil {
		spec = *f.applied
	}
	b := spec.Backup
	if b == nil {
		b = &api.BackupSpec{}
	}
	// The store is reached as spec.backup's own destination is: the same rules, named after its fields
	// (a source without a Secret there would be read with the node's credentials; one on a local endpoint
	// would reach the node's services).
	var access string
	api.CheckStoreAccess(func(_ string, format string, args ...any) {
		if access == "" {
			access = fmt.Sprintf(format, args...)
		}
	}, "", "spec.backup", src.Destination, b.CredentialsSecret, b.StoreAccess)
	switch {
	case access != "":
		return fmt.Sprintf("annotation %s %q is read as spec.backup's store is: %s", api.AnnRestoreFrom, backup.Redact(req), access)
	case src.Destination.Scheme == "file" && b.VolumeClaimName == "":
		return fmt.Sprintf("annotation %s %q is a file:// source: spec.backup.volumeClaimName must name the claim it is on", api.AnnRestoreFrom, backup.Redact(req))
	case spec.Storage.EmptyDir != nil:
		return fmt.Sprintf("annotation %s: the members' data is on emptyDir, which has no volume to restore into (create a new EtcdCluster with spec.restore)", api.AnnRestoreFrom)
	case !f.bootstrapped:
		return fmt.Sprintf("annotation %s: the cluster has no data yet (use spec.restore when creating a cluster)", api.AnnRestoreFrom)
	case len(live) == 0:
		// The restore retires the IDs known now; without one, the members' old data would later look
		// foreign instead of replaced.
		return fmt.Sprintf("annotation %s: the cluster's ID is not known (no status, ConfigMap record or member report names it); wait for a member to report", api.AnnRestoreFrom)
	}
	return ""
}

// refusal is why the etcd.io/restore-from value on the parent (or restoreOnQuorumLoss's restore) was
// refused, "" when it was not.
func (f *facts) refusal() string {
	req := f.restoreFrom()
	r := f.inPlace
	switch {
	case r == nil || r.Refused == "":
		return ""
	case r.RefusedLost && f.restoreOnQuorumLoss():
		return "spec.backup.restoreOnQuorumLoss: " + r.RefusedWhy + " (restore by hand with " + api.AnnRestoreFrom + ", or switch restoreOnQuorumLoss off and on to try again)"
	case !r.RefusedLost && req != "" && r.Refused == backup.Fingerprint(req):
		return r.RefusedWhy
	}
	return ""
}

// restoreFrom is the etcd.io/restore-from value on the parent, "" when none.
func (f *facts) restoreFrom() string {
	return strings.TrimSpace(f.parent.Annotations[api.AnnRestoreFrom])
}

// decideInPlace carries out the in-place restore the record holds (chooseInPlace). It returns true
// while one runs (Stopping, Restoring, Starting): the plan is then the restore's alone. p.inPlace is
// the record to write back.
func (p *plan) decideInPlace() bool {
	f := p.f
	rec := f.inPlace
	p.inPlace = rec
	if !rec.inFlight() {
		return false
	}
	// The verify Job stays until the restore is done: a cache that has not seen the record past its
	// verification must find it finished, not start it again.
	if verify := f.names.RestoreVerifyJob(rec.key()); rec.Verifying || f.obs.Jobs[verify] != nil {
		p.jobs = append(p.jobs, p.restoreJobSpec(render.JobRestoreVerify, rec))
	}
	if rec.Verifying {
		// The cluster serves on while the snapshot is checked: nothing else about it changes.
		return false
	}
	p.inPlaceMode()
	if f.inPlaceWithdrawn {
		p.wait("restore Job %s to finish: the restore of %q cannot be withdrawn while it runs", f.names.RestoreJob(rec.key()), rec.Request)
	}
	switch {
	case rec.Committed:
		// The Job stays until the restored member runs: a cache that has not seen the record yet
		// must find it finished, not render it again.
		if j := f.obs.Jobs[f.names.RestoreJob(rec.key())]; j != nil {
			p.jobs = append(p.jobs, p.restoreJobSpec(render.JobRestore, rec))
		}
		p.startPod0()
	case len(f.pods) > 0 || !p.statefulSetStopped():
		p.replicas = 0
		var names []string
		for _, i := range sortedKeys(f.pods) {
			names = append(names, f.names.Pod(i))
		}
		if len(names) == 0 {
			names = append(names, "StatefulSet "+f.names.StatefulSet()+" at 0 replicas")
		}
		p.wait("member pods to stop before the restore: %s", strings.Join(names, ", "))
	default:
		p.replicas = 0
		j := f.obs.Jobs[f.names.RestoreJob(rec.key())]
		if j == nil {
			if pvc := f.pvcs[0]; pvc == nil || pvc.DeletionTimestamp != nil {
				p.inPlaceFailure = fmt.Sprintf("claim %s, which the restore writes into, does not exist", f.names.PVC(0))
				return true
			}
			p.jobs = append(p.jobs, p.restoreJobSpec(render.JobRestore, rec))
			p.wait("restore Job %s to restore %q", f.names.RestoreJob(rec.key()), rec.Request)
			return true
		}
		p.inPlaceJob(rec, j)
	}
	return true
}

// statefulSetStopped: the observed StatefulSet asks for no pod and its controller counts none (a pod
// list from a cache may miss a member still terminating; the controller's count is a second witness).
func (p *plan) statefulSetStopped() bool {
	sts := p.f.sts
	if sts == nil {
		return true
	}
	return sts.Spec.Replicas != nil && *sts.Spec.Replicas == 0 && sts.Status.Replicas == 0 &&
		sts.Status.ObservedGeneration >= sts.Generation
}

// inPlaceJob judges the observed restore Job: it keeps it, and a success commits the restore.
func (p *plan) inPlaceJob(rec *inPlaceRecord, j *batchv1.Job) {
	p.jobs = append(p.jobs, p.restoreJobSpec(render.JobRestore, rec))
	state, _ := jobStatus(j)
	switch state {
	case jobActive:
		p.wait("restore Job %s to restore %q", j.Name, rec.Request)
	case jobSucceeded:
		c := *rec
		c.Committed = true
		p.inPlace = &c
		p.startPod0()
	case jobFailed:
		how := fmt.Sprintf("remove or change the %s annotation", api.AnnRestoreFrom)
		if len(rec.Lost) > 0 {
			how = "set spec.backup.restoreOnQuorumLoss to false"
		}
		why := fmt.Sprintf("(kubectl logs job/%s)", j.Name)
		if r := p.f.restoreReport(j.Name); r != nil && r.Message != "" {
			why = fmt.Sprintf("(%s)", r.Message)
		}
		p.inPlaceFailure = fmt.Sprintf("restore Job %s failed %s: it replaces the data only as its last step, so the cluster's data is as it was unless its log says otherwise; %s to start the cluster again on its data", j.Name, why, how)
	}
}

// startPod0 runs pod 0 on the restored data. The same answer's ConfigMap retires the replaced cluster
// IDs in agent.json; an agent that started on the file before the kubelet refreshed it sees the old
// Leases' reports make the restored data look foreign, and reads the file again before each decision.
func (p *plan) startPod0() {
	p.setIntent(0, api.IntentMember)
	p.replicas = 1
	p.waitPod0()
}

// waitPod0 says that pod 0 is to start on the restored data, with what its agent reports if it cannot.
func (p *plan) waitPod0() {
	f := p.f
	if lv := f.leases[0]; lv != nil && lv.fresh && lv.report.Error != "" && f.pods[0] != nil && lv.holder == string(f.pods[0].UID) {
		p.wait("%s to start on the restored data (its agent reports %q)", f.names.Pod(0), lv.report.Error)
		return
	}
	p.wait("%s to start on the restored data", f.names.Pod(0))
}

// inPlaceMode renders what a restore in flight needs around it: the Leases as they are (no intent
// changes: a leave would make a running member remove itself), every pod on the current template.
func (p *plan) inPlaceMode() {
	p.restoring = true
	p.partition = 0
	for _, lp := range p.leases {
		lp.Join = api.JoinWindow{}
	}
}

// inPlacePhase is the phase status.restore shows for the record to write.
func (p *plan) inPlacePhase() string {
	rec := p.inPlace
	switch {
	case rec == nil:
		return ""
	case rec.Verifying:
		return inPlaceVerifying
	case rec.Done:
		return inPlaceRestored
	case rec.Committed:
		return inPlaceStarting
	case len(p.f.pods) > 0 || !p.statefulSetStopped():
		return inPlaceStopping
	}
	return inPlaceRestoring
}

// inPlaceStatus is status.restore of a cluster restored in place; nil without a record.
func (p *plan) inPlaceStatus(add func(string, bool, string, string)) *api.RestoreStatus {
	rec := p.inPlace
	if rec == nil || rec.Request == "" {
		return nil
	}
	rs := &api.RestoreStatus{Source: rec.Request, Phase: p.inPlacePhase(), InPlace: true, ReplacedClusterIDs: slices.Clone(rec.Retired), LostMembers: slices.Clone(rec.Lost)}
	if lv := p.f.leases[0]; lv != nil && rec.Committed && lv.report.RestoredFrom != "" {
		rs.Snapshot = lv.report.RestoredFrom
		fmt.Sscan(lv.report.RestoredRevision, &rs.Revision)
	}
	if len(rec.Lost) > 0 {
		rs.Message = fmt.Sprintf("restoreOnQuorumLoss: %s ran without their data, a quorum of the last members", strings.Join(rec.Lost, ", "))
	}
	switch {
	case rec.Verifying:
		rs.Message = strings.TrimPrefix(rs.Message+"; ", "; ") + fmt.Sprintf("Job %s verifies the snapshot before any member is stopped; they stop only once it passed", p.f.names.RestoreVerifyJob(rec.key()))
	case rec.Snapshot != "" && !rec.Committed:
		rs.Snapshot = rec.Snapshot
	}
	if p.inPlaceFailure != "" && !rec.Done {
		rs.Message = p.inPlaceFailure
		add(api.CondRestoreFailed, true, "RestoreFailed", p.inPlaceFailure)
	}
	return rs
}

// restoreJobSpec asks for rec's verify or restore Job.
func (p *plan) restoreJobSpec(kind render.JobKind, rec *inPlaceRecord) render.Job {
	return render.Job{Kind: kind, Restore: &render.RestoreJob{
		Request: rec.Request, Key: rec.key(), SHA256: rec.SHA256, AcceptCluster: rec.AcceptCluster, OnQuorumLoss: len(rec.Lost) > 0,
	}}
}

// inPlaceRecordJSON is the record as the ConfigMap holds it, "" without one.
func (p *plan) inPlaceRecordJSON() string {
	if p.inPlace == nil {
		return ""
	}
	b, _ := json.Marshal(p.inPlace) // plain struct: cannot fail
	return string(b)
}

// releaseRestoreJobs lets Metacontroller delete the restore Jobs this answer does not render: the one of
// a restore that is done or was withdrawn. A restore Job left out by mistake is refused instead
// (deletions: knownJob), never deleted mid-run.
func (p *plan) releaseRestoreJobs() {
	prefix := p.f.names.Cluster + "-restore-"
	rendered := map[string]bool{}
	for _, j := range p.jobs {
		rendered[j.Name(p.f.names)] = true
	}
	for _, name := range sortedKeys(p.f.obs.Jobs) {
		if strings.HasPrefix(name, prefix) && !rendered[name] {
			p.release(KeyJob, name, "its in-place restore is done or was withdrawn")
		}
	}
}
