package steps

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// Volume growth (docs/design/17-growing-volumes.md §17): spec.storage.size may grow. Each member's claim is grown by a Job,
// one member at a time and only while every member is healthy (a driver that grows file systems only
// offline needs the member restarted); then a Job deletes the StatefulSet with propagation Orphan,
// since its claim template is immutable, and the hook renders it afresh with the new size over the
// same pods, which it adopts without a restart (their template is unchanged).

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
// UID it carries: a claim adopted from a deleted cluster is a member's volume too, see GrowVolumes).
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

// VolumeStepInFlight names a growth step under way: a Job growing a claim or re-creating the
// StatefulSet, or the StatefulSet being deleted (Metacontroller leaves an object being deleted alone;
// once it is gone, the answer that renders it again is safe under any spec: see roll).
func VolumeStepInFlight(f *facts.Facts) string {
	for _, i := range slices.Sorted(maps.Keys(f.GrowJobs)) {
		if js := f.GrowJobs[i]; js[len(js)-1].State == facts.JobActive {
			return fmt.Sprintf("Job %s growing claim %s", js[len(js)-1].Job.Name, f.Names.PVC(i))
		}
	}
	if js := f.TemplateJobs; len(js) > 0 && js[len(js)-1].State == facts.JobActive {
		return fmt.Sprintf("Job %s re-creating StatefulSet %s for its claim template", js[len(js)-1].Job.Name, f.Names.StatefulSet())
	}
	if f.StatefulSet != nil && f.StatefulSet.DeletionTimestamp != nil && len(f.TemplateJobs) > 0 {
		return fmt.Sprintf("StatefulSet %s to be deleted (its pods and claims stay) and re-created", f.Names.StatefulSet())
	}
	return ""
}

// VolumesInput is what GrowVolumes reads of the decisions before it.
type VolumesInput struct {
	// Spec: the spec rendered; Replicas: the replicas so far; Hash: the pod template's hash.
	Spec     api.ClusterSpec
	Replicas int32
	Hash     string
	// PodHealthy: the roll's reading of a member pod's health, by ordinal.
	PodHealthy func(int) bool
	// RestartingInPlace: the member whose etcd restarts in place now, as a wait ("" none).
	RestartingInPlace string
	// Endpoints: the voters' client URLs a growth Job talks to.
	Endpoints string
}

// VolumesDecision is the growth's part of the decision: its Step, and the claim its Job grows ("" for
// the claim template's Job).
type VolumesDecision struct {
	Step
	Growing string
}

// GrowVolumes is reconcile's last step: the lowest member claim below the size is grown, then the
// claim template is brought to it. Acted: it started a Job or waits on something.
func GrowVolumes(f *facts.Facts, in VolumesInput) (d VolumesDecision) {
	size, ok := StorageSize(in.Spec)
	if !ok {
		return d
	}
	wait := func(subject, format string, args ...any) VolumesDecision {
		d.wait(Volume, subject, format, args...)
		return d
	}
	// A member that is down first: a full disk is the likeliest reason to grow, and a member whose disk is
	// full crash-loops; growing its claim costs no one's availability.
	below := -1
	for i := 0; i < int(in.Replicas); i++ {
		if !ClaimBelow(f, i, size) {
			continue
		}
		if below < 0 || (in.PodHealthy(below) && !in.PodHealthy(i)) {
			below = i
		}
	}
	if below >= 0 {
		if uid := f.PVCs[below].Labels[api.LabelClusterUID]; uid != f.ClusterUID {
			// The Job acts only on this cluster's claims (§8.10): an adopted one (adoptExistingData) is
			// grown by hand, and the template waits for it.
			return wait("", "claim %s carries EtcdCluster UID %q, not this cluster's (adopted data): grow it by hand to %s (kubectl patch pvc %s -p '{\"spec\":{\"resources\":{\"requests\":{\"storage\":\"%s\"}}}}')",
				f.Names.PVC(below), uid, size.String(), f.Names.PVC(below), size.String())
		}
		return growClaim(f, in, below, size)
	}
	if !TemplateBelow(f, size) {
		return d
	}
	// The template only once no pod is mid-roll: the StatefulSet made afresh adopts pods that all run
	// its one revision, so none restarts.
	st := f.StatefulSet.Status
	for _, i := range slices.Sorted(maps.Keys(f.Pods)) {
		if f.Pods[i].Labels["controller-revision-hash"] != st.UpdateRevision || st.CurrentRevision != st.UpdateRevision ||
			f.StatefulSet.Annotations[api.AnnTemplateHash] != in.Hash {
			return wait("", "every pod on one revision before StatefulSet %s is re-created for its claim template", f.Names.StatefulSet())
		}
	}
	attempt, why := NextAttempt(f, f.TemplateJobs)
	if why != "" {
		return wait("", "re-creating StatefulSet %s for its claim template: %s", f.Names.StatefulSet(), why)
	}
	job := Job{Kind: JobClaimTemplate, Attempt: attempt, Size: size, StatefulSetUID: string(f.StatefulSet.UID)}
	d.Job, d.Action = &job, fmt.Sprintf("Job %s re-creating StatefulSet %s for its claim template", job.Name(f.Names), f.Names.StatefulSet())
	return wait(d.Action, "")
}

// growClaim starts the next Job growing ordinal i's claim, when every other member is healthy (the Job
// may restart member i: for a driver that grows file systems only at mount time, or because it is down).
func growClaim(f *facts.Facts, in VolumesInput, i int, size resource.Quantity) (d VolumesDecision) {
	wait := func(subject, format string, args ...any) VolumesDecision {
		d.wait(Volume, subject, format, args...)
		return d
	}
	all, healthy := f.Truth.Voters()
	m := f.Truth.Primary[i]
	if m != nil && m.Voter() && !m.Healthy {
		all-- // member i itself may be down (its disk full): the others must be healthy
	}
	if m != nil && m.Voter() && m.Healthy {
		all, healthy = all-1, healthy-1
	}
	if len(f.Truth.Primary) != TargetOf(in.Spec) || m == nil || healthy != all || f.Truth.Learner() != nil {
		return wait("", "every member but %s healthy before growing its claim %s (%d of %d other voters healthy)", f.Names.Pod(i), f.Names.PVC(i), healthy, all)
	}
	if who := Defragmenting(f); who != "" {
		return wait(who, "to finish defragmenting before growing claim %s", f.Names.PVC(i))
	}
	if what := in.RestartingInPlace; what != "" {
		return wait(what, "before growing claim %s", f.Names.PVC(i))
	}
	attempt, why := NextAttempt(f, f.GrowJobs[i])
	if why != "" {
		return wait("", "growing claim %s to %s: %s", f.Names.PVC(i), size.String(), why)
	}
	job := Job{Kind: JobGrowVolume, Attempt: attempt, Ordinal: i, Size: size, Endpoints: in.Endpoints}
	d.Job, d.Growing = &job, f.Names.PVC(i)
	d.Action = fmt.Sprintf("Job %s growing claim %s to %s", job.Name(f.Names), f.Names.PVC(i), size.String())
	return wait(d.Action, "")
}
