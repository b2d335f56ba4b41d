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
		// (The window was checked or written by the decision: it parses.)
		join, _ := api.ParseJoinWindow(lp.joinPermitted, lp.joinDeadline)
		ann := api.Intent{Kind: lp.intent, Since: lp.intentSince, Seed: lp.seed, Join: join, Defrag: lp.defrag,
			Renewal: p.renewalMark(), CARotation: lp.caRotation, CARestart: lp.caRestart, PeerScheme: lp.peerScheme}.Annotations()
		m := p.meta(n.Lease(i), api.ComponentEtcd)
		m.Annotations = ann
		out = append(out, &coordv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}, ObjectMeta: m})
	}
	return out
}
