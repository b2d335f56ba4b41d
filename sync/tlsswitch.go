package sync

import (
	"fmt"
	"strings"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// Switching TLS on or off on a running cluster (docs/design/14-tls.md §14.8), the hook's half. etcd can serve
// both schemes on one client port, but a peer listener has one scheme, and each member dials a peer with
// the scheme of that peer's URL in the member list. So the switch goes:
//
//  1. a roll to the transition template: certificates on both planes, the client port serving http and
//     https, each member's peer listener on the scheme of its own peer URL in the member list;
//  2. one member at a time (the turn of a CA rotation's restart, §14.6): its agent updates its own peer
//     URL to the new scheme through its running etcd (member update), then restarts etcd in place;
//  3. once every peer URL has the new scheme (and no etcd.io/hold-tls-switch holds it), a roll to the
//     final template (TLS or plaintext only).
//
// Where the switch stands is derived from the member list (the peer URLs' schemes), never recorded:
// the spec says where it goes. Only when no member list is known does the StatefulSet's annotation
// (etcd.io/tls-switch, the hook's own) say which template the pods were last given.

// holdTLSSwitch is the etcd.io/hold-tls-switch value ("" none).
func (p *plan) holdTLSSwitch() string {
	return strings.TrimSpace(p.f.Parent.Annotations[api.AnnHoldTLSSwitch])
}

// decideTLSMode picks the template's TLS from the spec and the members' peer URLs (before the template
// is rendered).
func (p *plan) decideTLSMode() {
	f := p.f
	target := p.Spec.Security.TLS.TLSOn()
	to := api.Scheme(target)
	st := steps.TLSSwitchState{Mode: steps.TLSPlain, Turn: -1}
	if target {
		st.Mode = steps.TLSOn
	}
	observed := ""
	if f.StatefulSet != nil {
		observed = f.StatefulSet.Annotations[api.AnnTLSSwitch]
	}
	obsPhase, obsFrom, _ := strings.Cut(observed, " ")
	if obsFrom != "http" && obsFrom != "https" {
		obsPhase, obsFrom = "", "" // not as the hook writes it: read as absent
	}
	// Members of no ordinal (orphans, which the hook removes) are not counted: no agent moves them.
	left, counted := 0, 0
	for _, m := range f.Truth.Members {
		if m.Ordinal < 0 {
			continue
		}
		counted++
		if facts.PeerScheme(m.PeerURL) != to {
			left++
		}
	}
	switch {
	case counted == 0 && obsPhase == "transition":
		// No member list (no quorum, or not reported yet): the pods keep the template they were given.
		st.Mode, st.From = steps.TLSTransition, obsFrom
	case left > 0:
		st.Mode, st.From = steps.TLSTransition, api.Scheme(!target)
	case obsPhase == "transition" && obsFrom != to && p.holdTLSSwitch() != "":
		// Every peer URL moved, and the user holds the final roll: both schemes stay served.
		st.Mode, st.From = steps.TLSTransition, obsFrom
	case obsPhase != "" && obsFrom != to:
		st.Final, st.From = true, obsFrom // the roll decides later whether it is over (finishTLSSwitch)
	}
	p.TLSSw = st
}

// renderTLS is the TLS the template and the agent configuration are rendered from: the spec's, or in
// the transition the spec's settings with TLS on (either way the switch goes).
func (p *plan) renderTLS() api.TLSSpec {
	t := p.Spec.Security.TLS
	switch on := p.TLSSw.Mode != steps.TLSPlain; {
	case on == t.TLSOn():
		return t
	default:
		return t.As(on)
	}
}

// clientHTTPS says whether every member serves https on its client port: the scheme of the Jobs' and
// agents' endpoints. In the transition it is the scheme being left (the pods not yet rolled serve only
// that one); in the final roll the new one (the pods not yet rolled serve both).
func (p *plan) clientHTTPS() bool {
	if p.TLSSw.Mode == steps.TLSTransition {
		return p.TLSSw.From == "https"
	}
	return p.TLSSw.Mode == steps.TLSOn
}

// agentKeepsTLS: the agent configuration carries the TLS settings, so that a pod of the transition
// template (started, or restarted in place, before it is rolled) can read them.
func (p *plan) agentKeepsTLS() bool { return p.TLSSw.Mode != steps.TLSPlain || p.TLSSw.Final }

// askPeerSwitch decides the switch's step after the roll (rolled: the roll was evaluated in this sync;
// paused or split, it was not, and the final roll is not over for it), and writes the peer scheme on
// the Lease of the one member whose turn it is.
func (p *plan) askPeerSwitch(rolled bool) {
	st := &p.TLSSw
	f := p.f
	if st.Final && rolled && !p.Rolling {
		st.Final = false // every pod runs the final template: the switch is over
	}
	if !st.Active() {
		return
	}
	to := api.Scheme(p.Spec.Security.TLS.TLSOn())
	status := &api.TLSSwitch{To: to}
	st.Status = status
	for _, m := range f.Truth.Members {
		if m.Ordinal >= 0 {
			status.Members++
			if facts.PeerScheme(m.PeerURL) == to {
				status.Switched++
			}
		}
	}
	switch {
	case st.Final:
		status.Phase = api.TLSSwitchRollingOut
		status.Waiting = "the rolling update to the final template"
		return
	case p.Rolling:
		status.Phase = api.TLSSwitchRollingIn
		status.Waiting = "the rolling update to the transition template (both schemes served)"
		return
	}
	status.Phase = api.TLSSwitchPeers
	var todo []steps.CAReport
	missing := 0
	for _, m := range f.Truth.Members {
		if m.Ordinal < 0 || facts.PeerScheme(m.PeerURL) == to {
			continue
		}
		lv := f.Leases[m.Ordinal]
		if f.Truth.Primary[m.Ordinal] != m || lv == nil || !lv.Fresh || lv.Report.MemberID != m.ID {
			missing++
			continue
		}
		todo = append(todo, steps.CAReport{Ordinal: m.Ordinal, ID: m.ID})
	}
	waiting := ""
	for _, r := range todo {
		if f.Leases[r.Ordinal].Report.Reason() == api.ReasonSwitchingPeerScheme {
			st.Turn = r.Ordinal // its agent is stopping etcd for the switch, whatever the Lease asks
			break
		}
	}
	if st.Turn < 0 && len(todo) > 0 {
		st.Turn, waiting = steps.RestartTurn(f, p.restartHolds(), todo, func(lv *facts.Lease) bool { return lv.PeerScheme == to }, false)
	}
	switch {
	case st.Turn >= 0:
		status.Switching = f.Names.Pod(st.Turn)
		waiting = fmt.Sprintf("%s to move its peer URL to %s", f.Names.Pod(st.Turn), to)
		p.lease(st.Turn).PeerScheme = to
	case missing > 0 && waiting == "":
		waiting = fmt.Sprintf("%d member(s) whose peer URL is still %s to report", missing, st.From)
	case len(todo) == 0 && p.holdTLSSwitch() != "":
		waiting = fmt.Sprintf("annotation %s to be removed before the final roll (both schemes are served until then)", api.AnnHoldTLSSwitch)
	}
	status.Waiting = waiting
	if waiting != "" {
		p.wait(steps.TLSSwitch, "", "%s", waiting)
	}
}
