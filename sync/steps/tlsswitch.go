package steps

import (
	"fmt"
	"strings"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
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
func holdTLSSwitch(f *facts.Facts) string {
	return strings.TrimSpace(f.Parent.Annotations[api.AnnHoldTLSSwitch])
}

// TLSModeOf picks the template's TLS from the spec rendered and the members' peer URLs (before the
// template is rendered); PeerSwitch decides the rest once the roll is evaluated.
func TLSModeOf(f *facts.Facts, spec api.ClusterSpec) TLSSwitchState {
	target := spec.Security.TLS.TLSOn()
	to := api.Scheme(target)
	st := TLSSwitchState{Mode: TLSPlain, Turn: -1}
	if target {
		st.Mode = TLSOn
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
		st.Mode, st.From = TLSTransition, obsFrom
	case left > 0:
		st.Mode, st.From = TLSTransition, api.Scheme(!target)
	case obsPhase == "transition" && obsFrom != to && holdTLSSwitch(f) != "":
		// Every peer URL moved, and the user holds the final roll: both schemes stay served.
		st.Mode, st.From = TLSTransition, obsFrom
	case obsPhase != "" && obsFrom != to:
		st.Final, st.From = true, obsFrom // the roll decides later whether it is over (PeerSwitch)
	}
	return st
}

// RenderTLS is the TLS the template and the agent configuration are rendered from: the spec's, or in
// the transition the spec's settings with TLS on (either way the switch goes).
func (s TLSSwitchState) RenderTLS(t api.TLSSpec) api.TLSSpec {
	if on := s.Mode != TLSPlain; on != t.TLSOn() {
		return t.As(on)
	}
	return t
}

// ClientHTTPS says whether every member serves https on its client port: the scheme of the Jobs' and
// agents' endpoints. In the transition it is the scheme being left (the pods not yet rolled serve only
// that one); in the final roll the new one (the pods not yet rolled serve both).
func (s TLSSwitchState) ClientHTTPS() bool {
	if s.Mode == TLSTransition {
		return s.From == "https"
	}
	return s.Mode == TLSOn
}

// AgentKeepsTLS: the agent configuration carries the TLS settings, so that a pod of the transition
// template (started, or restarted in place, before it is rolled) can read them.
func (s TLSSwitchState) AgentKeepsTLS() bool { return s.Mode != TLSPlain || s.Final }

// PeerSwitchInput is what PeerSwitch reads of the decisions before it.
type PeerSwitchInput struct {
	// Spec: the spec rendered; State: TLSModeOf's.
	Spec  api.ClusterSpec
	State TLSSwitchState
	// Rolled: the roll was evaluated in this sync (paused or split it was not, and the final roll is not
	// over for it); Rolling: a roll is under way.
	Rolled, Rolling bool
	// Holds: what holds a member's restart.
	Holds RestartHolds
}

// PeerSwitchDecision is the switch's part of the decision once the roll is evaluated.
type PeerSwitchDecision struct {
	// State: where the switch stands (Decision.TLSSw); its Turn, the ordinal whose Lease asks for the
	// peer scheme To now (-1 none).
	State TLSSwitchState
	To    string
	// Wait: what the switch waits for (zero: nothing).
	Wait Wait
}

// PeerSwitch decides the switch's step after the roll: whether the final roll is over, and which one
// member moves its peer URL now.
func PeerSwitch(f *facts.Facts, in PeerSwitchInput) (d PeerSwitchDecision) {
	st := in.State
	if st.Final && in.Rolled && !in.Rolling {
		st.Final = false // every pod runs the final template: the switch is over
	}
	to := api.Scheme(in.Spec.Security.TLS.TLSOn())
	d = PeerSwitchDecision{To: to}
	defer func() { d.State = st }()
	if !st.Active() {
		return d
	}
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
		return d
	case in.Rolling:
		status.Phase = api.TLSSwitchRollingIn
		status.Waiting = "the rolling update to the transition template (both schemes served)"
		return d
	}
	status.Phase = api.TLSSwitchPeers
	var todo []CAReport
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
		todo = append(todo, CAReport{Ordinal: m.Ordinal, ID: m.ID})
	}
	waiting := ""
	for _, r := range todo {
		if f.Leases[r.Ordinal].Report.Reason() == api.ReasonSwitchingPeerScheme {
			st.Turn = r.Ordinal // its agent is stopping etcd for the switch, whatever the Lease asks
			break
		}
	}
	if st.Turn < 0 && len(todo) > 0 {
		st.Turn, waiting = RestartTurn(f, in.Holds, todo, func(lv *facts.Lease) bool { return lv.PeerScheme == to }, false)
	}
	switch {
	case st.Turn >= 0:
		status.Switching = f.Names.Pod(st.Turn)
		waiting = fmt.Sprintf("%s to move its peer URL to %s", f.Names.Pod(st.Turn), to)
	case missing > 0 && waiting == "":
		waiting = fmt.Sprintf("%d member(s) whose peer URL is still %s to report", missing, st.From)
	case len(todo) == 0 && holdTLSSwitch(f) != "":
		waiting = fmt.Sprintf("annotation %s to be removed before the final roll (both schemes are served until then)", api.AnnHoldTLSSwitch)
	}
	status.Waiting = waiting
	if waiting != "" {
		d.Wait = Wait{Kind: TLSSwitch, Detail: waiting}
	}
	return d
}
