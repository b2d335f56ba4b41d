package sync

import "fmt"

// roll steps the StatefulSet's RollingUpdate partition one pod at a time (DESIGN.md §3, rolling changes).
// With full=false (a membership change in flight, or no member list) it only steps over a pod that is
// not a healthy voter: replacing it costs nothing, and that is what lets a bad image tag be reverted.
// It reports whether a roll is in progress, which holds back scaling.
func (p *plan) roll(full bool) bool {
	f := p.f
	if f.sts == nil {
		p.partition = 0
		return false
	}
	if f.sts.Annotations[AnnTemplateHash] != p.hash {
		// A new template: no pod changes until the hook steps the partition down from the top.
		p.partition = p.replicas
		p.rolling = true
		p.wait("rolling %s to the new pod template", f.sts.Name)
		return true
	}
	st := f.sts.Status
	lag := st.ObservedGeneration < f.sts.Generation
	for p.partition > 0 {
		p.rolling = true
		top := int(p.partition)
		if top < int(p.replicas) && (lag || !p.podUpdated(top)) {
			p.wait("%s to run the new revision and report a healthy voter", f.names.Pod(top))
			return true
		}
		if lag {
			p.wait("rolling %s to the new pod template", f.sts.Name)
			return true
		}
		next := top - 1
		if p.podUpdated(next) {
			p.partition = int32(next) // already on the update revision: nothing restarts
			continue
		}
		nextHealthy := p.podHealthy(next)
		if full {
			all, healthy := f.voters()
			after := healthy
			if nextHealthy {
				after--
			}
			// A cluster meant to have one or two members cannot keep quorum through a restart; it rolls
			// only when every voter is healthy, and is briefly unavailable (README: limits).
			small := p.target() <= 2 && all == healthy
			if after < Quorum(all) && !small {
				p.wait("quorum to allow restarting %s (%d of %d voters healthy)", f.names.Pod(next), healthy, all)
				return true
			}
		} else if nextHealthy {
			return true
		}
		p.partition = int32(next)
		p.action = fmt.Sprintf("%s to run the new revision and report a healthy voter", f.names.Pod(next))
		p.wait("%s", p.action)
		return true
	}
	// The last step is taken; the roll lasts until every pod runs the update revision.
	p.rolling = false
	for _, i := range sortedKeys(f.pods) {
		if f.pods[i].Labels["controller-revision-hash"] != st.UpdateRevision || st.CurrentRevision != st.UpdateRevision {
			p.rolling = st.UpdateRevision != ""
			break
		}
	}
	if p.rolling {
		p.wait("%s to run the new revision and report a healthy voter", f.names.Pod(p.lowestNotUpdated()))
	}
	return p.rolling
}

func (p *plan) lowestNotUpdated() int {
	for i := 0; i < int(p.replicas); i++ {
		if !p.podUpdated(i) {
			return i
		}
	}
	return 0
}

// podUpdated: the pod at i runs the update revision, its agent holds the Lease, and reports a healthy voter.
func (p *plan) podUpdated(i int) bool {
	f := p.f
	pod := f.pods[i]
	lv := f.leases[i]
	if pod == nil || lv == nil || pod.Labels["controller-revision-hash"] != f.sts.Status.UpdateRevision {
		return false
	}
	return string(pod.UID) == lv.holder && f.reportsHealthyVoter(i, "")
}

// podHealthy: the pod at i counts towards quorum by any sign (ready, or a healthy voter report).
func (p *plan) podHealthy(i int) bool {
	f := p.f
	if m := f.primary[i]; m != nil && m.healthy {
		return true
	}
	return f.podReady(i) || f.reportsHealthyVoter(i, "")
}
