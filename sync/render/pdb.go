package render

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/etcdhook/etcdhook/api"
)

// PDB follows docs/design/10-status.md §10.3: a quorum budget from three members on, computed on the larger of the current
// voters and the target (PDBSize, decided by the decision) so that a scale step never weakens it; maxUnavailable 1 below three.
func PDB(d *Desired) *policyv1.PodDisruptionBudget {
	n := d.Names
	spec := policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: n.Labels()}}
	if target := d.Spec.Size; target != nil && *target >= 3 {
		spec.MinAvailable = ptr(intstr.FromInt32(int32(api.Quorum(d.PDBSize))))
	} else {
		spec.MaxUnavailable = ptr(intstr.FromInt32(1))
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: meta(n, n.PDB(), api.ComponentEtcd),
		Spec:       spec,
	}
}
