package sync

import "github.com/etcdhook/etcdhook/sync/steps"

// conclude draws the conclusions that read what several steps decided (steps.Concluded), once every
// step has run: status reads them instead of asking the plan again.
func (p *plan) conclude() {
	f := p.f
	// A member being added right now (its ordinal holds a live join permission and its agent reports this
	// very member ID), or the member a roll step or a CA rotation just restarted, or one moving its peer
	// URL, is not yet expected to be healthy: that is progress, not a degradation.
	p.ExpectedDown = map[string]bool{}
	for _, m := range f.Truth.Members {
		if !m.Healthy && (steps.JoiningAs(f, p.leases, m) || p.restartedByRoll(m) || steps.RestartedForCA(f, p.CARot.Restart, m) || steps.SwitchedPeer(f, m)) {
			p.ExpectedDown[m.ID] = true
		}
	}
	p.Defragmenting = steps.Defragmenting(p.f)
	p.InPlacePhase = steps.InPlacePhase(f, p.InPlace)
	if p.Space.On {
		p.Space.Message = steps.SpaceMessage(f, p.Space, steps.SpaceInput{Spec: p.Spec, Paused: p.Paused, Replicas: p.Replicas})
	}
	p.Echo = !p.HasSpec && len(childRefs(f.Observed)) > 0
}
