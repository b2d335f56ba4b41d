package sync

import (
	"github.com/etcdhook/etcdhook/sync/facts"
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

// removalRunning says whether any remove Job is active or was made this sync: removals go one at a time.
func (p *plan) removalRunning() bool {
	if p.removing {
		return true
	}
	for _, js := range p.f.RemoveJobs {
		if js[len(js)-1].State == facts.JobActive {
			return true
		}
	}
	return false
}
