package steps

import (
	"fmt"
	"maps"
	"slices"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// Scaling to the spec's size: the replicas floor that keeps every member's pod, the volumes of removed
// members, and the Leases of ordinals that are gone. (Adding and removing a member: sync/scale.go.)

// Step is what one membership step decided: Acted, it started something or waits on something (the
// sync's step is taken); the Job it starts (nil none) and the action that names it; its waits.
type Step struct {
	Acted   bool
	Job     *Job
	Action  string
	Waiting Waits
}

// wait notes a wait of kind and says the step acted.
func (s *Step) wait(kind WaitKind, subject, format string, args ...any) {
	s.Acted, s.Waiting = true, s.Waiting.Addf(kind, subject, format, args...)
}

// ScaleInput is what the scale steps read of the decisions before them.
type ScaleInput struct {
	// Spec: the spec rendered; Replicas, Partition: the StatefulSet's so far; Busy: the membership
	// change in flight ("" none).
	Spec                api.ClusterSpec
	Replicas, Partition int32
	Busy                string
	// Leases: the hook's Lease halves so far (read, or copied and trimmed by TrimLeases).
	Leases Leases
	// Endpoints: the voters' client URLs a volume Job talks to.
	Endpoints string
}

// AdoptFloor raises floor to cover every ordinal with a claim when the spec adopts existing data: a
// cluster re-created on the kept claims of an old one must start all of the old members together, since
// pod 0 alone runs on one member's data and can never reach the old quorum. A claim of a member that was
// removed makes its agent wait for a join; a seed is only ever used on an empty volume.
func AdoptFloor(f *facts.Facts, spec api.ClusterSpec, floor int32) int32 {
	if !spec.AdoptExistingData {
		return floor
	}
	for i, pvc := range f.PVCs {
		if pvc.DeletionTimestamp == nil && int32(i+1) > floor {
			floor = int32(i + 1)
		}
	}
	return floor
}

// DeleteVolume deletes the claim of an ordinal that left: above replicas, no member, no pod.
func DeleteVolume(f *facts.Facts, in ScaleInput) (d Step) {
	if in.Spec.Storage.EmptyDir != nil {
		return d
	}
	for _, i := range slices.Sorted(maps.Keys(f.PVCs)) {
		pvc := f.PVCs[i]
		// Below the target a volume is a member's to be, never a removed one's: after an in-place restore
		// the cluster grows back from one member onto the old volumes (their agents move the replaced
		// data aside), and a shrink reversed before its volumes went re-creates them.
		if i < int(in.Replicas) || i < TargetOf(in.Spec) || f.Truth.Primary[i] != nil || f.Pods[i] != nil || pvc.DeletionTimestamp != nil ||
			pvc.Labels[api.LabelClusterUID] != f.ClusterUID {
			continue
		}
		if f.StatefulSet == nil || f.StatefulSet.Spec.Replicas == nil || int(*f.StatefulSet.Spec.Replicas) > i {
			continue // the StatefulSet has not been lowered yet
		}
		js := f.DeleteVolumeJobs[i]
		attempt := 1
		if len(js) > 0 {
			last := js[len(js)-1]
			if last.State == facts.JobFailed && f.Now.Before(last.Finished.Add(Backoff(last.Attempt))) {
				d.wait(Volume, "", "retrying the deletion of claim %s after Job %s failed", pvc.Name, last.Job.Name)
				return d
			}
			attempt = last.Attempt + 1
		}
		if attempt > MaxAttempts {
			continue
		}
		d.Job = &Job{Kind: JobDeleteVolume, Attempt: attempt, Ordinal: i, Endpoints: in.Endpoints}
		d.Action = fmt.Sprintf("Job %s deleting the volume of %s", d.Job.Name(f.Names), f.Names.Pod(i))
		d.wait(Volume, d.Action, "")
		return d
	}
	return d
}

// FloorDecision is the replicas the answer renders and what is left to clean up.
type FloorDecision struct {
	Replicas, Partition int32
	// Cleanup: pods or volumes of removed ordinals are still to go.
	Cleanup bool
	Waiting Waits
}

// FloorReplicas keeps invariant 2 (replicas >= 1 + highest member ordinal) and drops pods that are
// neither members nor wanted nor joining.
func FloorReplicas(f *facts.Facts, in ScaleInput) FloorDecision {
	d := FloorDecision{Replicas: in.Replicas, Partition: in.Partition}
	if !f.Bootstrapped {
		return d
	}
	target := TargetOf(in.Spec)
	floor := int32(f.Truth.HighestOrdinal() + 1)
	if f.Truth.Known() && int32(f.Truth.UnionHighest+1) > floor {
		// Another fresh healthy voter lists a member the freshest report does not: the safest view wins.
		floor = int32(f.Truth.UnionHighest + 1)
	}
	if !f.Truth.Known() {
		// Without a member list nothing is lowered: status.members is the best memory of who is a member.
		floor = in.Replicas
		for _, m := range f.Parent.Status.Members {
			if i := f.Names.PodOrdinal(m.Name); int32(i+1) > floor {
				floor = int32(i + 1)
			}
		}
		floor = AdoptFloor(f, in.Spec, floor)
	}
	for i := range in.Leases {
		if in.Leases.Joining(i, f.Now) && int32(i+1) > floor && i < target {
			floor = int32(i + 1)
		}
	}
	want := in.Replicas
	if t := int32(target); want > t && f.Truth.Known() {
		want = t
	}
	want = max(want, floor, 1)
	// Members missing (a create, a scale-up) and the member list known: every wanted pod starts at once,
	// and each joins when its agent asks and it is its turn (scaleUp, repairJoin: one at a time, every
	// voter healthy, under a join permission). Started one per join, pod starts (3-5 s each) were most
	// of a create-5 (e2e/RESULTS.md, timeline). Derived from the target and the member list, not from the
	// observed replicas, so a stale cache cannot take a started pod away. It stops below an ordinal whose
	// old claim is still being deleted: a pod would bind it.
	if t := int32(target); f.Truth.Known() && !f.SplitBrain && len(f.Truth.Primary) < target {
		for want < t && !claimDeleting(f, int(want)) {
			want++
		}
	}
	d.Replicas = want
	if f.Truth.Known() {
		d.Cleanup, d.Waiting = cleanupLeft(f, in, want)
	}
	d.Partition = min(d.Partition, d.Replicas)
	return d
}

// claimDeleting: the claim of ordinal i is being deleted, or a Job is deleting it.
func claimDeleting(f *facts.Facts, i int) bool {
	if pvc := f.PVCs[i]; pvc != nil && pvc.DeletionTimestamp != nil {
		return true
	}
	js := f.DeleteVolumeJobs[i]
	return len(js) > 0 && js[len(js)-1].State == facts.JobActive
}

// cleanupLeft says what is left of ordinals above replicas that are no longer members: a pod that must
// stop, a volume that must be deleted. Derived from observed objects, so a resync says the same.
func cleanupLeft(f *facts.Facts, in ScaleInput, replicas int32) (cleanup bool, ws Waits) {
	wait := func(subject, format string, args ...any) {
		ws = ws.Addf(Scale, subject, format, args...)
	}
	for i := 0; i < int(replicas) && i < TargetOf(in.Spec); i++ {
		lp := in.Leases[i]
		if f.Truth.Primary[i] == nil && (lp == nil || lp.Join.IsZero()) {
			wait(f.Names.Pod(i), "has no member and its agent has not asked to join")
		}
	}
	for _, i := range slices.Sorted(maps.Keys(f.Pods)) {
		if i >= int(replicas) && f.Truth.Primary[i] == nil {
			cleanup = true
			wait(f.Names.Pod(i), "to stop")
		}
	}
	if in.Spec.Storage.EmptyDir != nil || in.Busy != "" {
		return cleanup, ws
	}
	for _, i := range slices.Sorted(maps.Keys(f.PVCs)) {
		pvc := f.PVCs[i]
		if i >= int(replicas) && f.Truth.Primary[i] == nil && f.Pods[i] == nil && pvc.DeletionTimestamp == nil && pvc.Labels[api.LabelClusterUID] == f.ClusterUID {
			cleanup = true
			wait("", "claim %s of the removed member to be deleted", pvc.Name)
		}
	}
	return cleanup, ws
}

// TrimDecision is the Leases the answer renders and the observed ones it lets go.
type TrimDecision struct {
	Leases   Leases
	Released []Release
}

// TrimLeases renders a Lease for every ordinal in use: below replicas, a member, or with a pod left
// (on a copy of in.Leases).
func TrimLeases(f *facts.Facts, in ScaleInput) TrimDecision {
	d := TrimDecision{Leases: Leases{}}
	n := int(in.Replicas)
	if h := f.Truth.HighestOrdinal() + 1; h > n {
		n = h
	}
	for i := range f.Pods {
		n = max(n, i+1)
	}
	for i, lp := range in.Leases {
		if i < n {
			c := *lp
			d.Leases[i] = &c
		}
	}
	for _, lv := range f.Leases {
		if lv.Ordinal >= n {
			d.Released = append(d.Released, Release{Key: wire.KeyLease, Name: lv.Lease.Name, Reason: fmt.Sprintf("ordinal %d has no member, no pod and is above replicas", lv.Ordinal)})
		}
	}
	for i := 0; i < n; i++ {
		lp := d.Leases.Lease(i)
		switch {
		case i >= int(in.Replicas) && f.Truth.Primary[i] == nil:
			// A pod above replicas is on its way out: a restart must park, never rejoin.
			d.Leases.SetIntent(i, api.IntentLeave, f.Now)
			lp.Join = api.JoinWindow{}
		case lp.Kind == "":
			d.Leases.SetIntent(i, api.IntentMember, f.Now)
		case lp.Kind == api.IntentLeave && i < int(in.Replicas) && i < TargetOf(in.Spec) && f.Truth.Primary[i] == nil && f.Truth.Known():
			// A wanted ordinal below replicas that has left (a stale answer can leave this behind)
			// becomes a member again: its parked agent restarts and asks to join.
			d.Leases.SetIntent(i, api.IntentMember, f.Now)
		}
	}
	return d
}
