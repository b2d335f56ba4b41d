package sync

import (
	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// Restarting one member's etcd in place (its pod stays): a CA rotation's restart to trust a new CA set,
// and a TLS switch's peer URL move. Both follow one machine: one member at a time, whose turn
// steps.RestartTurn decides; the Lease asks it; until its agent reports the step done (or while it says
// it is at it), the member is "restarting" (no other disruptive step starts beside it) and its etcd
// being down is the step itself, not a degradation.

// inPlaceRestart is one kind of restart in place: pending says member m was asked (its Lease, lv) and
// its report does not show it done; reason is what its agent reports while it does it.
type inPlaceRestart struct {
	what    string
	pending func(m *facts.Member, lv *facts.Lease) bool
	reason  string
}

var (
	caRestart = inPlaceRestart{
		what: "to finish restarting for the CA rotation",
		pending: func(_ *facts.Member, lv *facts.Lease) bool {
			return lv.CARestart != "" && lv.Report.TLSCAs != lv.CARestart
		},
		reason: api.ReasonRestartingForCA,
	}
	peerMove = inPlaceRestart{
		what: "to finish moving its peer URL (TLS switch)",
		pending: func(m *facts.Member, lv *facts.Lease) bool {
			return lv.PeerScheme != "" && facts.PeerScheme(m.PeerURL) != lv.PeerScheme
		},
		reason: api.ReasonSwitchingPeerScheme,
	}
)

// restarting names the pod of a member restarting in place for r: asked and not done, or saying it is
// at it ("" none).
func (p *plan) restarting(r inPlaceRestart) string {
	for _, i := range sortedKeys(p.f.Truth.Primary) {
		m := p.f.Truth.Primary[i]
		if lv := p.f.Reporting(m); lv != nil && (r.pending(m, lv) || lv.Report.Reason() == r.reason) {
			return p.f.Names.Pod(i)
		}
	}
	return ""
}

// restartingInPlace says which member's etcd restarts in place now as a wait ("" none): no other
// disruptive step starts beside it.
func (p *plan) restartingInPlace() string {
	for _, r := range []inPlaceRestart{caRestart, peerMove} {
		if who := p.restarting(r); who != "" {
			return who + " " + r.what
		}
	}
	return ""
}

// restartedForCA: m is the member the rotation lets restart now (this answer's or the last one's) and
// its agent still holds a fresh Lease: its etcd being down is the step itself, not a degradation. A
// member whose agent stops reporting is degraded as any other.
func (p *plan) restartedForCA(m *facts.Member) bool {
	lv := p.f.Reporting(m)
	return lv != nil && (m.Ordinal == p.CARot.Restart || caRestart.pending(m, lv) || lv.Report.Reason() == caRestart.reason)
}

// switchedPeer: m's etcd is down because its agent moves its peer URL now (it says so: etcd runs until
// the member list has changed, so a member merely asked that is down is down for another reason).
func (p *plan) switchedPeer(m *facts.Member) bool {
	lv := p.f.Reporting(m)
	return lv != nil && lv.Report.Reason() == peerMove.reason
}
