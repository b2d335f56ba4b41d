package sync

import (
	"fmt"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// Scaling to the spec's size: one member added or removed per step, the replicas floor that keeps every
// member's pod, the volumes of removed members, and the Leases of ordinals that are gone.

// adoptFloor raises floor to cover every ordinal with a claim when the spec adopts existing data: a
// cluster re-created on the kept claims of an old one must start all of the old members together, since
// pod 0 alone runs on one member's data and can never reach the old quorum. A claim of a member that was
// removed makes its agent wait for a join; a seed is only ever used on an empty volume.
func (p *plan) adoptFloor(floor int32) int32 {
	if !p.Spec.AdoptExistingData {
		return floor
	}
	for i, pvc := range p.f.PVCs {
		if pvc.DeletionTimestamp == nil && int32(i+1) > floor {
			floor = int32(i + 1)
		}
	}
	return floor
}

// deleteVolume deletes the claim of an ordinal that left: above replicas, no member, no pod.
func (p *plan) deleteVolume() bool {
	f := p.f
	if p.Spec.Storage.EmptyDir != nil {
		return false
	}
	for _, i := range sortedKeys(f.PVCs) {
		pvc := f.PVCs[i]
		// Below the target a volume is a member's to be, never a removed one's: after an in-place restore
		// the cluster grows back from one member onto the old volumes (their agents move the replaced
		// data aside), and a shrink reversed before its volumes went re-creates them.
		if i < int(p.Replicas) || i < p.Target() || f.Truth.Primary[i] != nil || f.Pods[i] != nil || pvc.DeletionTimestamp != nil ||
			pvc.Labels[api.LabelClusterUID] != f.ClusterUID {
			continue
		}
		if f.StatefulSet == nil || f.StatefulSet.Spec.Replicas == nil || int(*f.StatefulSet.Spec.Replicas) > i {
			continue // the StatefulSet has not been lowered yet
		}
		js := f.DeleteVolumeJobs[i]
		attempt := 1
		if len(js) > 0 {
			last := js[len(js)-1]
			if last.State == facts.JobFailed && f.Now.Before(last.Finished.Add(steps.Backoff(last.Attempt))) {
				p.wait(steps.Volume, "", "retrying the deletion of claim %s after Job %s failed", pvc.Name, last.Job.Name)
				return true
			}
			attempt = last.Attempt + 1
		}
		if attempt > steps.MaxAttempts {
			continue
		}
		job := steps.Job{Kind: steps.JobDeleteVolume, Attempt: attempt, Ordinal: i, Endpoints: p.voterEndpoints("")}
		p.jobs = append(p.jobs, job)
		p.action = fmt.Sprintf("Job %s deleting the volume of %s", job.Name(f.Names), f.Names.Pod(i))
		p.Busy, p.BusyVolume = p.action, true
		p.wait(steps.Volume, p.action, "")
		return true
	}
	return false
}

// scaleDown asks a member above the target to leave (docs/design/07-steps.md §7.5): an unhealthy one first, since its
// removal costs no quorum, else the highest.
func (p *plan) scaleDown() bool {
	f := p.f
	h := f.Truth.HighestOrdinal()
	if h < p.Target() {
		return false
	}
	for i := h; i >= p.Target(); i-- {
		if m := f.Truth.Primary[i]; m != nil && !m.Healthy && p.quorumAllowsRemoving(m) {
			h = i
			break
		}
	}
	m := f.Truth.Primary[h]
	if !p.quorumAllowsRemoving(m) {
		p.wait(steps.Scale, "", "quorum does not allow %s to leave now", f.Names.Pod(h))
		return true
	}
	if who := steps.Defragmenting(p.f); who != "" && m.Healthy {
		p.wait(steps.Scale, who, "to finish defragmenting before %s leaves", f.Names.Pod(h))
		return true
	}
	if what := p.restartingInPlace(); what != "" && m.Healthy {
		p.wait(steps.Scale, what, "before %s leaves", f.Names.Pod(h))
		return true
	}
	p.leases.SetIntent(h, api.IntentLeave, p.f.Now)
	p.leases.Lease(h).Join = api.JoinWindow{}
	p.action = fmt.Sprintf("%s to leave the cluster", f.Names.Pod(h))
	p.Busy = p.action
	if lv := f.Leases[h]; lv == nil || !lv.Fresh || p.lostData(m) {
		p.removeMember(m, "leave") // its agent cannot remove it
		if p.Busy == p.action {
			p.wait(steps.Scale, p.action, "")
		}
		return true
	}
	p.action = fmt.Sprintf("%s to leave the cluster", f.Names.Pod(h))
	p.Busy = p.action
	p.wait(steps.Scale, p.action, "")
	return true
}

// scaleUp raises replicas by one and permits the new ordinal to join.
func (p *plan) scaleUp() bool {
	f := p.f
	n := len(f.Truth.Primary)
	if n >= p.Target() {
		return false
	}
	i := int(p.Replicas)
	for j := 0; j < i; j++ {
		if f.Truth.Primary[j] == nil {
			return false // repairJoin handles holes below replicas
		}
	}
	if ok, why := p.joinable(i); !ok {
		p.wait(steps.Scale, "", "%s", why)
		return true
	}
	if js := f.DeleteVolumeJobs[i]; len(js) > 0 && js[len(js)-1].State == facts.JobActive {
		p.wait(steps.Scale, "", "the old claim of %s to be deleted", f.Names.Pod(i))
		return true
	}
	p.Replicas = int32(i + 1)
	p.leases.Permit(i, p.f.Now, p.timeout(p.Spec.Timeouts.LearnerPromotionSeconds))
	p.action = fmt.Sprintf("%s to join the cluster", f.Names.Pod(i))
	p.Busy = p.action
	p.wait(steps.Scale, p.action, "")
	return true
}

// floorReplicas keeps invariant 2 (replicas >= 1 + highest member ordinal) and drops pods that are
// neither members nor wanted nor joining.
func (p *plan) floorReplicas() {
	f := p.f
	if !f.Bootstrapped {
		return
	}
	floor := int32(f.Truth.HighestOrdinal() + 1)
	if f.Truth.Known() && int32(f.Truth.UnionHighest+1) > floor {
		// Another fresh healthy voter lists a member the freshest report does not: the safest view wins.
		floor = int32(f.Truth.UnionHighest + 1)
	}
	if !f.Truth.Known() {
		// Without a member list nothing is lowered: status.members is the best memory of who is a member.
		floor = p.Replicas
		for _, m := range f.Parent.Status.Members {
			if i := f.Names.PodOrdinal(m.Name); int32(i+1) > floor {
				floor = int32(i + 1)
			}
		}
		floor = p.adoptFloor(floor)
	}
	for i := range p.leases {
		if p.leases.Joining(i, p.f.Now) && int32(i+1) > floor && i < p.Target() {
			floor = int32(i + 1)
		}
	}
	want := p.Replicas
	if t := int32(p.Target()); want > t && f.Truth.Known() {
		want = t
	}
	if want < floor {
		want = floor
	}
	if want < 1 {
		want = 1
	}
	// Members missing (a create, a scale-up) and the member list known: every wanted pod starts at once,
	// and each joins when its agent asks and it is its turn (scaleUp, repairJoin: one at a time, every
	// voter healthy, under a join permission). Started one per join, pod starts (3-5 s each) were most
	// of a create-5 (e2e/RESULTS.md, timeline). Derived from the target and the member list, not from the
	// observed replicas, so a stale cache cannot take a started pod away. It stops below an ordinal whose
	// old claim is still being deleted: a pod would bind it.
	if t := int32(p.Target()); f.Truth.Known() && !f.SplitBrain && len(f.Truth.Primary) < p.Target() {
		for want < t && !p.claimDeleting(int(want)) {
			want++
		}
	}
	p.Replicas = want
	if f.Truth.Known() {
		p.noteCleanup()
	}
	if p.partition > p.Replicas {
		p.partition = p.Replicas
	}
}

// claimDeleting: the claim of ordinal i is being deleted, or a Job is deleting it.
func (p *plan) claimDeleting(i int) bool {
	if pvc := p.f.PVCs[i]; pvc != nil && pvc.DeletionTimestamp != nil {
		return true
	}
	js := p.f.DeleteVolumeJobs[i]
	return len(js) > 0 && js[len(js)-1].State == facts.JobActive
}

// noteCleanup says what is left of ordinals above replicas that are no longer members: a pod that must
// stop, a volume that must be deleted. Derived from observed objects, so a resync says the same.
func (p *plan) noteCleanup() {
	f := p.f
	for i := 0; i < int(p.Replicas) && i < p.Target(); i++ {
		lp := p.leases[i]
		if f.Truth.Primary[i] == nil && (lp == nil || lp.Join.IsZero()) {
			p.wait(steps.Scale, f.Names.Pod(i), "has no member and its agent has not asked to join")
		}
	}
	for _, i := range sortedKeys(f.Pods) {
		if i >= int(p.Replicas) && f.Truth.Primary[i] == nil {
			p.cleanup = true
			p.wait(steps.Scale, f.Names.Pod(i), "to stop")
		}
	}
	if p.Spec.Storage.EmptyDir != nil || p.Busy != "" {
		return
	}
	for _, i := range sortedKeys(f.PVCs) {
		pvc := f.PVCs[i]
		if i >= int(p.Replicas) && f.Truth.Primary[i] == nil && f.Pods[i] == nil && pvc.DeletionTimestamp == nil && pvc.Labels[api.LabelClusterUID] == f.ClusterUID {
			p.cleanup = true
			p.wait(steps.Scale, "", "claim %s of the removed member to be deleted", pvc.Name)
		}
	}
}

// trimLeases renders a Lease for every ordinal in use: below replicas, a member, or with a pod left.
func (p *plan) trimLeases() {
	f := p.f
	n := int(p.Replicas)
	if h := f.Truth.HighestOrdinal() + 1; h > n {
		n = h
	}
	for i := range f.Pods {
		if i+1 > n {
			n = i + 1
		}
	}
	for i := range p.leases {
		if i >= n {
			delete(p.leases, i)
		}
	}
	for _, lv := range f.Leases {
		if lv.Ordinal >= n {
			p.release(wire.KeyLease, lv.Lease.Name, fmt.Sprintf("ordinal %d has no member, no pod and is above replicas", lv.Ordinal))
		}
	}
	for i := 0; i < n; i++ {
		lp := p.leases.Lease(i)
		switch {
		case i >= int(p.Replicas) && f.Truth.Primary[i] == nil:
			// A pod above replicas is on its way out: a restart must park, never rejoin.
			if lp.Kind != api.IntentLeave {
				p.leases.SetIntent(i, api.IntentLeave, p.f.Now)
			}
			lp.Join = api.JoinWindow{}
		case lp.Kind == "":
			p.leases.SetIntent(i, api.IntentMember, p.f.Now)
		case lp.Kind == api.IntentLeave && i < int(p.Replicas) && i < p.Target() && f.Truth.Primary[i] == nil && f.Truth.Known():
			// A wanted ordinal below replicas that has left (a stale answer can leave this behind)
			// becomes a member again: its parked agent restarts and asks to join.
			p.leases.SetIntent(i, api.IntentMember, p.f.Now)
		}
	}
}
