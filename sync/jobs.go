package sync

import (
	"github.com/etcdhook/etcdhook/sync/steps"
)

// keepJobs carries the observed Jobs still useful and releases the others (steps.KeepJobs).
func (p *plan) keepJobs() {
	d := steps.KeepJobs(p.f, steps.JobsInput{Spec: p.Spec})
	for _, j := range d.Carried {
		p.jobs = append(p.jobs, steps.Job{Kind: steps.JobCarried, Carried: j})
	}
	for _, r := range d.Released {
		p.release(r.Key, r.Name, r.Reason)
	}
}
