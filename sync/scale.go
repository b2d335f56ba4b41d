package sync

import (
	"github.com/etcdhook/etcdhook/sync/steps"
)

// Scaling to the spec's size: one member added or removed per step (steps.Members: ScaleUp, ScaleDown);
// the replicas floor, the volumes of removed members and the Leases of ordinals that are gone
// (steps.FloorReplicas, DeleteVolume, TrimLeases).

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
