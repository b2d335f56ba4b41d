package steps

import (
	"fmt"
	"slices"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// RollInput is what Roll reads of the decisions before it.
type RollInput struct {
	// Full: nothing is in flight, so a healthy pod may be restarted (false: only a pod that is not a
	// healthy voter is stepped over, which is what lets a bad image tag be reverted).
	Full bool
	// Hash: the pod template hash rendered; Replicas and Partition: as carried over and scaled.
	Hash      string
	Replicas  int32
	Partition int32
	// Target: the latched size.
	Target int
	// CertProblems: what is wrong with the user's TLS Secrets: a restarted pod could not start on them.
	CertProblems []facts.CertProblem
	// InPlace: the restart in place under way (a CA rotation's, a peer URL move's; "" none).
	InPlace string
}

// RollPart is the roll's part of the decision (docs/design/07-steps.md §7.11). Rolling also holds back
// the steps after the roll (scaling).
type RollPart struct {
	// Partition: the StatefulSet's partition to render.
	Partition int32
	// Rolling: a roll is in progress (it holds back scaling); RollingTo: the hash it brings the pods to
	// (ConfigKeyRollingTo), "" when none.
	Rolling   bool
	RollingTo string
	// Held: the next step waits for quorum, usable Secrets, a defragmentation or a restart in place.
	Held bool
	// Waits: what the roll waits for; Action: the step started by this answer ("" none).
	Waits  Waits
	Action string
}

func (r *RollPart) wait(subject, format string, args ...any) {
	r.Waits = r.Waits.Add(Wait{Kind: RollWait, Subject: subject, Detail: fmt.Sprintf(format, args...)})
}

const rollWaitDetail = "to run the new revision and report a healthy voter"

// Roll steps the StatefulSet's RollingUpdate partition one pod at a time (docs/design/07-steps.md §7.11).
// With Full=false (a membership change in flight, or no member list) it only steps over a pod that is
// not a healthy voter: replacing it costs nothing, and that is what lets a bad image tag be reverted.
func Roll(f *facts.Facts, in RollInput) RollPart {
	r := RollPart{Partition: in.Partition}
	if f.StatefulSet == nil {
		// A StatefulSet made over running pods (re-created for its claim template, docs/design/17-growing-volumes.md §17.3, or
		// deleted by hand with --cascade=orphan) adopts them, whatever template they run (a roll may have
		// been half done, the hook upgraded meanwhile): its partition starts above every pod (floorReplicas
		// lowers it to replicas) and the roll steps it down, over pods already on its revision at once and
		// without a restart, over the others health-gated.
		r.Partition = 0
		if len(f.Pods) == 0 {
			return r
		}
		r.Partition, r.Rolling, r.RollingTo = api.MaxSize, true, in.Hash
		r.wait(f.Names.Pod(slices.Max(mapKeys(f.Pods))), rollWaitDetail)
		return r
	}
	st := f.StatefulSet.Status
	// While the StatefulSet status is behind its spec (and always right after a template change, which
	// resets the partition so that no pod changes until the hook steps), nothing steps and no pod counts
	// as updated: the same evaluation runs, so the status reads the same before and after the controller
	// catches up.
	lag := st.ObservedGeneration < f.StatefulSet.Generation
	if f.StatefulSet.Annotations[api.AnnTemplateHash] != in.Hash {
		r.Partition = in.Replicas
		lag = true
	}
	updated := func(i int) bool { return !lag && PodUpdated(f, i) }
	for part := int(r.Partition); part > 0; {
		r.Rolling, r.RollingTo = true, in.Hash
		if part < int(in.Replicas) && !updated(part) {
			r.wait(f.Names.Pod(part), rollWaitDetail)
			return r
		}
		next := part - 1
		if updated(next) {
			part = next // already on the update revision: nothing restarts
			r.Partition = int32(part)
			continue
		}
		if why := rollHold(f, in, next); why != (Wait{}) {
			r.Held = true
			r.Waits = r.Waits.Add(why)
			return r
		}
		r.wait(f.Names.Pod(next), rollWaitDetail)
		if lag || (!in.Full && PodHealthy(f, next)) {
			return r
		}
		r.Partition = int32(next)
		r.Action = f.Names.Pod(next) + " " + rollWaitDetail
		return r
	}
	rollEnd(f, in, &r)
	return r
}

// rollHold is why the healthy pod at next may not be restarted now (the zero Wait: it may).
func rollHold(f *facts.Facts, in RollInput, next int) Wait {
	if !PodHealthy(f, next) {
		// Stepping over a pod that is not healthy costs nothing.
		return Wait{}
	}
	pod := f.Names.Pod(next)
	held := func(subject, format string, args ...any) Wait {
		return Wait{Kind: RollWait, Subject: subject, Detail: fmt.Sprintf(format, args...)}
	}
	// A restarted pod takes its certificates from the user's Secrets afresh: while one is unusable it
	// could not start, so no healthy member is restarted (docs/design/14-tls.md §14.5).
	if len(in.CertProblems) > 0 {
		return held("", "usable TLS Secrets before restarting %s (%s)", pod, in.CertProblems[0])
	}
	// A healthy pod is not restarted while another member defragments (its reads and writes wait
	// for the defragmentation): two members would be unavailable at once.
	if who := Defragmenting(f); who != "" {
		return held(who, "to finish defragmenting before restarting %s", pod)
	}
	if in.InPlace != "" {
		return held(in.InPlace, "before restarting %s", pod)
	}
	// A healthy one needs the quorum rule. A cluster meant to have one or two members cannot keep
	// quorum through a restart: it rolls when every voter is healthy and is briefly unavailable
	// (docs/operations.md §9, Limits).
	all, healthy := f.Truth.Voters()
	small := in.Target <= 2 && all == healthy
	if healthy-1 < api.Quorum(all) && !small {
		return held("", "quorum to allow restarting %s (%d of %d voters healthy)", pod, healthy, all)
	}
	return Wait{}
}

// rollEnd: the last step is taken; the roll lasts until every pod runs the update revision.
func rollEnd(f *facts.Facts, in RollInput, r *RollPart) {
	st := f.StatefulSet.Status
	r.Rolling, r.RollingTo = false, ""
	for _, i := range slices.Sorted(slices.Values(mapKeys(f.Pods))) {
		if f.Pods[i].Labels["controller-revision-hash"] != st.UpdateRevision || st.CurrentRevision != st.UpdateRevision {
			r.Rolling = st.UpdateRevision != ""
			break
		}
	}
	// Every pod carries the update revision: the roll still lasts while the pod it restarted last is on
	// its way back (recorded: a pod restarted for another reason after a roll is not the roll's).
	if !r.Rolling && st.UpdateRevision != "" && f.ConfigValue(api.ConfigKeyRollingTo) == in.Hash {
		for i := 0; i < in.Target; i++ {
			if pod := f.Pods[i]; pod != nil && f.Truth.Primary[i] != nil && !PodUpdated(f, i) && f.Now.Sub(pod.CreationTimestamp.Time) < RollRestartGrace {
				r.Rolling = true
				break
			}
		}
	}
	if r.Rolling {
		r.RollingTo = in.Hash
		r.wait(f.Names.Pod(lowestNotUpdated(f, in.Replicas)), rollWaitDetail)
	}
}

func lowestNotUpdated(f *facts.Facts, replicas int32) int {
	for i := 0; i < int(replicas); i++ {
		if !PodUpdated(f, i) {
			return i
		}
	}
	return 0
}

func mapKeys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// PodUpdated: the pod at i runs the update revision, its agent holds the Lease, and reports a healthy voter.
func PodUpdated(f *facts.Facts, i int) bool {
	pod := f.Pods[i]
	lv := f.Leases[i]
	if pod == nil || lv == nil || f.StatefulSet == nil || pod.Labels["controller-revision-hash"] != f.StatefulSet.Status.UpdateRevision {
		return false
	}
	return string(pod.UID) == lv.Holder && f.ReportsHealthyVoter(i, "")
}

// PodHealthy: the pod at i counts towards quorum by any sign (ready, or a healthy voter report).
func PodHealthy(f *facts.Facts, i int) bool {
	if m := f.Truth.Primary[i]; m != nil && m.Healthy {
		return true
	}
	return f.PodReady(i) || f.ReportsHealthyVoter(i, "")
}

// RollRestartGrace is how long a member a roll is replacing counts as on its way back rather than
// unhealthy: the restart is the roll's own doing (counting it flapped the phase to Degraded at every step),
// but a new pod that has not become a healthy voter after this long (a bad image) is degraded.
const RollRestartGrace = 2 * time.Minute

// RestartedByRoll: a roll is in progress (r, as Roll decided it) and the pod of m is one it released
// (at or above the partition) that is stopping, still on the old revision (the StatefulSet controller
// replaces it next), or re-created less than RollRestartGrace ago. Derived from observed objects only,
// so a resync says the same; a member without a pod is never hidden.
func RestartedByRoll(f *facts.Facts, r RollPart, m *facts.Member) bool {
	pod := f.Pods[m.Ordinal]
	if !r.Rolling || f.StatefulSet == nil || pod == nil || m.Ordinal < int(r.Partition) {
		return false
	}
	if pod.DeletionTimestamp != nil || pod.Labels["controller-revision-hash"] != f.StatefulSet.Status.UpdateRevision {
		return true
	}
	return f.Now.Sub(pod.CreationTimestamp.Time) < RollRestartGrace
}
