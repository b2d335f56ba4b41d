package sync

import (
	"fmt"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// The membership step in flight, judged from observed objects alone: it holds the next step and a new spec.

// inFlight names the membership change under way, judged from observed objects alone.
func (p *plan) inFlight() string {
	what, _ := p.stepInFlight()
	return what
}

// stepInFlight is inFlight, and whether that step is only the deletion of a removed member's volume
// (housekeeping: it holds the next step, but the cluster has its size).
func (p *plan) stepInFlight() (what string, volume bool) {
	f := p.f
	// (While its snapshot is verified the cluster serves as before: nothing of it is held.)
	if r := f.InPlace.Record; r.InFlight() && !r.Verifying {
		return fmt.Sprintf("the in-place restore of %q", r.Request), false
	}
	for _, id := range sortedKeys(f.RemoveJobs) {
		js := f.RemoveJobs[id]
		last := js[len(js)-1]
		if last.State == facts.JobActive {
			return fmt.Sprintf("Job %s removing member %s", last.Job.Name, id), false
		}
		if last.State == facts.JobSucceeded && f.Truth.Member(id) != nil && f.Now.Sub(last.Finished) < steps.SucceededJobGrace {
			return fmt.Sprintf("member %s to leave the member list after Job %s", id, last.Job.Name), false
		}
	}
	for _, i := range sortedKeys(f.DeleteVolumeJobs) {
		js := f.DeleteVolumeJobs[i]
		if js[len(js)-1].State == facts.JobActive {
			return fmt.Sprintf("Job %s deleting the volume of %s", js[len(js)-1].Job.Name, f.Names.Pod(i)), true
		}
	}
	if what := steps.VolumeStepInFlight(p.f); what != "" {
		return what, true
	}
	if m := f.Truth.Learner(); m != nil {
		return fmt.Sprintf("learner %s (%s) to be promoted", m.ID, m.PeerURL), false
	}
	// The Lease intents as normalised (carry, normalizeIntents), never the raw observed ones.
	for _, i := range p.leases.Ordinals() {
		lp := p.leases[i]
		m := f.Truth.Primary[i]
		if lp.Kind == api.IntentLeave && m != nil && steps.QuorumAllowsRemoving(f, m) {
			return fmt.Sprintf("%s to leave the cluster", f.Names.Pod(i)), false
		}
		if p.leases.Joining(i, p.f.Now) && (m == nil || !f.ReportsHealthyVoter(i, m.ID)) {
			return fmt.Sprintf("%s to join the cluster", f.Names.Pod(i)), false
		}
	}
	return "", false
}
