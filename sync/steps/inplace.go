package steps

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/wire"
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

// InPlaceDecision is the in-place restore's part of the decision.
type InPlaceDecision struct {
	// Running: a restore runs (Stopping, Restoring, Starting): the plan is then the restore's alone.
	Running bool
	// Record: the record to write back (Decision.InPlace).
	Record *facts.InPlaceRecord
	// Jobs: the verify and restore Jobs the answer renders, in order.
	Jobs []Job
	// Restoring: the members are down for it: the Leases stay as they are (no intent changes, no join
	// permission: a leave would make a running member remove itself), every pod on the current template.
	Restoring bool
	// Replicas: the StatefulSet's replicas while it runs (0 stopped, 1 pod 0 on the restored data; -1
	// unchanged); Pod0: pod 0 is asked to run as a member.
	Replicas int32
	Pod0     bool
	// Failure: why the restore is stuck (Decision.InPlaceFailure).
	Failure    string
	Waiting    Waits
	Distrusted []string
}

// InPlace carries out the in-place restore the record holds (facts.chooseInPlace).
func InPlace(f *facts.Facts) InPlaceDecision {
	rec := f.InPlace.Record
	d := InPlaceDecision{Record: rec, Replicas: -1}
	wait := func(subject, format string, args ...any) {
		d.Waiting = d.Waiting.Addf(Restore, subject, format, args...)
	}
	if !rec.InFlight() {
		return d
	}
	// The verify Job stays until the restore is done: a cache that has not seen the record past its
	// verification must find it finished, not start it again.
	if verify := f.Names.RestoreVerifyJob(rec.Key()); rec.Verifying || f.Observed.Jobs[verify] != nil {
		d.Jobs = append(d.Jobs, restoreJob(JobRestoreVerify, rec))
	}
	if rec.Verifying {
		// The cluster serves on while the snapshot is checked: nothing else about it changes.
		return d
	}
	d.Running, d.Restoring = true, true
	if f.InPlace.Withdrawn {
		wait("", "restore Job %s to finish: the restore of %q cannot be withdrawn while it runs", f.Names.RestoreJob(rec.Key()), rec.Request)
	}
	// startPod0 runs pod 0 on the restored data. The same answer's ConfigMap retires the replaced
	// cluster IDs in agent.json; an agent that started on the file before the kubelet refreshed it sees
	// the old Leases' reports make the restored data look foreign, and reads the file again before each
	// decision.
	startPod0 := func() {
		d.Pod0, d.Replicas = true, 1
		if lv := f.Leases[0]; lv != nil && lv.Fresh && lv.Report.Error != "" && f.Pods[0] != nil && lv.Holder == string(f.Pods[0].UID) {
			wait(f.Names.Pod(0), "to start on the restored data (its agent reports %q)", lv.Report.Error)
			return
		}
		wait(f.Names.Pod(0), "to start on the restored data")
	}
	switch {
	case rec.Committed:
		// The Job stays until the restored member runs: a cache that has not seen the record yet
		// must find it finished, not render it again.
		if j := f.Observed.Jobs[f.Names.RestoreJob(rec.Key())]; j != nil {
			d.Jobs = append(d.Jobs, restoreJob(JobRestore, rec))
		}
		startPod0()
	case len(f.Pods) > 0 || !statefulSetStopped(f):
		d.Replicas = 0
		var names []string
		for _, i := range slices.Sorted(maps.Keys(f.Pods)) {
			names = append(names, f.Names.Pod(i))
		}
		if len(names) == 0 {
			names = append(names, "StatefulSet "+f.Names.StatefulSet()+" at 0 replicas")
		}
		wait("", "member pods to stop before the restore: %s", strings.Join(names, ", "))
	default:
		d.Replicas = 0
		j := f.Observed.Jobs[f.Names.RestoreJob(rec.Key())]
		if j == nil {
			if pvc := f.PVCs[0]; pvc == nil || pvc.DeletionTimestamp != nil {
				d.Failure = fmt.Sprintf("claim %s, which the restore writes into, does not exist", f.Names.PVC(0))
				return d
			}
			d.Jobs = append(d.Jobs, restoreJob(JobRestore, rec))
			wait("", "restore Job %s to restore %q", f.Names.RestoreJob(rec.Key()), rec.Request)
			return d
		}
		// The observed restore Job is kept, and a success commits the restore.
		d.Jobs = append(d.Jobs, restoreJob(JobRestore, rec))
		state, _ := facts.JobStatus(j)
		switch state {
		case facts.JobActive:
			wait("", "restore Job %s to restore %q", j.Name, rec.Request)
		case facts.JobSucceeded:
			c := *rec
			c.Committed = true
			d.Record = &c
			startPod0()
		case facts.JobFailed:
			d.Failure = restoreFailure(f, rec, j, &d.Distrusted)
		}
	}
	return d
}

// restoreFailure says why the restore Job j failed and what the user can do (a report that cannot be
// trusted is noted in distrusted).
func restoreFailure(f *facts.Facts, rec *facts.InPlaceRecord, j *batchv1.Job, distrusted *[]string) string {
	how := fmt.Sprintf("remove or change the %s annotation", api.AnnRestoreFrom)
	if len(rec.Lost) > 0 {
		how = "set spec.backup.restoreOnQuorumLoss to false"
	}
	why := fmt.Sprintf("(kubectl logs job/%s)", j.Name)
	r, note := f.RestoreReport(j.Name)
	if note != "" {
		*distrusted = append(*distrusted, note)
	}
	if r != nil && r.Message != "" {
		why = fmt.Sprintf("(%s)", r.Message)
	}
	return fmt.Sprintf("restore Job %s failed %s: it replaces the data only as its last step, so the cluster's data is as it was unless its log says otherwise; %s to start the cluster again on its data", j.Name, why, how)
}

// statefulSetStopped: the observed StatefulSet asks for no pod and its controller counts none (a pod
// list from a cache may miss a member still terminating; the controller's count is a second witness).
func statefulSetStopped(f *facts.Facts) bool {
	sts := f.StatefulSet
	if sts == nil {
		return true
	}
	return sts.Spec.Replicas != nil && *sts.Spec.Replicas == 0 && sts.Status.Replicas == 0 &&
		sts.Status.ObservedGeneration >= sts.Generation
}

// InPlacePhase is the phase status.restore shows for the record to write.
func InPlacePhase(f *facts.Facts, rec *facts.InPlaceRecord) string {
	switch {
	case rec == nil:
		return ""
	case rec.Verifying:
		return facts.InPlaceVerifying
	case rec.Done:
		return facts.InPlaceRestored
	case rec.Committed:
		return facts.InPlaceStarting
	case len(f.Pods) > 0 || !statefulSetStopped(f):
		return facts.InPlaceStopping
	}
	return facts.InPlaceRestoring
}

// restoreJob asks for rec's verify or restore Job.
// The verify Job looks for the point asked; the restore Job restores the revision the verification
// found (a time point's revision does not move with chunks uploaded in between).
func restoreJob(kind JobKind, rec *facts.InPlaceRecord) Job {
	point := rec.ParsedPoint()
	if kind == JobRestore && rec.Target > 0 {
		point = backup.Point{Revision: rec.Target}
	}
	return Job{Kind: kind, Restore: &RestoreJob{
		Request: rec.Request, Key: rec.Key(), SHA256: rec.SHA256, AcceptCluster: rec.AcceptCluster, OnQuorumLoss: len(rec.Lost) > 0,
		Point: point,
	}}
}

// ReleaseRestoreJobs lets Metacontroller delete the restore Jobs the answer does not render (jobs): the
// one of a restore that is done or was withdrawn. A restore Job left out by mistake is refused instead
// (deletions: knownJob), never deleted mid-run.
func ReleaseRestoreJobs(f *facts.Facts, jobs []Job) []Release {
	prefix := f.Names.Cluster + "-restore-"
	rendered := map[string]bool{}
	for _, j := range jobs {
		rendered[j.Name(f.Names)] = true
	}
	var out []Release
	for _, name := range slices.Sorted(maps.Keys(f.Observed.Jobs)) {
		if strings.HasPrefix(name, prefix) && !rendered[name] {
			out = append(out, Release{Key: wire.KeyJob, Name: name, Reason: "its in-place restore is done or was withdrawn"})
		}
	}
	return out
}
