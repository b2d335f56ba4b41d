package api

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ClaimAtSize: the claim asks for at least size and its volume has at least size. status.capacity is
// what the volume driver and the kubelet report once the volume and its file system have grown
// (docs/design/17-growing-volumes.md §17).
func ClaimAtSize(pvc *corev1.PersistentVolumeClaim, size resource.Quantity) bool {
	asked, has := pvc.Spec.Resources.Requests[corev1.ResourceStorage], pvc.Status.Capacity[corev1.ResourceStorage]
	return asked.Cmp(size) >= 0 && has.Cmp(size) >= 0
}

// TemplateSize is the storage a StatefulSet's member claim template ("data") asks for; false when
// there is none (emptyDir).
func TemplateSize(templates []corev1.PersistentVolumeClaim) (resource.Quantity, bool) {
	for _, t := range templates {
		if t.Name == "data" {
			q, ok := t.Spec.Resources.Requests[corev1.ResourceStorage]
			return q, ok
		}
	}
	return resource.Quantity{}, false
}
