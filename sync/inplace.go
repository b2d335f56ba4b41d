package sync

import (
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
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

// decideInPlace carries out the in-place restore the record holds (chooseInPlace). It returns true
// while one runs (Stopping, Restoring, Starting): the plan is then the restore's alone. p.InPlace is
// the record to write back.
func (p *plan) decideInPlace() bool {
	f := p.f
	rec := f.InPlace.Record
	p.InPlace = rec
	if !rec.InFlight() {
		return false
	}
	// The verify Job stays until the restore is done: a cache that has not seen the record past its
	// verification must find it finished, not start it again.
	if verify := f.Names.RestoreVerifyJob(rec.Key()); rec.Verifying || f.Observed.Jobs[verify] != nil {
		p.jobs = append(p.jobs, p.restoreJobSpec(steps.JobRestoreVerify, rec))
	}
	if rec.Verifying {
		// The cluster serves on while the snapshot is checked: nothing else about it changes.
		return false
	}
	p.inPlaceMode()
	if f.InPlace.Withdrawn {
		p.wait(steps.Restore, "", "restore Job %s to finish: the restore of %q cannot be withdrawn while it runs", f.Names.RestoreJob(rec.Key()), rec.Request)
	}
	switch {
	case rec.Committed:
		// The Job stays until the restored member runs: a cache that has not seen the record yet
		// must find it finished, not render it again.
		if j := f.Observed.Jobs[f.Names.RestoreJob(rec.Key())]; j != nil {
			p.jobs = append(p.jobs, p.restoreJobSpec(steps.JobRestore, rec))
		}
		p.startPod0()
	case len(f.Pods) > 0 || !p.statefulSetStopped():
		p.Replicas = 0
		var names []string
		for _, i := range sortedKeys(f.Pods) {
			names = append(names, f.Names.Pod(i))
		}
		if len(names) == 0 {
			names = append(names, "StatefulSet "+f.Names.StatefulSet()+" at 0 replicas")
		}
		p.wait(steps.Restore, "", "member pods to stop before the restore: %s", strings.Join(names, ", "))
	default:
		p.Replicas = 0
		j := f.Observed.Jobs[f.Names.RestoreJob(rec.Key())]
		if j == nil {
			if pvc := f.PVCs[0]; pvc == nil || pvc.DeletionTimestamp != nil {
				p.InPlaceFailure = fmt.Sprintf("claim %s, which the restore writes into, does not exist", f.Names.PVC(0))
				return true
			}
			p.jobs = append(p.jobs, p.restoreJobSpec(steps.JobRestore, rec))
			p.wait(steps.Restore, "", "restore Job %s to restore %q", f.Names.RestoreJob(rec.Key()), rec.Request)
			return true
		}
		p.inPlaceJob(rec, j)
	}
	return true
}

// statefulSetStopped: the observed StatefulSet asks for no pod and its controller counts none (a pod
// list from a cache may miss a member still terminating; the controller's count is a second witness).
func (p *plan) statefulSetStopped() bool {
	sts := p.f.StatefulSet
	if sts == nil {
		return true
	}
	return sts.Spec.Replicas != nil && *sts.Spec.Replicas == 0 && sts.Status.Replicas == 0 &&
		sts.Status.ObservedGeneration >= sts.Generation
}

// inPlaceJob judges the observed restore Job: it keeps it, and a success commits the restore.
func (p *plan) inPlaceJob(rec *facts.InPlaceRecord, j *batchv1.Job) {
	p.jobs = append(p.jobs, p.restoreJobSpec(steps.JobRestore, rec))
	state, _ := facts.JobStatus(j)
	switch state {
	case facts.JobActive:
		p.wait(steps.Restore, "", "restore Job %s to restore %q", j.Name, rec.Request)
	case facts.JobSucceeded:
		c := *rec
		c.Committed = true
		p.InPlace = &c
		p.startPod0()
	case facts.JobFailed:
		how := fmt.Sprintf("remove or change the %s annotation", api.AnnRestoreFrom)
		if len(rec.Lost) > 0 {
			how = "set spec.backup.restoreOnQuorumLoss to false"
		}
		why := fmt.Sprintf("(kubectl logs job/%s)", j.Name)
		r, note := p.f.RestoreReport(j.Name)
		if note != "" {
			p.distrust("%s", note)
		}
		if r != nil && r.Message != "" {
			why = fmt.Sprintf("(%s)", r.Message)
		}
		p.InPlaceFailure = fmt.Sprintf("restore Job %s failed %s: it replaces the data only as its last step, so the cluster's data is as it was unless its log says otherwise; %s to start the cluster again on its data", j.Name, why, how)
	}
}

// startPod0 runs pod 0 on the restored data. The same answer's ConfigMap retires the replaced cluster
// IDs in agent.json; an agent that started on the file before the kubelet refreshed it sees the old
// Leases' reports make the restored data look foreign, and reads the file again before each decision.
func (p *plan) startPod0() {
	p.setIntent(0, api.IntentMember)
	p.Replicas = 1
	p.waitPod0()
}

// waitPod0 says that pod 0 is to start on the restored data, with what its agent reports if it cannot.
func (p *plan) waitPod0() {
	f := p.f
	if lv := f.Leases[0]; lv != nil && lv.Fresh && lv.Report.Error != "" && f.Pods[0] != nil && lv.Holder == string(f.Pods[0].UID) {
		p.wait(steps.Restore, f.Names.Pod(0), "to start on the restored data (its agent reports %q)", lv.Report.Error)
		return
	}
	p.wait(steps.Restore, f.Names.Pod(0), "to start on the restored data")
}

// inPlaceMode renders what a restore in flight needs around it: the Leases as they are (no intent
// changes: a leave would make a running member remove itself), every pod on the current template.
func (p *plan) inPlaceMode() {
	p.Restoring = true
	p.partition = 0
	for _, lp := range p.leases {
		lp.Join = api.JoinWindow{}
	}
}

// inPlacePhase is the phase status.restore shows for the record to write.
func (p *plan) inPlacePhase() string {
	rec := p.InPlace
	switch {
	case rec == nil:
		return ""
	case rec.Verifying:
		return facts.InPlaceVerifying
	case rec.Done:
		return facts.InPlaceRestored
	case rec.Committed:
		return facts.InPlaceStarting
	case len(p.f.Pods) > 0 || !p.statefulSetStopped():
		return facts.InPlaceStopping
	}
	return facts.InPlaceRestoring
}

// restoreJobSpec asks for rec's verify or restore Job.
// The verify Job looks for the point asked; the restore Job restores the revision the verification
// found (a time point's revision does not move with chunks uploaded in between).
func (p *plan) restoreJobSpec(kind steps.JobKind, rec *facts.InPlaceRecord) steps.Job {
	point := rec.ParsedPoint()
	if kind == steps.JobRestore && rec.Target > 0 {
		point = backup.Point{Revision: rec.Target}
	}
	return steps.Job{Kind: kind, Restore: &steps.RestoreJob{
		Request: rec.Request, Key: rec.Key(), SHA256: rec.SHA256, AcceptCluster: rec.AcceptCluster, OnQuorumLoss: len(rec.Lost) > 0,
		Point: point,
	}}
}

// inPlaceRecordJSON is the record as the ConfigMap holds it, "" without one.
func (p *plan) inPlaceRecordJSON() string {
	if p.InPlace == nil {
		return ""
	}
	b, _ := wire.Marshal(p.InPlace) // plain struct: cannot fail
	return string(b)
}

// releaseRestoreJobs lets Metacontroller delete the restore Jobs this answer does not render: the one of
// a restore that is done or was withdrawn. A restore Job left out by mistake is refused instead
// (deletions: knownJob), never deleted mid-run.
func (p *plan) releaseRestoreJobs() {
	prefix := p.f.Names.Cluster + "-restore-"
	rendered := map[string]bool{}
	for _, j := range p.jobs {
		rendered[j.Name(p.f.Names)] = true
	}
	for _, name := range sortedKeys(p.f.Observed.Jobs) {
		if strings.HasPrefix(name, prefix) && !rendered[name] {
			p.release(wire.KeyJob, name, "its in-place restore is done or was withdrawn")
		}
	}
}
