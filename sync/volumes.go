package sync

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// Volume growth (docs/design/17-growing-volumes.md §17): spec.storage.size may grow. Each member's claim is grown by a Job,
// one member at a time and only while every member is healthy (a driver that grows file systems only
// offline needs the member restarted); then a Job deletes the StatefulSet with propagation Orphan,
// since its claim template is immutable, and the hook renders it afresh with the new size over the
// same pods, which it adopts without a restart (their template is unchanged).

// volumeStepInFlight names a growth step under way: a Job growing a claim or re-creating the
// StatefulSet, or the StatefulSet being deleted (Metacontroller leaves an object being deleted alone;
// once it is gone, the answer that renders it again is safe under any spec: see roll).
func (p *plan) volumeStepInFlight() string {
	f := p.f
	for _, i := range sortedKeys(f.GrowJobs) {
		if js := f.GrowJobs[i]; js[len(js)-1].State == facts.JobActive {
			return fmt.Sprintf("Job %s growing claim %s", js[len(js)-1].Job.Name, f.Names.PVC(i))
		}
	}
	if js := f.TemplateJobs; len(js) > 0 && js[len(js)-1].State == facts.JobActive {
		return fmt.Sprintf("Job %s re-creating StatefulSet %s for its claim template", js[len(js)-1].Job.Name, f.Names.StatefulSet())
	}
	if f.StatefulSet != nil && f.StatefulSet.DeletionTimestamp != nil && len(f.TemplateJobs) > 0 {
		return fmt.Sprintf("StatefulSet %s to be deleted (its pods and claims stay) and re-created", f.Names.StatefulSet())
	}
	return ""
}

// growVolumes is reconcile's last step: the lowest member claim below the size is grown, then the
// claim template is brought to it. It reports whether it started or waits on something.
func (p *plan) growVolumes() bool {
	f := p.f
	size, ok := steps.StorageSize(p.Spec)
	if !ok {
		return false
	}
	// A member that is down first: a full disk is the likeliest reason to grow, and a member whose disk is
	// full crash-loops; growing its claim costs no one's availability.
	below := -1
	for i := 0; i < int(p.Replicas); i++ {
		if !steps.ClaimBelow(f, i, size) {
			continue
		}
		if below < 0 || (p.podHealthy(below) && !p.podHealthy(i)) {
			below = i
		}
	}
	if below >= 0 {
		if uid := f.PVCs[below].Labels[api.LabelClusterUID]; uid != f.ClusterUID {
			// The Job acts only on this cluster's claims (§8.10): an adopted one (adoptExistingData) is
			// grown by hand, and the template waits for it.
			p.wait(steps.Volume, "", "claim %s carries EtcdCluster UID %q, not this cluster's (adopted data): grow it by hand to %s (kubectl patch pvc %s -p '{\"spec\":{\"resources\":{\"requests\":{\"storage\":\"%s\"}}}}')",
				f.Names.PVC(below), uid, size.String(), f.Names.PVC(below), size.String())
			return true
		}
		return p.growClaim(below, size)
	}
	if !steps.TemplateBelow(f, size) {
		return false
	}
	// The template only once no pod is mid-roll: the StatefulSet made afresh adopts pods that all run
	// its one revision, so none restarts.
	st := f.StatefulSet.Status
	for _, i := range sortedKeys(f.Pods) {
		if f.Pods[i].Labels["controller-revision-hash"] != st.UpdateRevision || st.CurrentRevision != st.UpdateRevision ||
			f.StatefulSet.Annotations[api.AnnTemplateHash] != p.hash {
			p.wait(steps.Volume, "", "every pod on one revision before StatefulSet %s is re-created for its claim template", f.Names.StatefulSet())
			return true
		}
	}
	js := f.TemplateJobs
	attempt, why := p.nextAttempt(js)
	if why != "" {
		p.wait(steps.Volume, "", "re-creating StatefulSet %s for its claim template: %s", f.Names.StatefulSet(), why)
		return true
	}
	job := steps.Job{Kind: steps.JobClaimTemplate, Attempt: attempt, Size: size, StatefulSetUID: string(f.StatefulSet.UID)}
	p.jobs = append(p.jobs, job)
	p.action = fmt.Sprintf("Job %s re-creating StatefulSet %s for its claim template", job.Name(f.Names), f.Names.StatefulSet())
	p.Busy, p.BusyVolume, p.Growth = p.action, true, true
	p.wait(steps.Volume, p.action, "")
	return true
}

// growClaim starts the next Job growing ordinal i's claim, when every other member is healthy (the Job
// may restart member i: for a driver that grows file systems only at mount time, or because it is down).
func (p *plan) growClaim(i int, size resource.Quantity) bool {
	f := p.f
	all, healthy := f.Truth.Voters()
	m := f.Truth.Primary[i]
	if m != nil && m.Voter() && !m.Healthy {
		all-- // member i itself may be down (its disk full): the others must be healthy
	}
	if m != nil && m.Voter() && m.Healthy {
		all, healthy = all-1, healthy-1
	}
	if len(f.Truth.Primary) != p.Target() || m == nil || healthy != all || f.Truth.Learner() != nil {
		p.wait(steps.Volume, "", "every member but %s healthy before growing its claim %s (%d of %d other voters healthy)", f.Names.Pod(i), f.Names.PVC(i), healthy, all)
		return true
	}
	if who := steps.Defragmenting(p.f); who != "" {
		p.wait(steps.Volume, who, "to finish defragmenting before growing claim %s", f.Names.PVC(i))
		return true
	}
	if what := p.restartingInPlace(); what != "" {
		p.wait(steps.Volume, what, "before growing claim %s", f.Names.PVC(i))
		return true
	}
	attempt, why := p.nextAttempt(f.GrowJobs[i])
	if why != "" {
		p.wait(steps.Volume, "", "growing claim %s to %s: %s", f.Names.PVC(i), size.String(), why)
		return true
	}
	job := steps.Job{Kind: steps.JobGrowVolume, Attempt: attempt, Ordinal: i, Size: size, Endpoints: p.voterEndpoints("")}
	p.jobs = append(p.jobs, job)
	p.Growing = f.Names.PVC(i)
	p.action = fmt.Sprintf("Job %s growing claim %s to %s", job.Name(f.Names), f.Names.PVC(i), size.String())
	p.Busy, p.BusyVolume, p.Growth = p.action, true, true
	p.wait(steps.Volume, p.action, "")
	return true
}

// nextAttempt numbers the next Job of a series, or says why none starts now: one is running, the last
// succeeded moments ago (the cache may not show its work yet), the last failed and its backoff has not
// passed, or the attempts are used up.
func (p *plan) nextAttempt(js []*facts.Job) (int, string) {
	if len(js) == 0 {
		return 1, ""
	}
	last := js[len(js)-1]
	switch {
	case last.State == facts.JobActive:
		return 0, fmt.Sprintf("Job %s running", last.Job.Name)
	case last.State == facts.JobSucceeded && p.f.Now.Sub(last.Finished) < succeededJobGrace:
		return 0, fmt.Sprintf("Job %s succeeded; waiting for its result to show", last.Job.Name)
	case last.State == facts.JobFailed && last.Refused:
		return 0, fmt.Sprintf("Job %s was refused for a cause another attempt would meet again (kubectl logs job/%s): not retried; delete the Job to try again once the cause is fixed", last.Job.Name, last.Job.Name)
	case last.State == facts.JobFailed && p.f.Now.Before(last.Finished.Add(backoff(last.Attempt))):
		return 0, fmt.Sprintf("Job %s failed (see its log); retrying after %s", last.Job.Name, last.Finished.Add(backoff(last.Attempt)).UTC().Format(time.RFC3339))
	case last.Attempt >= maxAttempts:
		return 0, fmt.Sprintf("no success in %d attempts: see Job %s", maxAttempts, last.Job.Name)
	}
	return last.Attempt + 1, ""
}
