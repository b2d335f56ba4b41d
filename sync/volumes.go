package sync

import (
	"github.com/etcdhook/etcdhook/sync/steps"
)

// growVolumes is reconcile's last step (steps.GrowVolumes): it reports whether it started a Job or
// waits on something.
func (p *plan) growVolumes() bool {
	d := steps.GrowVolumes(p.f, steps.VolumesInput{
		Spec: p.Spec, Replicas: p.Replicas, Hash: p.hash, PodHealthy: p.podHealthy,
		RestartingInPlace: p.restartingInPlace(), Endpoints: p.voterEndpoints(""),
	})
	if d.Job != nil {
		p.jobs = append(p.jobs, *d.Job)
		p.Growing, p.action = d.Growing, d.Action
		p.Busy, p.BusyVolume, p.Growth = p.action, true, true
	}
	p.await(d.Waiting...)
	return d.Acted
}
