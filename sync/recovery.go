package sync

import (
	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// decideRecovery plans (steps.Recovery) and, when the mode or etcd.io/recover-apply allows, carries out
// the recovery, writing its intents. Called with the quorum lost (no fresh report of a healthy voter).
func (p *plan) decideRecovery() {
	st := steps.Recovery(p.f, steps.RecoveryInput{HasSpec: p.HasSpec, Spec: p.Spec, Paused: p.Paused})
	p.Recovery = st
	if st.Status == nil || st.Token == "" {
		return
	}
	for i, id := range st.Fence {
		p.leases.Lease(i).Recover = api.RecoverIntent{Token: st.Token, Role: api.RecoverFence, MemberID: id}
	}
	if st.Survivor >= 0 {
		p.leases.Lease(st.Survivor).Recover = api.RecoverIntent{Token: st.Token, Role: api.RecoverSurvivor, MemberID: st.SurvivorID}
	}
}
