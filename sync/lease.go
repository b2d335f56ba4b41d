package sync

import (
	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// leaseObjects render the hook's half of each member Lease: metadata only, so that Metacontroller's
// merge never touches the agent's half (spec and the report annotations).
func (p *plan) leaseObjects() []*coordv1.Lease {
	n := p.f.names
	var out []*coordv1.Lease
	for _, i := range sortedKeys(p.leases) {
		lp := p.leases[i]
		ann := map[string]string{api.AnnIntent: lp.intent, api.AnnIntentSince: lp.intentSince}
		if lp.joinPermitted != "" {
			ann[api.AnnJoinPermitted] = lp.joinPermitted
			ann[api.AnnJoinDeadline] = lp.joinDeadline
		}
		if lp.seed {
			ann[api.AnnBootstrap] = api.BootstrapSeed
		}
		if lp.defrag != "" {
			ann[api.AnnDefrag] = lp.defrag
		}
		if mark := p.renewalMark(); mark != "" {
			ann[api.AnnRenewal] = mark
		}
		if lp.caRotation != "" {
			ann[api.AnnCARotation] = lp.caRotation
		}
		if lp.caRestart != "" {
			ann[api.AnnCARestart] = lp.caRestart
		}
		if lp.peerScheme != "" {
			ann[api.AnnPeerScheme] = lp.peerScheme
		}
		m := p.meta(n.Lease(i), api.ComponentEtcd)
		m.Annotations = ann
		out = append(out, &coordv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}, ObjectMeta: m})
	}
	return out
}
