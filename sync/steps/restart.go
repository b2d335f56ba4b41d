package steps

import (
	"maps"
	"slices"

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
func restarting(f *facts.Facts, r inPlaceRestart) string {
	for _, i := range slices.Sorted(maps.Keys(f.Truth.Primary)) {
		m := f.Truth.Primary[i]
		if lv := f.Reporting(m); lv != nil && (r.pending(m, lv) || lv.Report.Reason() == r.reason) {
			return f.Names.Pod(i)
		}
	}
	return ""
}

// CARestarting names the pod of a member restarting in place for a CA rotation ("" none).
func CARestarting(f *facts.Facts) string { return restarting(f, caRestart) }

// PeerMoving names the pod of a member restarting in place to move its peer URL ("" none).
func PeerMoving(f *facts.Facts) string { return restarting(f, peerMove) }

// RestartingInPlace says which member's etcd restarts in place now as a wait ("" none): no other
// disruptive step starts beside it.
func RestartingInPlace(f *facts.Facts) string {
	for _, r := range []inPlaceRestart{caRestart, peerMove} {
		if who := restarting(f, r); who != "" {
			return who + " " + r.what
		}
	}
	return ""
}

// RestartedForCA: m is the member the rotation lets restart now (restart: this answer's; or the last
// one's) and its agent still holds a fresh Lease: its etcd being down is the step itself, not a
// degradation. A member whose agent stops reporting is degraded as any other.
func RestartedForCA(f *facts.Facts, restart int, m *facts.Member) bool {
	lv := f.Reporting(m)
	return lv != nil && (m.Ordinal == restart || caRestart.pending(m, lv) || lv.Report.Reason() == caRestart.reason)
}

// SwitchedPeer: m's etcd is down because its agent moves its peer URL now (it says so: etcd runs until
// the member list has changed, so a member merely asked that is down is down for another reason).
func SwitchedPeer(f *facts.Facts, m *facts.Member) bool {
	lv := f.Reporting(m)
	return lv != nil && lv.Report.Reason() == peerMove.reason
}
