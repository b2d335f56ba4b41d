package steps

import (
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// StorageSize is the size in force for member claims; false with emptyDir.
func StorageSize(spec api.ClusterSpec) (resource.Quantity, bool) {
	if spec.Storage.EmptyDir != nil || spec.Storage.Size == nil {
		return resource.Quantity{}, false
	}
	return *spec.Storage.Size, true
}

// ClaimsAtSize counts the member claims (ordinals below replicas, not being deleted) and those among
// them that ask for and have size.
func ClaimsAtSize(f *facts.Facts, replicas int32, size resource.Quantity) (atSize, claims int32) {
	for i := 0; i < int(replicas); i++ {
		pvc := f.PVCs[i]
		if pvc == nil || pvc.DeletionTimestamp != nil {
			continue
		}
		claims++
		if api.ClaimAtSize(pvc, size) {
			atSize++
		}
	}
	return atSize, claims
}

// ClaimBelow: ordinal i has a claim, not being deleted, that does not have the size (whatever cluster
// UID it carries: a claim adopted from a deleted cluster is a member's volume too).
func ClaimBelow(f *facts.Facts, i int, size resource.Quantity) bool {
	pvc := f.PVCs[i]
	return pvc != nil && pvc.DeletionTimestamp == nil && !api.ClaimAtSize(pvc, size)
}

// TemplateBelow: the observed StatefulSet's claim template asks for less than size.
func TemplateBelow(f *facts.Facts, size resource.Quantity) bool {
	if f.StatefulSet == nil {
		return false
	}
	q, ok := api.TemplateSize(f.StatefulSet.Spec.VolumeClaimTemplates)
	return ok && q.Cmp(size) < 0
}
