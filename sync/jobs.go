package sync

import (
	"time"

	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/render"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// The remove and volume Jobs already observed: which are carried into the answer, which are released
// once their outcome is read, and the backoff between attempts.

// keepJobs carries observed Jobs over: active ones, the latest failed attempt while its reason may still
// hold, and succeeded ones until their effect shows. Finished Jobs whose effect is observed are dropped.
func (p *plan) keepJobs() {
	f := p.f
	for _, id := range sortedKeys(f.RemoveJobs) {
		js := f.RemoveJobs[id]
		m := f.Truth.Member(id)
		last := js[len(js)-1]
		for _, jv := range js {
			keep := false
			switch jv.State {
			case facts.JobActive:
				keep = true
			case facts.JobSucceeded:
				keep = m != nil && jv == last
			case facts.JobFailed:
				// The latest failure stays visible (its number and time drive the backoff of the next
				// attempt), and the one before it while a retry runs.
				keep = m != nil && (jv == last || (last.State == facts.JobActive && jv.Attempt == last.Attempt-1))
			}
			if keep || !p.judgeJobs() {
				p.jobs = append(p.jobs, render.Job{Kind: render.JobCarried, Carried: jv.Job})
			} else {
				p.release(wire.KeyJob, jv.Job.Name, "finished remove Job whose outcome is observed")
			}
		}
	}
	for _, i := range sortedKeys(f.DeleteVolumeJobs) {
		js := f.DeleteVolumeJobs[i]
		last := js[len(js)-1]
		pvc := f.PVCs[i]
		gone := pvc == nil || pvc.DeletionTimestamp != nil
		for _, jv := range js {
			retrying := last.State == facts.JobActive && jv.Attempt == last.Attempt-1
			if jv.State == facts.JobActive || (!gone && (jv == last || retrying)) || !p.judgeJobs() {
				p.jobs = append(p.jobs, render.Job{Kind: render.JobCarried, Carried: jv.Job})
			} else {
				p.release(wire.KeyJob, jv.Job.Name, "finished volume Job whose outcome is observed")
			}
		}
	}
}

// judgeJobs: only with one cluster and a known member list can a finished Job be judged done; otherwise
// every observed Job is kept.
func (p *plan) judgeJobs() bool {
	return p.f.Bootstrapped && !p.f.SplitBrain && p.f.Truth.Known()
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

func backoff(attempt int) time.Duration {
	d := retryBackoffBase
	for i := 1; i < attempt && d < retryBackoffMax; i++ {
		d *= 2
	}
	if d > retryBackoffMax {
		d = retryBackoffMax
	}
	return d
}
