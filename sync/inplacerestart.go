package sync

import (
	"fmt"
	"slices"
	"strings"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// Restarting one member's etcd in place (its pod stays): a CA rotation's restart to trust a new CA set,
// and a TLS switch's peer URL move. Both follow one machine: one member at a time, whose turn restartTurn
// decides; the Lease asks it; until its agent reports the step done (or while it says it is at it), the
// member is "restarting" (no other disruptive step starts beside it) and its etcd being down is the step
// itself, not a degradation.

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

// restartTurn picks the member of todo whose etcd restarts in place now (a CA rotation's restart, a TLS
// switch's peer URL move): the one already asked, until it is no longer in todo (whatever its health:
// it is restarting); otherwise, with every member healthy, no other step in flight and quorum to spare,
// followers by ordinal, the leader last. It says why none, when none.
// unhealthyFirst: a member that is not healthy goes first, without the checks (a CA restart: one trusting
// neither CA cannot talk to its peers until it restarts). A peer URL move needs its member healthy.
func (p *plan) restartTurn(todo []caReport, asked func(*facts.Lease) bool, unhealthyFirst bool) (int, string) {
	f := p.f
	for _, r := range todo {
		if lv := f.Leases[r.i]; lv != nil && asked(lv) {
			return r.i, ""
		}
	}
	switch {
	case p.Paused:
		return -1, "spec.paused to be cleared before restarting a member"
	case !f.Bootstrapped || p.QuorumLost || f.SplitBrain:
		return -1, "a healthy quorum before restarting a member"
	case p.Busy != "":
		return -1, "the membership change in flight (" + p.Busy + ") before restarting a member"
	case p.Rolling:
		return -1, "the rolling update to finish before restarting a member"
	case p.PendingSpec && !p.tlsWaitsForCA:
		// (A TLS switch waiting for the CA rotation to finish must not hold the rotation.)
		return -1, "the waiting spec change to be adopted before restarting a member"
	}
	if who := steps.Defragmenting(p.f); who != "" {
		return -1, who + " to finish defragmenting before restarting a member"
	}
	// A member that is not healthy first (one trusting neither CA cannot talk to its peers): restarting
	// it costs nothing, and waiting for it to be healthy would wait forever.
	for _, r := range todo {
		if m := f.Truth.Primary[r.i]; m != nil && !m.Healthy && unhealthyFirst {
			return r.i, ""
		}
	}
	for _, m := range f.Truth.Members {
		if !m.Healthy {
			return -1, "member " + facts.MemberName(f, m) + " to be healthy before restarting a member"
		}
	}
	all, healthy := f.Truth.Voters()
	small := p.Target() <= 2 && all == healthy
	if healthy-1 < api.Quorum(all) && !small {
		return -1, fmt.Sprintf("quorum to allow restarting a member (%d of %d voters healthy)", healthy, all)
	}
	var leader []caReport
	for _, r := range todo {
		if r.id == f.Truth.LeaderID {
			leader = append(leader, r)
			continue
		}
		return r.i, ""
	}
	return leader[0].i, ""
}

// caReport is one member's fresh report, for the rotation.
type caReport struct {
	i      int
	id     string
	trusts string // etcd.io/tls-cas
	issuer string
}

func (c caReport) trustsCA(fp string) bool { return slices.Contains(strings.Split(c.trusts, ","), fp) }
