package steps

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// CA rotation (docs/design/14-tls.md §14.6), the hook's half. The hook never sees the CA Secret: it decides
// each step from what the agents report of it (etcd.io/tls-ca-secret: the CA that signs and the one
// replacing it, with their rotation marks), of the CAs their etcd trusts (etcd.io/tls-cas, read at
// etcd's start) and of the CA that signed the certificate they serve (etcd.io/tls-issuer). Every step
// is therefore derived from observed facts, never recorded:
//
//   - trust: the Secret has no new CA yet: the agents make it (one wins, resourceVersion-checked). Then
//     each member's etcd restarts in place, one at a time and only with every member healthy, to trust
//     both CAs (etcd.io/ca-restart names the set on that member's Lease alone).
//   - sign: every member trusts both: the agents reissue their certificates and the client Secret from
//     the new CA, without a restart.
//   - drop: every member serves a certificate of the new CA: an agent makes it the Secret's only CA, and
//     each member restarts again, one at a time, to trust it alone.
//
// Whatever the hook answers, the CA that signs is one every running member trusts: an agent signs with
// the new CA only when asked (sign, drop) and only when its own etcd trusts it, and members that never
// restarted keep trusting the old one. A member that is down blocks the next step rather than being
// skipped.

// CARotationState is the decision of one sync (Decision.CARot).
type CARotationState struct {
	Intent api.CARotationIntent // what every member Lease asks (zero: nothing)
	// Restart: the ordinal whose etcd may restart now (-1 none) into trust (etcd.io/ca-restart).
	Restart int
	Trust   string
	Status  *api.CARotation
	Active  bool // a rotation is in progress (not done)
}

// RotateCAInput is what RotateCA reads of the decisions before it.
type RotateCAInput struct {
	// HasSpec, Spec: the spec rendered.
	HasSpec bool
	Spec    api.ClusterSpec
	// TLSSwitchActive: a switch of spec.security.tls.enabled is under way (no rotation starts in one).
	TLSSwitchActive bool
	// Holds: what holds a member's restart.
	Holds RestartHolds
}

// CARotationDecision is the CA rotation's part of the decision.
type CARotationDecision struct {
	// State: the step and the restart (Decision.CARot).
	State CARotationState
	// Waiting: what the rotation waits for, in order (added to Decision.Waiting).
	Waiting Waits
	// Distrusted: a rotation request ignored (added to Decision.Distrusted).
	Distrusted []string
}

// rotateRequest is the etcd.io/rotate-ca value and its mark ("" without one).
func rotateRequest(f *facts.Facts) (string, string) {
	v := strings.TrimSpace(f.Parent.Annotations[api.AnnRotateCA])
	if v == "" {
		return "", ""
	}
	return v, api.RenewalMark(v)
}

// RotateCA finds the step the rotation is at and which member, if any, restarts now.
func RotateCA(f *facts.Facts, in RotateCAInput) (d CARotationDecision) {
	st := CARotationState{Restart: -1}
	defer func() { d.State = st }()
	if !in.HasSpec || !in.Spec.Security.TLS.BuiltInNeeded() || in.TLSSwitchActive {
		return d // (a TLS switch waits for a rotation to finish, chooseSpec, and no rotation starts in one)
	}
	request, mark := rotateRequest(f)
	if tls := in.Spec.Security.TLS; tls.Peer.SecretName != "" || tls.Client.SecretName != "" {
		// One plane on the built-in CA, the other on the user's Secret: the members' reports mix the two
		// planes' CAs, and the user's CA is its issuer's to rotate (docs/design/14-tls.md §14.8).
		if mark != "" {
			d.Distrusted = append(d.Distrusted, fmt.Sprintf("annotation %s=%q: the built-in CA is rotated only when both planes use it (a plane here is on the user's Secret): ignored", api.AnnRotateCA, request))
		}
		return d
	}
	var reports []CAReport
	secrets := map[string]api.CASecretState{}
	missing := 0
	for _, i := range slices.Sorted(maps.Keys(f.Truth.Primary)) {
		m, lv := f.Truth.Primary[i], f.Leases[i]
		if lv == nil || !lv.Fresh || lv.Report.MemberID != m.ID {
			missing++
			continue
		}
		r := lv.Report
		reports = append(reports, CAReport{Ordinal: i, ID: m.ID, Trusts: r.TLSCAs, Issuer: r.TLSIssuer})
		if s, ok := api.ParseCASecretState(r.TLSCASecret); ok && s.Current != "" {
			secrets[s.String()] = s
		}
	}
	if len(secrets) != 1 {
		// Reports that disagree on the Secret (an agent has not read it since its last change): the step
		// and the restart last asked stay as they are for a look, rather than being withdrawn.
		if held := observedCARotation(f); held.Intent.Mark != "" {
			held.Status = &api.CARotation{Request: request, Phase: caStatusPhase(held.Intent.Phase), Members: int32(len(f.Truth.Primary)),
				Waiting: "every member to report the same CA Secret (etcd.io/tls-ca-secret)"}
			d.Waiting = d.Waiting.Add(Wait{Kind: CARotation, Detail: "every member to report the same CA Secret"})
			st = held
			return d
		}
		// Nothing to go on (no fresh report, or agents that do not report the Secret yet): nothing asked,
		// and no progress claimed.
		return d
	}
	var sec api.CASecretState
	for _, s := range secrets {
		sec = s
	}
	trust := sec.Trust()
	rot := api.CARotationIntent{}
	newCA := ""
	switch {
	case sec.Next != "":
		rot.Mark, rot.Carry, newCA = sec.NextMark, sec.NextCarry, sec.Next
		all, issued := true, true
		for _, r := range reports {
			all = all && r.trustsCA(sec.Next) && r.trustsCA(sec.Current)
			issued = issued && r.Issuer == sec.Next
		}
		switch {
		case !all:
			rot.Phase = api.CAPhaseTrust
		case !issued:
			rot.Phase = api.CAPhaseSign
		default:
			rot.Phase = api.CAPhaseDrop
		}
		// A member that does not report cannot confirm a step: the rotation goes no further than the
		// step last asked (going back would have the others reissue from the old CA for nothing).
		if was := observedCAPhase(f, rot.Mark); missing > 0 && caPhaseRank(was) < caPhaseRank(rot.Phase) {
			rot.Phase = was
		}
	case mark != "" && !sec.Serves(mark):
		rot = api.CARotationIntent{Mark: mark, Phase: api.CAPhaseTrust}
	default:
		// The last rotation's end: members still trusting the old CA beside the new one restart.
		if sec.CurrentMark != "" {
			for _, r := range reports {
				if r.Trusts != sec.Current && r.trustsCA(sec.Current) {
					rot = api.CARotationIntent{Mark: sec.CurrentMark, Phase: api.CAPhaseDrop, Carry: sec.CurrentCarry}
					break
				}
			}
		}
		newCA = sec.Current
		if rot.Mark == "" && (mark == "" || sec.Serves(mark)) && missing == 0 && caDue(f, in.Spec, reports, sec) {
			// The new CA carries the request left in place, which then still reads as served.
			rot = api.CARotationIntent{Mark: api.RenewalMark("auto " + sec.Current), Phase: api.CAPhaseTrust, Carry: mark}
			request = "auto"
		}
	}
	if rot.Mark == "" {
		if sec.Serves(mark) {
			st.Status = &api.CARotation{Request: request, Phase: api.CARotationDone, Members: int32(len(f.Truth.Primary))}
			st.Status.Trusting, st.Status.Issued = countCA(reports, sec.Current)
		}
		return d
	}
	switch {
	case request == "auto" || mark == rot.Mark:
	case rot.Carry != "" && rot.Carry == mark, rot.Mark == api.RenewalMark("auto "+sec.Current):
		request = "auto" // an automatic rotation under a request left in place
	default:
		request = "(an earlier request, finished first)"
	}
	st.Intent, st.Active = rot, true
	st.Status = &api.CARotation{Request: request, Phase: caStatusPhase(rot.Phase), Members: int32(len(f.Truth.Primary))}
	if newCA != "" {
		st.Status.Trusting, st.Status.Issued = countCA(reports, newCA)
	}
	// Who restarts: in the trust step (once the new CA is in the Secret) every member not trusting both;
	// at the end, every member trusting more than the new CA.
	var todo []CAReport
	if newCA != "" && (rot.Phase == api.CAPhaseTrust || (rot.Phase == api.CAPhaseDrop && sec.Next == "")) {
		for _, r := range reports {
			if r.Trusts != trust {
				todo = append(todo, r) // also one that trusts neither (started before a step, then waited)
			}
		}
	}
	waiting := ""
	switch {
	case missing > 0:
		waiting = fmt.Sprintf("%d member(s) to report before the next step", missing)
	case newCA == "":
		waiting = "an agent to make the new CA in the CA Secret"
	case rot.Phase == api.CAPhaseSign:
		waiting = "every member to serve a certificate of the new CA"
	case rot.Phase == api.CAPhaseDrop && sec.Next != "":
		waiting = "an agent to make the new CA the Secret's only one"
	}
	// A member whose agent says it is stopping etcd for a restart holds the turn, whatever the Lease asks
	// (the answer that allowed it may be lost to a stale cache).
	for _, r := range todo {
		if lv := f.Leases[r.Ordinal]; lv.Report.Reason() == api.ReasonRestartingForCA {
			st.Trust, st.Restart = trust, r.Ordinal
			break
		}
	}
	if len(todo) > 0 && st.Restart < 0 {
		st.Trust = trust
		st.Restart, waiting = RestartTurn(f, in.Holds, todo, func(lv *facts.Lease) bool { return lv.CARestart == trust }, true)
	}
	if st.Restart >= 0 {
		st.Status.Restarting = f.Names.Pod(st.Restart)
		waiting = fmt.Sprintf("%s to restart trusting %s", f.Names.Pod(st.Restart), shortList(trust))
	}
	st.Status.Waiting = waiting
	if waiting != "" {
		d.Waiting = d.Waiting.Add(Wait{Kind: CARotation, Detail: waiting})
	}
	return d
}

// observedCARotation is what the member Leases asked last: the step, and the restart on the one member
// that has it (zero when none).
func observedCARotation(f *facts.Facts) CARotationState {
	st := CARotationState{Restart: -1}
	// The mark most Leases ask for (a Lease left with a finished rotation's step must not win), then
	// the furthest step asked for it.
	count := map[string]int{}
	for _, lv := range f.SortedLeases() {
		if r := lv.CARotation; r.Mark != "" {
			count[r.Mark]++
		}
	}
	mark := ""
	for _, m := range slices.Sorted(maps.Keys(count)) {
		if mark == "" || count[m] > count[mark] {
			mark = m
		}
	}
	for _, lv := range f.SortedLeases() {
		r := lv.CARotation
		if r.Mark != mark || mark == "" {
			continue
		}
		if caPhaseRank(r.Phase) > caPhaseRank(st.Intent.Phase) {
			st.Intent = r
		}
		if lv.CARestart != "" && st.Restart < 0 {
			st.Restart, st.Trust = lv.Ordinal, lv.CARestart
		}
	}
	st.Active = st.Intent.Mark != ""
	return st
}

func caStatusPhase(phase string) string {
	return map[string]string{api.CAPhaseTrust: api.CARotationAddingCA, api.CAPhaseSign: api.CARotationReissuing, api.CAPhaseDrop: api.CARotationDroppingCA}[phase]
}

// observedCAPhase is the step of rotation mark the member Leases asked last (trust when none did).
func observedCAPhase(f *facts.Facts, mark string) string {
	best := api.CAPhaseTrust
	for _, lv := range f.SortedLeases() {
		if r := lv.CARotation; r.Mark == mark && caPhaseRank(r.Phase) > caPhaseRank(best) {
			best = r.Phase
		}
	}
	return best
}

func caPhaseRank(phase string) int {
	return map[string]int{api.CAPhaseTrust: 1, api.CAPhaseSign: 2, api.CAPhaseDrop: 3}[phase]
}

// caDue: the CA that signs has passed 2/3 of its lifetime (by the spec's caDuration) and every member
// trusts it alone; the rotation then starts by itself (Request "auto").
func caDue(f *facts.Facts, spec api.ClusterSpec, reports []CAReport, sec api.CASecretState) bool {
	if len(reports) == 0 || spec.Security.TLS.BuiltIn.CADuration == nil {
		return false
	}
	var notAfter time.Time
	for _, r := range reports {
		if r.Trusts != sec.Current {
			return false
		}
		lv := f.Leases[r.Ordinal]
		t, err := time.Parse(time.RFC3339, lv.Report.TLSCANotAfter)
		if err != nil {
			return false
		}
		if notAfter.IsZero() || t.Before(notAfter) {
			notAfter = t
		}
	}
	life := spec.Security.TLS.BuiltIn.CADuration.Duration
	return !f.Now.Before(notAfter.Add(-life / 3))
}

func countCA(reports []CAReport, fp string) (trusting, issued int32) {
	for _, r := range reports {
		if r.trustsCA(fp) {
			trusting++
		}
		if r.Issuer == fp {
			issued++
		}
	}
	return trusting, issued
}

// shortList shortens a list of fingerprints for messages.
func shortList(fps string) string {
	parts := strings.Split(fps, ",")
	for i, fp := range parts {
		if len(fp) > 16 {
			parts[i] = fp[:16]
		}
	}
	return strings.Join(parts, ",")
}

// RestartHolds is what holds a restart in place (RestartTurn) of the decisions before it.
type RestartHolds struct {
	Paused, QuorumLost bool
	Busy               string
	Rolling            bool
	// PendingSpec: a valid new spec waits; TLSWaitsForCA: it is a TLS switch waiting for the CA
	// rotation (which it must not hold).
	PendingSpec, TLSWaitsForCA bool
	// Target: the latched size.
	Target int
}

// RestartTurn picks the member of todo whose etcd restarts in place now (a CA rotation's restart, a TLS
// switch's peer URL move): the one already asked, until it is no longer in todo (whatever its health:
// it is restarting); otherwise, with every member healthy, no other step in flight and quorum to spare,
// followers by ordinal, the leader last. It says why none, when none.
// unhealthyFirst: a member that is not healthy goes first, without the checks (a CA restart: one trusting
// neither CA cannot talk to its peers until it restarts). A peer URL move needs its member healthy.
func RestartTurn(f *facts.Facts, h RestartHolds, todo []CAReport, asked func(*facts.Lease) bool, unhealthyFirst bool) (int, string) {
	for _, r := range todo {
		if lv := f.Leases[r.Ordinal]; lv != nil && asked(lv) {
			return r.Ordinal, ""
		}
	}
	switch {
	case h.Paused:
		return -1, "spec.paused to be cleared before restarting a member"
	case !f.Bootstrapped || h.QuorumLost || f.SplitBrain:
		return -1, "a healthy quorum before restarting a member"
	case h.Busy != "":
		return -1, "the membership change in flight (" + h.Busy + ") before restarting a member"
	case h.Rolling:
		return -1, "the rolling update to finish before restarting a member"
	case h.PendingSpec && !h.TLSWaitsForCA:
		// (A TLS switch waiting for the CA rotation to finish must not hold the rotation.)
		return -1, "the waiting spec change to be adopted before restarting a member"
	}
	if who := Defragmenting(f); who != "" {
		return -1, who + " to finish defragmenting before restarting a member"
	}
	// A member that is not healthy first (one trusting neither CA cannot talk to its peers): restarting
	// it costs nothing, and waiting for it to be healthy would wait forever.
	for _, r := range todo {
		if m := f.Truth.Primary[r.Ordinal]; m != nil && !m.Healthy && unhealthyFirst {
			return r.Ordinal, ""
		}
	}
	for _, m := range f.Truth.Members {
		if !m.Healthy {
			return -1, "member " + facts.MemberName(f, m) + " to be healthy before restarting a member"
		}
	}
	all, healthy := f.Truth.Voters()
	small := h.Target <= 2 && all == healthy
	if healthy-1 < api.Quorum(all) && !small {
		return -1, fmt.Sprintf("quorum to allow restarting a member (%d of %d voters healthy)", healthy, all)
	}
	var leader []CAReport
	for _, r := range todo {
		if r.ID == f.Truth.LeaderID {
			leader = append(leader, r)
			continue
		}
		return r.Ordinal, ""
	}
	return leader[0].Ordinal, ""
}

// CAReport is one member's fresh report, for the rotation.
type CAReport struct {
	Ordinal int
	ID      string
	Trusts  string // etcd.io/tls-cas
	Issuer  string
}

func (c CAReport) trustsCA(fp string) bool { return slices.Contains(strings.Split(c.Trusts, ","), fp) }
