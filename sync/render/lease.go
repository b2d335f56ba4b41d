package render

import (
	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// Leases render the hook's half of each member Lease: metadata only, so that Metacontroller's merge
// never touches the agent's half (spec and the report annotations).
func Leases(d *Desired) []*coordv1.Lease {
	out := make([]*coordv1.Lease, 0, len(d.Leases))
	for _, l := range d.Leases {
		m := meta(d.Names, d.Names.Lease(l.Ordinal), api.ComponentEtcd)
		m.Annotations = l.Intent.Annotations()
		out = append(out, &coordv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}, ObjectMeta: m})
	}
	return out
}
