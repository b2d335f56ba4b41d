package steps

import (
	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// SpecInput is what ChooseSpec reads of the decisions before it: the membership step in flight ("" none),
// judged from the observed objects and the Lease intents as normalised.
type SpecInput struct {
	InFlight string
}

// SpecState is the spec in force and why (Decision's).
type SpecState struct {
	// HasSpec: there is a spec to render from; Spec: it.
	HasSpec bool
	Spec    api.ClusterSpec
	// Problems, CertProblems: the candidate's (facts.Candidate): why the user's spec is not (yet)
	// applied, what is wrong with its TLS Secrets; CertBlocked: a valid candidate is not adopted because
	// of them.
	Problems     []api.Problem
	CertProblems []facts.CertProblem
	CertBlocked  bool
	// Paused: spec.paused.
	Paused bool
	// PendingSpec: a valid new spec waits (for the step in flight, the CA rotation, a healthy quorum).
	PendingSpec bool
}

// SpecChoice is ChooseSpec's part of the decision.
type SpecChoice struct {
	SpecState
	// TLSWaitsForCA: the new spec switches TLS and waits for a CA rotation in progress (whose restarts go
	// on meanwhile).
	TLSWaitsForCA bool
	// Wait: what the new spec waits for (zero: nothing said).
	Wait Wait
}

// ChooseSpec latches the spec: a valid candidate (facts.Candidate) is adopted unless a membership step
// is in flight; an invalid one leaves the last applied spec (read from the ConfigMap, not from the
// request) in force.
func ChooseSpec(f *facts.Facts, in SpecInput) SpecChoice {
	cand := f.Candidate
	c := SpecChoice{SpecState: SpecState{Problems: cand.Problems, CertProblems: cand.CertProblems, Paused: f.Parent.Spec.Paused}}
	valid := cand.Valid()
	// The user's TLS Secrets (docs/design/14-tls.md §14.5): while one is unusable no spec change is adopted
	// (a new or restarted pod could not start: the new spec may add members or roll them), and the
	// roll holds (roll.go); a Secret that goes bad under an unchanged spec changes nothing rendered
	// (the running members keep their files).
	if valid && len(c.CertProblems) > 0 && (f.Applied == nil || !api.SpecEqual(*f.Applied, cand.Spec)) {
		valid, c.CertBlocked = false, true
	}
	adopt := func(s api.ClusterSpec, pending bool) { c.Spec, c.HasSpec, c.PendingSpec = s, true, pending }
	switching := f.Applied != nil && f.Applied.Security.TLS.TLSOn() != cand.Spec.Security.TLS.TLSOn()
	if c.Paused {
		// Nothing new is adopted while paused: the recorded spec stays in force (a new cluster gets
		// nothing until it is unpaused).
		if f.Applied != nil {
			adopt(*f.Applied, valid && !api.SpecEqual(*f.Applied, cand.Spec))
		}
		return c
	}
	switch {
	case f.Applied == nil && valid && f.Recorded != nil && in.InFlight != "":
		// A record that is not rendered from, and a step in flight: the new spec waits as it would
		// behind a valid record, and the children stay as they are meanwhile.
		c.PendingSpec = true
		c.Wait = Wait{Kind: Spec, Subject: in.InFlight, Detail: "to finish before the spec is adopted (the recorded spec fails validation: nothing is rendered from it)"}
	case f.Applied == nil && valid:
		adopt(cand.Spec, false)
	case f.Applied == nil:
		// No spec to render from. Existing children are answered unchanged (echoLastApplied) and
		// status says why: a 4xx would freeze status and every repair along with it.
	case valid && !api.SpecEqual(*f.Applied, cand.Spec) && in.InFlight != "":
		adopt(*f.Applied, true)
	case valid && switching && f.CARotationUnderway():
		// A CA rotation finishes first: its restarts and a switch's peer URL moves are one kind of step,
		// and the switch renders the certificates the rotation is replacing.
		adopt(*f.Applied, true)
		c.TLSWaitsForCA = true
		c.Wait = Wait{Kind: Spec, Detail: "the CA rotation to finish before TLS is switched " + OnOff(cand.Spec.Security.TLS.TLSOn())}
	case valid && switching && !f.Truth.Known():
		// Without a member list the template's TLS cannot be derived (tlsswitch.go): a switch adopted now
		// would render the final template over members whose peer URLs are on the other scheme.
		adopt(*f.Applied, true)
		c.Wait = Wait{Kind: Spec, Detail: "a healthy quorum before TLS is switched " + OnOff(cand.Spec.Security.TLS.TLSOn())}
	case valid:
		adopt(cand.Spec, false)
	default:
		adopt(*f.Applied, false)
	}
	return c
}

// OnOff says a TLS switch's direction.
func OnOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}
