package sync

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/etcdhook/etcdhook/api"
)

// pdb follows docs/design/10-status.md §10.3: a quorum budget from three members on, computed on the larger of the current
// voters and the target so that a scale step never weakens it; maxUnavailable 1 below three.
func (p *plan) pdb() *policyv1.PodDisruptionBudget {
	n := p.f.names
	size := p.target()
	if voters, _ := p.f.voters(); voters > size {
		size = voters
	}
	if p.f.unionVoters > size {
		size = p.f.unionVoters
	}
	spec := policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: n.Labels()}}
	if p.target() >= 3 {
		spec.MinAvailable = ptr(intstr.FromInt32(int32(api.Quorum(size))))
	} else {
		spec.MaxUnavailable = ptr(intstr.FromInt32(1))
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: p.meta(n.PDB(), api.ComponentEtcd),
		Spec:       spec,
	}
}
