package sync

import (
	"fmt"

	"github.com/etcdhook/etcdhook/api"
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
	if r := f.inPlace.record; r.inFlight() && !r.Verifying {
		return fmt.Sprintf("the in-place restore of %q", r.Request), false
	}
	for _, id := range sortedKeys(f.removeJobs) {
		js := f.removeJobs[id]
		last := js[len(js)-1]
		if last.state == jobActive {
			return fmt.Sprintf("Job %s removing member %s", last.job.Name, id), false
		}
		if last.state == jobSucceeded && f.truth.member(id) != nil && f.now.Sub(last.finished) < succeededJobGrace {
			return fmt.Sprintf("member %s to leave the member list after Job %s", id, last.job.Name), false
		}
	}
	for _, i := range sortedKeys(f.deleteVolumeJobs) {
		js := f.deleteVolumeJobs[i]
		if js[len(js)-1].state == jobActive {
			return fmt.Sprintf("Job %s deleting the volume of %s", js[len(js)-1].job.Name, f.names.Pod(i)), true
		}
	}
	if what := p.volumeStepInFlight(); what != "" {
		return what, true
	}
	if m := f.truth.learner(); m != nil {
		return fmt.Sprintf("learner %s (%s) to be promoted", m.ID, m.PeerURL), false
	}
	// The Lease intents as normalised (carry, normalizeIntents), never the raw observed ones.
	for _, i := range sortedKeys(p.leases) {
		lp := p.leases[i]
		m := f.truth.primary[i]
		if lp.Kind == api.IntentLeave && m != nil && p.quorumAllowsRemoving(m) {
			return fmt.Sprintf("%s to leave the cluster", f.names.Pod(i)), false
		}
		if p.joining(i) && (m == nil || !f.reportsHealthyVoter(i, m.ID)) {
			return fmt.Sprintf("%s to join the cluster", f.names.Pod(i)), false
		}
	}
	return "", false
}
