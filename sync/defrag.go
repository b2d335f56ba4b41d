package sync

import (
	"github.com/etcdhook/etcdhook/sync/steps"
)

// askDefrag decides the defragmentation pass (steps.Defrag, after every other step: what holds it is
// what they decided) and writes the intent on the chosen member's Lease (only a Lease the plan renders).
func (p *plan) askDefrag() {
	p.Defrag = steps.Defrag(p.f, p.defragInput())
	if lp, ok := p.leases[p.Defrag.Target]; ok && p.Defrag.Target >= 0 {
		lp.Defrag = p.Defrag.Token
	}
}

// defragInput is what the defragmentation pass reads of the decision so far.
func (p *plan) defragInput() steps.DefragInput {
	return steps.DefragInput{
		HasSpec: p.HasSpec, Spec: p.Spec, Space: p.Space,
		Paused: p.Paused, QuorumLost: p.QuorumLost, Busy: p.Busy, Rolling: p.Rolling, PendingSpec: p.PendingSpec,
		CARestart: p.CARot.Restart, CARestarting: steps.CARestarting(p.f),
		TLSTurn: p.TLSSw.Turn, PeerMoving: steps.PeerMoving(p.f),
	}
}
