package sync

import (
	"fmt"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// roll steps the StatefulSet's RollingUpdate partition one pod at a time (docs/design/07-steps.md §7.11).
// With full=false (a membership change in flight, or no member list) it only steps over a pod that is
// not a healthy voter: replacing it costs nothing, and that is what lets a bad image tag be reverted.
// It reports whether a roll is in progress, which holds back scaling.
func (p *plan) roll(full bool) bool {
	f := p.f
	if f.StatefulSet == nil {
		// A StatefulSet made over running pods (re-created for its claim template, docs/design/17-growing-volumes.md §17.3, or
		// deleted by hand with --cascade=orphan) adopts them, whatever template they run (a roll may have
		// been half done, the hook upgraded meanwhile): its partition starts above every pod (floorReplicas
		// lowers it to replicas) and the roll steps it down, over pods already on its revision at once and
		// without a restart, over the others health-gated.
		p.partition = 0
		if len(f.Pods) > 0 {
			p.partition = api.MaxSize
			p.Rolling, p.rollingTo = true, p.hash
			top := 0
			for i := range f.Pods {
				top = max(top, i)
			}
			p.wait(steps.Roll, f.Names.Pod(top), "to run the new revision and report a healthy voter")
			return true
		}
		return false
	}
	st := f.StatefulSet.Status
	// While the StatefulSet status is behind its spec (and always right after a template change, which
	// resets the partition so that no pod changes until the hook steps), nothing steps and no pod counts
	// as updated: the same evaluation runs, so the status reads the same before and after the controller
	// catches up.
	lag := st.ObservedGeneration < f.StatefulSet.Generation
	if f.StatefulSet.Annotations[api.AnnTemplateHash] != p.hash {
		p.partition = p.Replicas
		lag = true
	}
	updated := func(i int) bool { return !lag && p.podUpdated(i) }
	part := int(p.partition)
	for part > 0 {
		p.Rolling = true
		p.rollingTo = p.hash
		if part < int(p.Replicas) && !updated(part) {
			p.wait(steps.Roll, f.Names.Pod(part), "to run the new revision and report a healthy voter")
			return true
		}
		next := part - 1
		if updated(next) {
			part = next // already on the update revision: nothing restarts
			p.partition = int32(part)
			continue
		}
		// A restarted pod takes its certificates from the user's Secrets afresh: while one is unusable it
		// could not start, so no healthy member is restarted (docs/design/14-tls.md §14.5).
		if len(p.CertProblems) > 0 && p.podHealthy(next) {
			p.rollHeld = true
			p.wait(steps.Roll, "", "usable TLS Secrets before restarting %s (%s)", f.Names.Pod(next), p.CertProblems[0])
			return true
		}
		// A healthy pod is not restarted while another member defragments (its reads and writes wait
		// for the defragmentation): two members would be unavailable at once.
		if who := steps.Defragmenting(p.f); who != "" && p.podHealthy(next) {
			p.rollHeld = true
			p.wait(steps.Roll, who, "to finish defragmenting before restarting %s", f.Names.Pod(next))
			return true
		}
		if what := p.restartingInPlace(); what != "" && p.podHealthy(next) {
			p.rollHeld = true
			p.wait(steps.Roll, what, "before restarting %s", f.Names.Pod(next))
			return true
		}
		// Stepping over a pod that is not healthy costs nothing; a healthy one needs the quorum rule.
		// A cluster meant to have one or two members cannot keep quorum through a restart: it rolls
		// when every voter is healthy and is briefly unavailable (docs/operations.md §9, Limits).
		if p.podHealthy(next) {
			all, healthy := f.Truth.Voters()
			small := p.Target() <= 2 && all == healthy
			if healthy-1 < api.Quorum(all) && !small {
				p.rollHeld = true
				p.wait(steps.Roll, "", "quorum to allow restarting %s (%d of %d voters healthy)", f.Names.Pod(next), healthy, all)
				return true
			}
		}
		msg := fmt.Sprintf("%s to run the new revision and report a healthy voter", f.Names.Pod(next))
		p.wait(steps.Roll, f.Names.Pod(next), "to run the new revision and report a healthy voter")
		if lag || (!full && p.podHealthy(next)) {
			return true
		}
		p.partition = int32(next)
		p.action = msg
		return true
	}
	// The last step is taken; the roll lasts until every pod runs the update revision.
	p.Rolling = false
	for _, i := range sortedKeys(f.Pods) {
		if f.Pods[i].Labels["controller-revision-hash"] != st.UpdateRevision || st.CurrentRevision != st.UpdateRevision {
			p.Rolling = st.UpdateRevision != ""
			break
		}
	}
	// Every pod carries the update revision: the roll still lasts while the pod it restarted last is on
	// its way back (recorded: a pod restarted for another reason after a roll is not the roll's).
	if !p.Rolling && st.UpdateRevision != "" && f.ConfigValue(api.ConfigKeyRollingTo) == p.hash {
		for i := 0; i < p.Target(); i++ {
			if pod := f.Pods[i]; pod != nil && f.Truth.Primary[i] != nil && !p.podUpdated(i) && f.Now.Sub(pod.CreationTimestamp.Time) < rollRestartGrace {
				p.Rolling = true
				break
			}
		}
	}
	p.rollingTo = ""
	if p.Rolling {
		p.rollingTo = p.hash
		p.wait(steps.Roll, f.Names.Pod(p.lowestNotUpdated()), "to run the new revision and report a healthy voter")
	}
	return p.Rolling
}

func (p *plan) lowestNotUpdated() int {
	for i := 0; i < int(p.Replicas); i++ {
		if !p.podUpdated(i) {
			return i
		}
	}
	return 0
}

// podUpdated: the pod at i runs the update revision, its agent holds the Lease, and reports a healthy voter.
func (p *plan) podUpdated(i int) bool {
	f := p.f
	pod := f.Pods[i]
	lv := f.Leases[i]
	if pod == nil || lv == nil || pod.Labels["controller-revision-hash"] != f.StatefulSet.Status.UpdateRevision {
		return false
	}
	return string(pod.UID) == lv.Holder && f.ReportsHealthyVoter(i, "")
}

// podHealthy: the pod at i counts towards quorum by any sign (ready, or a healthy voter report).
func (p *plan) podHealthy(i int) bool {
	f := p.f
	if m := f.Truth.Primary[i]; m != nil && m.Healthy {
		return true
	}
	return f.PodReady(i) || f.ReportsHealthyVoter(i, "")
}

// rollRestartGrace is how long a member a roll is replacing counts as on its way back rather than
// unhealthy: the restart is the roll's own doing (counting it flapped the phase to Degraded at every step),
// but a new pod that has not become a healthy voter after this long (a bad image) is degraded.
const rollRestartGrace = 2 * time.Minute

// restartedByRoll: a roll is in progress and the pod of m is one it released (at or above the
// partition) that is stopping, still on the old revision (the StatefulSet controller replaces it next),
// or re-created less than rollRestartGrace ago. Derived from observed objects only, so a resync says
// the same; a member without a pod is never hidden.
func (p *plan) restartedByRoll(m *facts.Member) bool {
	f := p.f
	pod := f.Pods[m.Ordinal]
	if !p.Rolling || f.StatefulSet == nil || pod == nil || m.Ordinal < int(p.partition) {
		return false
	}
	if pod.DeletionTimestamp != nil || pod.Labels["controller-revision-hash"] != f.StatefulSet.Status.UpdateRevision {
		return true
	}
	return f.Now.Sub(pod.CreationTimestamp.Time) < rollRestartGrace
}
