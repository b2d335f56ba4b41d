package sync

import (
	"github.com/etcdhook/etcdhook/sync/steps"
)

// askPeerSwitch decides the TLS switch's step after the roll (steps.PeerSwitch; rolled: the roll was
// evaluated in this sync) and writes the peer scheme on the Lease of the one member whose turn it is.
func (p *plan) askPeerSwitch(rolled bool) {
	d := steps.PeerSwitch(p.f, steps.PeerSwitchInput{Spec: p.Spec, State: p.TLSSw, Rolled: rolled, Rolling: p.Rolling, Holds: p.restartHolds()})
	p.TLSSw = d.State
	if d.State.Turn >= 0 {
		p.leases.Lease(d.State.Turn).PeerScheme = d.To
	}
	p.await(d.Wait)
}
