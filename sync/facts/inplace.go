package facts

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// What the facts say about in-place restores: the record read from the ConfigMap (readInPlace), chosen
// against the parent's annotation (chooseInPlace), judged by its Jobs, finished. The decision's side is
// sync/inplace.go; the record itself inplacerecord.go.

// readInPlace parses the hook's record: the ConfigMap's, else the one status.restore keeps (a deleted
// ConfigMap must not forget a restore in flight, nor the IDs it retired). A record that does not parse
// is a hand edit and ignored. The IDs it retired count from here on.
func (f *Facts) readInPlace() {
	if s := f.ConfigValue(api.ConfigKeyRestoreInPlace); s != "" {
		var rec InPlaceRecord
		if err := wire.Unmarshal([]byte(s), &rec); err != nil {
			f.Distrusted = append(f.Distrusted, fmt.Sprintf("ConfigMap %s key %s does not parse as the hook's record: ignored", f.Names.ConfigMap(), api.ConfigKeyRestoreInPlace))
		} else {
			// A value written by an older hook may carry a secret (a refused URL with credentials): from
			// here on only its fingerprint is kept.
			rec.scrub()
			if why := rec.pointProblem(); why != "" {
				f.Distrusted = append(f.Distrusted, fmt.Sprintf("ConfigMap %s key %s: %s: the record is ignored", f.Names.ConfigMap(), api.ConfigKeyRestoreInPlace, why))
			} else {
				f.InPlace.Record = &rec
			}
		}
	}
	// A restore status shows Verifying has neither stopped nor retired anything: it is not rebuilt, and
	// starts again from the annotation.
	if r := f.Parent.Status.Restore; f.InPlace.Record == nil && r != nil && r.InPlace && r.Source != "" && r.Phase != InPlaceVerifying {
		// Rebuilt from status, the record does not know which annotation values were acted on: the one
		// on the parent now counts as seen (a restore is never started from a record half lost).
		f.InPlace.Record = &InPlaceRecord{Request: r.Source, Retired: r.ReplacedClusterIDs, Lost: r.LostMembers,
			Committed: r.Phase == InPlaceStarting || r.Phase == InPlaceRestored, Done: r.Phase == InPlaceRestored,
			Point: r.Point().Value(), Seen: remember(nil, backup.Fingerprint(askKey(f.restoreAsk())))}
	}
	f.setRetired()
}

// unretireLive drops from the record the retired IDs that live members report (liveRetired): retired,
// they would make every restarting agent move its cluster's data aside. The record is rewritten
// without them and the hand edit is named in InputIgnored.
func (f *Facts) unretireLive() bool {
	if len(f.liveRetired) == 0 || f.InPlace.Record == nil {
		return false
	}
	for _, id := range f.liveRetired {
		f.InPlace.Record.Retired = slices.DeleteFunc(slices.Clone(f.InPlace.Record.Retired), func(r string) bool { return r == id })
		if p := f.InPlace.Record.Prior; p != nil {
			p.Retired = slices.DeleteFunc(slices.Clone(p.Retired), func(r string) bool { return r == id })
		}
		f.Distrusted = append(f.Distrusted, fmt.Sprintf("the in-place restore record (ConfigMap %s key %s) lists cluster ID %s as replaced, but a ready member pod reports it as a healthy voter: not retired", f.Names.ConfigMap(), api.ConfigKeyRestoreInPlace, id))
	}
	f.liveRetired = nil
	f.setRetired()
	return true
}

func (f *Facts) setRetired() {
	f.retired = map[string]bool{}
	if f.InPlace.Record != nil {
		for _, id := range f.InPlace.Record.Retired {
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
func (f *Facts) chooseInPlace() bool {
	rec := f.InPlace.Record
	changed := false
	req, point := f.restoreAsk()
	if req == "" && point != "" {
		f.Distrusted = append(f.Distrusted, fmt.Sprintf("annotation %s %q without %s: it names a point, not a source; nothing to restore", api.AnnRestoreTo, point, api.AnnRestoreFrom))
	}
	live := slices.Clone(f.ClusterIDs)
	if rec.InFlight() && !rec.Committed && f.withdrawn(rec, req, point) {
		if j := f.Observed.Jobs[f.Names.RestoreJob(rec.Key())]; j != nil {
			if state, _ := JobStatus(j); state == JobActive {
				f.InPlace.Withdrawn = true
				return false
			}
		}
		var back *InPlaceRecord
		back, live = rec.back(live)
		rec, changed = back, true
	}
	if rec.InFlight() && !rec.Committed {
		if next, ok := f.judgeRestoreJobs(rec); ok {
			rec, changed = next, true
		}
	}
	if b := f.Parent.Spec.Backup; rec != nil && rec.RefusedLost && (b == nil || !b.RestoreOnQuorumLoss) {
		// Switched off (the parent's word: forgetting a refusal changes nothing else): the next
		// automatic restore may try the destination again.
		c := *rec
		c.Refused, c.RefusedWhy, c.RefusedLost = "", "", false
		rec, changed = &c, true
	}
	paused := f.Parent.Spec.Paused
	if ask := askKey(req, point); !rec.InFlight() && req != "" && !rec.seen(ask) && !paused {
		next := rec.memory()
		next.Seen = remember(next.Seen, backup.Fingerprint(ask))
		if problem := f.restoreRequestProblem(req, point, live); problem == "" {
			next.Request, next.Point, next.Replacing, next.Verifying, next.Prior = req, point, live, true, rec.withoutPrior()
			next.AcceptCluster = f.acceptCluster()
		} else {
			// Refused: the last restore stays what status shows.
			keep := rec.memory()
			if rec != nil {
				keep = rec.withoutPrior()
				keep.Prior = rec.Prior
			}
			keep.Seen, keep.Refused, keep.RefusedWhy = next.Seen, backup.Fingerprint(ask), problem
			next = keep
		}
		rec, changed = next, true
	}
	// (The parent's word too: a restoreOnQuorumLoss switched off, not yet applied, starts nothing.)
	if b := f.Parent.Spec.Backup; !rec.InFlight() && !paused && b != nil && b.RestoreOnQuorumLoss {
		if src, lost := f.quorumDataLost(); len(lost) > 0 && !(rec != nil && rec.RefusedLost && rec.Refused == backup.Fingerprint(src)) {
			next := rec.memory()
			next.Request, next.Replacing, next.Verifying, next.Lost, next.Prior = src, live, true, lost, rec.withoutPrior()
			rec, changed = next, true
		}
	}
	if !changed {
		return false
	}
	f.InPlace.Record = rec
	f.setRetired()
	return true
}

// withdrawn: the restore is no longer asked for. One the annotations asked for, when the source is gone
// or another, or the point another; an automatic one, when restoreOnQuorumLoss was switched off, or (while its snapshot is
// being verified, nothing stopped yet) when the quorum it would replace is no longer lost.
func (f *Facts) withdrawn(rec *InPlaceRecord, req, point string) bool {
	if len(rec.Lost) > 0 {
		if rec.Verifying {
			if _, lost := f.quorumDataLost(); len(lost) == 0 {
				return true
			}
		}
		return !f.restoreOnQuorumLoss()
	}
	return req != rec.Request || point != rec.Point
}

// acceptCluster is the etcd.io/restore-foreign-cluster value on the parent, "" when none.
func (f *Facts) acceptCluster() string {
	return strings.TrimSpace(f.Parent.Annotations[api.AnnRestoreForeignCluster])
}

// judgeRestoreJobs moves a restore not committed on from what its Jobs did. The verify Job: passed (it
// succeeded and reported the snapshot by its hash), the restore retires the IDs it replaces and the
// members stop; failed, the restore is refused and the record goes back to the one before it, so the
// cluster, which never stopped, goes on. The restore Job: refused (a snapshot that changed since its
// verification, nothing touched), the same; the members start again on their own data. Any other
// failure of the restore Job is left to decideInPlace (inPlaceFailure: its data may need a look).
func (f *Facts) judgeRestoreJobs(rec *InPlaceRecord) (*InPlaceRecord, bool) {
	name := f.Names.RestoreJob(rec.Key())
	if rec.Verifying {
		name = f.Names.RestoreVerifyJob(rec.Key())
	}
	j := f.Observed.Jobs[name]
	if j == nil || j.DeletionTimestamp != nil {
		// (One being deleted is an earlier restore's of the same source and IDs, not this one's.)
		return rec, false
	}
	state, _ := JobStatus(j)
	report, note := f.RestoreReport(name)
	if note != "" {
		f.Distrusted = append(f.Distrusted, note)
	}
	refuse := func(why string) (*InPlaceRecord, bool) {
		back, _ := rec.back(nil)
		back.Refused, back.RefusedWhy = backup.Fingerprint(askKey(rec.Request, rec.Point)), why
		back.RefusedLost = len(rec.Lost) > 0
		return back, true
	}
	switch {
	case rec.Verifying && state == JobSucceeded:
		if report == nil || report.Outcome != api.RestoreVerified || !api.IsSHA256(report.SHA256) {
			return refuse(fmt.Sprintf("verify Job %s succeeded, but its report on Lease %s (annotation %s) is missing or says otherwise: the snapshot is not trusted", name, f.Names.BackupName(), api.AnnRestoreReport))
		}
		if rec.Point != "" && report.AtRevision < 1 {
			return refuse(fmt.Sprintf("verify Job %s succeeded, but its report on Lease %s (annotation %s) names no revision the keyspace is at: the restore to %s is not pinned, and is not carried out", name, f.Names.BackupName(), api.AnnRestoreReport, rec.Point))
		}
		next := *rec
		next.Verifying, next.Retired, next.Replacing = false, remember(rec.Retired, rec.Replacing...), nil
		next.Snapshot, next.SHA256 = backup.Redact(report.Snapshot), report.SHA256
		if rec.Point != "" {
			// The restore Job restores exactly what passed: a time point pinned to its revision, so
			// that chunks uploaded since the verification do not move it.
			next.Target = report.AtRevision
		}
		return &next, true
	case rec.Verifying && state == JobFailed:
		why := fmt.Sprintf("verify Job %s failed (kubectl logs job/%s)", name, name)
		if report != nil && report.Message != "" {
			why = fmt.Sprintf("the snapshot failed verification (Job %s): %s", name, report.Message)
		}
		return refuse(why)
	case !rec.Verifying && state == JobFailed && report != nil && report.Outcome == api.RestoreRefused:
		return refuse(fmt.Sprintf("restore Job %s refused the snapshot before touching any data: %s; the members start again on their own data", name, report.Message))
	}
	return rec, false
}

// RestoreReport is the restore report on the backup Lease when it is job's, nil otherwise, and the note
// naming a report ignored (LeaseReport).
func (f *Facts) RestoreReport(job string) (*api.RestoreReport, string) {
	l := f.Observed.Leases[f.Names.BackupName()]
	if l == nil {
		return nil, ""
	}
	return LeaseReport(f.Now, l, api.AnnRestoreReport, api.ParseRestoreReport,
		func(r *api.RestoreReport) bool { return r.Job == job }, func(r *api.RestoreReport) time.Time { return r.Time })
}

// restoreOnQuorumLoss: the applied spec asks for automatic restores.
func (f *Facts) restoreOnQuorumLoss() bool {
	return f.Applied != nil && f.Applied.Backup != nil && f.Applied.QuorumLossMode() == api.QuorumLossFromBackup
}

// quorumDataLost is spec.backup.restoreOnQuorumLoss's trigger: the source (the destination's newest
// snapshot of this cluster) and the members that lost their data, when a quorum of the last known voters
// did. A member lost its data when its agent, in the pod of its ordinal, reports that it waits to join
// with no data (an unreadable directory is reported otherwise, never as no data) and its pod has not
// been ready for deadMemberSeconds; no voter may report a healthy cluster. The last known voters are
// status.members: the hook keeps them while no member list is known. Nothing is started for a cluster
// that never formed, or without that record.
func (f *Facts) quorumDataLost() (string, []string) {
	if !f.restoreOnQuorumLoss() || !f.Bootstrapped || !f.Formed {
		return "", nil
	}
	for _, lv := range f.Leases {
		if lv.Fresh && lv.Report.IsVoter() && lv.Report.Healthy {
			return "", nil
		}
	}
	deadAfter := time.Duration(*f.Applied.Timeouts.DeadMemberSeconds) * time.Second
	var voters int
	var lost []string
	for _, m := range f.Parent.Status.Members {
		if m.Role != api.RoleLeader && m.Role != api.RoleVoter {
			continue
		}
		voters++
		if d, ok := f.WithoutData(f.Names.PodOrdinal(m.Name)); ok && d >= deadAfter {
			lost = append(lost, m.Name)
		}
	}
	if voters == 0 || len(lost) < api.Quorum(voters) {
		return "", nil
	}
	d, err := backup.ParseDestination(f.Applied.Backup.Destination)
	if err != nil {
		return "", nil
	}
	sort.Strings(lost)
	return d.ObjectURL(backup.Latest), lost
}

// AgentReport is ordinal i's report when its Lease is fresh and held by the ordinal's current pod: what
// the agent running there now says. False for anything else (no pod, a stale Lease, a former pod's).
func (f *Facts) AgentReport(i int) (api.Report, bool) {
	lv, pod := f.Leases[i], f.Pods[i]
	if i < 0 || lv == nil || pod == nil || !lv.Fresh || lv.Holder != string(pod.UID) {
		return api.Report{}, false
	}
	return lv.Report, true
}

// WithoutData says whether ordinal i's agent (AgentReport) waits to join with no data (an unreadable
// directory is reported otherwise, never as no data), and for how long its pod has not been ready: a
// member whose data is lost for good once that reaches deadMemberSeconds.
func (f *Facts) WithoutData(i int) (time.Duration, bool) {
	r, ok := f.AgentReport(i)
	if !ok || r.MemberID != "" || r.Reason() != api.ReasonWaitingForJoin {
		return 0, false
	}
	return f.notReadyFor(i), true
}

// finishInPlace marks a committed restore done once a healthy voter of the restored cluster reports
// (its cluster ID is none of the retired ones): from here the cluster grows back as any cluster below
// its size.
func (f *Facts) finishInPlace() {
	if rec := f.InPlace.Record; rec.InFlight() && rec.Committed && f.Truth.Known() && f.ClusterID != "" {
		done := *rec
		done.Done, done.Prior = true, nil
		f.InPlace.Record = &done
	}
}

// restoreRequestProblem says why an etcd.io/restore-from value cannot be carried out, "" when it can.
// The snapshot is reached with spec.backup's credentials (and claim, for file://): a cluster restores
// from the store it backs up to. The spec is the applied one (the children are rendered from it).
func (f *Facts) restoreRequestProblem(req, point string, live []string) string {
	src, err := backup.ParseSource(req)
	if err != nil {
		return fmt.Sprintf("annotation %s %q %v", api.AnnRestoreFrom, backup.Redact(req), err)
	}
	if _, err := backup.ParsePoint(point); err != nil {
		return fmt.Sprintf("annotation %s %q %v", api.AnnRestoreTo, point, err)
	}
	spec := api.Defaulted(f.Parent.Spec)
	if f.Applied != nil {
		spec = *f.Applied
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
	case !f.Bootstrapped:
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
func (f *Facts) refusal() string {
	req, point := f.restoreAsk()
	r := f.InPlace.Record
	switch {
	case r == nil || r.Refused == "":
		return ""
	case r.RefusedLost && f.restoreOnQuorumLoss():
		return "spec.backup.restoreOnQuorumLoss: " + r.RefusedWhy + " (restore by hand with " + api.AnnRestoreFrom + ", or switch restoreOnQuorumLoss off and on to try again)"
	case !r.RefusedLost && req != "" && r.Refused == backup.Fingerprint(askKey(req, point)):
		return r.RefusedWhy
	}
	return ""
}

// restoreFrom is the etcd.io/restore-from value on the parent, "" when none.
func (f *Facts) restoreFrom() string {
	return strings.TrimSpace(f.Parent.Annotations[api.AnnRestoreFrom])
}

// restoreAsk is the in-place restore the parent's annotations ask for: the source and the point
// (etcd.io/restore-to, spelled as backup.Point.Value spells it when it parses, as given otherwise, so
// that restoreRequestProblem names it).
func (f *Facts) restoreAsk() (req, point string) {
	point = strings.TrimSpace(f.Parent.Annotations[api.AnnRestoreTo])
	if p, err := backup.ParsePoint(point); err == nil {
		point = p.Value()
	}
	return f.restoreFrom(), point
}

// askKey is one request as the record remembers it (Seen, Refused): its source, and its point if any.
func askKey(req, point string) string {
	if point == "" {
		return req
	}
	return req + " to " + point
}
