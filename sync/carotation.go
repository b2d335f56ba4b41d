package sync

import (
	"github.com/etcdhook/etcdhook/sync/steps"
)

// askCARotation decides (steps.RotateCA) and writes the step on every member Lease and the restart on one.
func (p *plan) askCARotation() {
	rot := steps.RotateCA(p.f, steps.RotateCAInput{HasSpec: p.HasSpec, Spec: p.Spec, TLSSwitchActive: p.TLSSw.Active(), Holds: p.restartHolds()})
	p.CARot = rot.State
	p.Distrusted = append(p.Distrusted, rot.Distrusted...)
	p.await(rot.Waiting...)
	if !p.CARot.Active {
		return
	}
	for _, lp := range p.leases {
		lp.CARotation = p.CARot.Intent
	}
	if lp, ok := p.leases[p.CARot.Restart]; ok && p.CARot.Restart >= 0 {
		lp.CARestart = p.CARot.Trust
	}
}

// restartHolds is what holds a restart in place (steps.RestartTurn) of the decision so far.
func (p *plan) restartHolds() steps.RestartHolds {
	return steps.RestartHolds{
		Paused: p.Paused, QuorumLost: p.QuorumLost, Busy: p.Busy, Rolling: p.Rolling,
		PendingSpec: p.PendingSpec, TLSWaitsForCA: p.tlsWaitsForCA, Target: p.Target(),
	}
}
