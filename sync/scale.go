package sync

import (
	"fmt"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// Scaling to the spec's size: one member added or removed per step; the replicas floor, the volumes of
// removed members and the Leases of ordinals that are gone are steps.FloorReplicas, DeleteVolume and
// TrimLeases.

// scaleInput is what the scale steps read of the plan so far.
func (p *plan) scaleInput() steps.ScaleInput {
	return steps.ScaleInput{Spec: p.Spec, Replicas: p.Replicas, Partition: p.partition, Busy: p.Busy, Leases: p.leases, Endpoints: p.voterEndpoints("")}
}

// deleteVolume deletes the claim of an ordinal that left (steps.DeleteVolume).
func (p *plan) deleteVolume() bool {
	d := steps.DeleteVolume(p.f, p.scaleInput())
	if d.Job != nil {
		p.jobs = append(p.jobs, *d.Job)
		p.action = d.Action
		p.Busy, p.BusyVolume = p.action, true
	}
	p.await(d.Waiting...)
	return d.Acted
}

// floorReplicas keeps invariant 2 and notes what is left to clean up (steps.FloorReplicas).
func (p *plan) floorReplicas() {
	d := steps.FloorReplicas(p.f, p.scaleInput())
	p.Replicas, p.partition, p.cleanup = d.Replicas, d.Partition, d.Cleanup
	p.await(d.Waiting...)
}

// trimLeases renders a Lease for every ordinal in use (steps.TrimLeases).
func (p *plan) trimLeases() {
	d := steps.TrimLeases(p.f, p.scaleInput())
	p.leases = d.Leases
	for _, r := range d.Released {
		p.release(r.Key, r.Name, r.Reason)
	}
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
