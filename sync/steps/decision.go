package steps

import (
	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// Decision is what one sync decided, as status reports it (render.Status): the parts the steps fill,
// and the few conclusions drawn once every step has run (the fields under "Concluded").
type Decision struct {
	// Names: the facts' names, with the client scheme every member serves now (TLSModeOf): every URL
	// the plan renders uses it.
	Names api.Names
	// Distrusted: inputs the decision ignored as impossible (hand edits), beside the facts' own, for
	// status (InputIgnored). The facts are never written to by the decision.
	Distrusted []string
	// SpecState: the spec in force and why (ChooseSpec); its Spec carries the raised quota and storage
	// (Space).
	SpecState
	Replicas int32

	// Busy names the membership change in flight ("" when none); BusyVolume: it only touches volumes:
	// deletes a removed member's, grows a member's claim or re-creates the StatefulSet for its claim
	// template (the cluster has its size). Growth: it grows volumes (volumes.go); Growing: the claim
	// whose growth Job this answer starts.
	Busy       string
	BusyVolume bool
	Growth     bool
	Growing    string
	// Waiting: what the hook waits for, in order.
	Waiting Waits
	// Stalled: a step past its deadline.
	Stalled string
	Rolling bool
	// QuorumLost: no voting member reports a healthy cluster (membership is frozen).
	QuorumLost bool

	// Space: where spec.maintenance.space stands (steps.Space).
	Space SpaceState
	// Recovery: the plan for a quorum that lost its data (steps.Recovery).
	Recovery RecoveryState
	// Auth: the auth config the agents apply (steps.Auth); nil without spec.auth.
	Auth *api.AuthConfig
	// Standby: a warm standby's applier, fence and promotion (steps.Standby).
	Standby StandbyPart
	// Defrag: the defragmentation pass due and the member asked (steps.Defrag).
	Defrag DefragState
	// CARot: the CA rotation's step and restart (steps.RotateCA).
	CARot CARotationState
	// TLSSw: where a switch of spec.security.tls.enabled stands (tlsswitch.go).
	TLSSw TLSSwitchState

	// Backup: the backup Lease's reports (BackupReports).
	Backup BackupReportsState

	// In-place restore (inplace.go): the record to write; Restoring while one runs; why it is stuck.
	InPlace        *facts.InPlaceRecord
	Restoring      bool
	InPlaceFailure string

	// Concluded once every step has run (plan.conclude), since each reads what several steps decided.
	Concluded
}

// Concluded are the decision's conclusions drawn from all its steps at once.
type Concluded struct {
	// ExpectedDown: the IDs of the members whose etcd being down is a step's own doing (a member
	// joining, one a roll step or a CA rotation restarts, one moving its peer URL): progress, not a
	// degradation.
	ExpectedDown map[string]bool
	// Defragmenting: the pod of a member on a defragmentation pass ("" none).
	Defragmenting string
	// InPlacePhase: the phase of the in-place restore record to write ("" none).
	InPlacePhase string
	// Echo: there is no spec to render from and children exist: the answer leaves them as they are.
	Echo bool
}

// Target is the latched size; 0 when there is no spec to render from.
func (d *Decision) Target() int { return TargetOf(d.Spec) }

// TargetOf is spec's size; 0 without one.
func TargetOf(spec api.ClusterSpec) int {
	if spec.Size == nil {
		return 0
	}
	return int(*spec.Size)
}

// FormedNow: every member of the target size is a healthy voter.
func (d *Decision) FormedNow(f *facts.Facts) bool {
	if !f.Bootstrapped || !d.HasSpec || len(f.Truth.Primary) < d.Target() {
		return false
	}
	for _, m := range f.Truth.Primary {
		if !m.Healthy || m.Learner {
			return false
		}
	}
	return true
}

// RenewalMark is what the member Leases ask for of the etcd.io/renew-certificates request ("" without
// one, or when no plane uses the built-in CA: a user's Secret is renewed by its issuer, cert-manager).
func (d *Decision) RenewalMark(f *facts.Facts) string {
	if v := RenewRequest(f); v != "" && d.HasSpec && d.Spec.Security.TLS.BuiltInNeeded() {
		return api.RenewalMark(v)
	}
	return ""
}
