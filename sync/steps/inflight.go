package steps

import (
	"fmt"
	"maps"
	"slices"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// The membership step in flight, judged from observed objects alone: it holds the next step and a new spec.

// StepInFlight names the membership change under way, judged from observed objects and the Lease intents
// as normalised (ls), and says whether that step is only the deletion of a removed member's volume
// (housekeeping: it holds the next step, but the cluster has its size).
func StepInFlight(f *facts.Facts, ls Leases) (what string, volume bool) {
	// (While its snapshot is verified the cluster serves as before: nothing of it is held.)
	if r := f.InPlace.Record; r.InFlight() && !r.Verifying {
		return fmt.Sprintf("the in-place restore of %q", r.Request), false
	}
	for _, id := range slices.Sorted(maps.Keys(f.RemoveJobs)) {
		js := f.RemoveJobs[id]
		last := js[len(js)-1]
		if last.State == facts.JobActive {
			return fmt.Sprintf("Job %s removing member %s", last.Job.Name, id), false
		}
		if last.State == facts.JobSucceeded && f.Truth.Member(id) != nil && f.Now.Sub(last.Finished) < SucceededJobGrace {
			return fmt.Sprintf("member %s to leave the member list after Job %s", id, last.Job.Name), false
		}
	}
	for _, i := range slices.Sorted(maps.Keys(f.DeleteVolumeJobs)) {
		js := f.DeleteVolumeJobs[i]
		if js[len(js)-1].State == facts.JobActive {
			return fmt.Sprintf("Job %s deleting the volume of %s", js[len(js)-1].Job.Name, f.Names.Pod(i)), true
		}
	}
	if what := VolumeStepInFlight(f); what != "" {
		return what, true
	}
	if m := f.Truth.Learner(); m != nil {
		return fmt.Sprintf("learner %s (%s) to be promoted", m.ID, m.PeerURL), false
	}
	// The Lease intents as normalised (carry, normalizeIntents), never the raw observed ones.
	for _, i := range ls.Ordinals() {
		lp := ls[i]
		m := f.Truth.Primary[i]
		if lp.Kind == api.IntentLeave && m != nil && QuorumAllowsRemoving(f, m) {
			return fmt.Sprintf("%s to leave the cluster", f.Names.Pod(i)), false
		}
		if ls.Joining(i, f.Now) && (m == nil || !f.ReportsHealthyVoter(i, m.ID)) {
			return fmt.Sprintf("%s to join the cluster", f.Names.Pod(i)), false
		}
	}
	return "", false
}
