package sync

import (
	"fmt"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// Joins and removals, one member at a time (docs/design/07-steps.md §7): a learner is permitted, promoted,
// a member asked to leave, a dead or orphaned one removed by a Job, a stalled join repaired.

// quorumAllowsRemoving applies the quorum rule of docs/design/08-safety-rules.md §8.2 to removing m.
func (p *plan) quorumAllowsRemoving(m *facts.Member) bool {
	all, healthy := p.f.Truth.Voters()
	return api.RemovalAllowed(all, healthy, m.Learner, m.Healthy) == nil
}

// advanceJoins clears join permissions of finished joins and of ordinals no longer wanted.
func (p *plan) advanceJoins() {
	f := p.f
	for _, i := range p.leases.Ordinals() {
		lp := p.leases[i]
		if lp.Join.IsZero() {
			continue
		}
		m := f.Truth.Primary[i]
		switch {
		case m != nil && !m.Learner && f.ReportsHealthyVoter(i, m.ID):
			lp.Join = api.JoinWindow{}
		case m == nil && i >= p.Target() && p.Busy == "":
			lp.Join = api.JoinWindow{}
		}
	}
}

// noteStalledJoins runs after the decision: a permission that expired and was not renewed this sync
// (renewal happens when the agent asks again) is a stalled step.
func (p *plan) noteStalledJoins() {
	f := p.f
	for _, i := range p.leases.Ordinals() {
		lp := p.leases[i]
		lv := f.Leases[i]
		if lp.Join.IsZero() || lv == nil || !sameWindow(lv.Join, lp.Join) || f.Truth.Primary[i] != nil {
			continue
		}
		if !lv.PermitLive(f.Now) {
			p.Stalled = fmt.Sprintf("%s was permitted to join at %s and has not joined", f.Names.Pod(i), lv.JoinPermitted)
		}
	}
}

// advanceLearner removes a learner that missed its promotion deadline, or that no join explains.
func (p *plan) advanceLearner() {
	f := p.f
	m := f.Truth.Learner()
	if m == nil {
		return
	}
	reason := ""
	// A learner is explained only by a live join permission at its ordinal; past its deadline (or with
	// none, e.g. an add that raced the deadline) it goes: learners cost no quorum and block every join.
	switch {
	case m.Ordinal < 0:
		reason = "orphan"
	case p.leases.Joining(m.Ordinal, p.f.Now): // the permission as normalised, not as observed
	case m.Ordinal >= p.Target():
		reason = "unwanted-learner"
	default:
		reason = "stuck-learner"
	}
	if reason == "" {
		return
	}
	if reason == "stuck-learner" {
		p.Stalled = fmt.Sprintf("learner %s (%s) was not promoted in time", m.ID, m.PeerURL)
	}
	if !p.removalRunning() {
		p.removeMember(m, reason)
	}
}

// advanceLeave removes, through a Job, a leaving member whose agent is gone or too slow.
func (p *plan) advanceLeave() {
	f := p.f
	if p.removalRunning() {
		return
	}
	for _, i := range p.leases.Ordinals() {
		lp := p.leases[i]
		m := f.Truth.Primary[i]
		if lp.Kind != api.IntentLeave || m == nil {
			continue
		}
		if !p.quorumAllowsRemoving(m) {
			// Health changed since the leave was asked: the member stays until quorum allows it
			// again, and other repairs can go first. An agent already removing itself meets etcd's own
			// check; one that made it anyway is seen as gone and parked by the next sync.
			p.leases.SetIntent(i, api.IntentMember, p.f.Now)
			p.wait(steps.Scale, f.Names.Pod(i), "stays a member: quorum does not allow it to leave now")
			return
		}
		lv := f.Leases[i]
		since, err := time.Parse(time.RFC3339, lp.Since)
		// An agent without its data cannot remove its member itself.
		agentGone := lv == nil || !lv.Fresh || p.lostData(m)
		slow := err == nil && f.Now.Sub(since) >= p.timeout(p.Spec.Timeouts.LeaveSeconds)
		if agentGone || slow {
			p.removeMember(m, "leave")
		}
		return
	}
}

// removeMember emits the next remove Job for m unless one is running or the backoff has not passed.
func (p *plan) removeMember(m *facts.Member, reason string) {
	f := p.f
	js := f.RemoveJobs[m.ID]
	attempt := 1
	if len(js) > 0 {
		last := js[len(js)-1]
		switch last.State {
		case facts.JobActive:
			p.wait(steps.Removal, "", "Job %s to remove member %s (%s)", last.Job.Name, m.ID, reason)
			return
		case facts.JobSucceeded:
			if f.Now.Sub(last.Finished) < steps.SucceededJobGrace {
				return
			}
		case facts.JobFailed:
			if next := last.Finished.Add(steps.Backoff(last.Attempt)); f.Now.Before(next) {
				p.wait(steps.Removal, "", "retrying the removal of member %s after %s (Job %s failed)", m.ID, next.UTC().Format(time.RFC3339), last.Job.Name)
				return
			}
		}
		attempt = last.Attempt + 1
	}
	if attempt > steps.MaxAttempts {
		p.wait(steps.Removal, "", "member %s could not be removed in %d attempts: see Job %s", m.ID, steps.MaxAttempts, js[len(js)-1].Job.Name)
		return
	}
	job := steps.Job{Kind: steps.JobRemove, Attempt: attempt, MemberID: m.ID, PeerURL: m.PeerURL, Reason: reason, Endpoints: p.voterEndpoints(m.ID)}
	p.jobs = append(p.jobs, job)
	p.removing = true
	p.action = fmt.Sprintf("Job %s removing member %s", job.Name(f.Names), m.ID)
	p.Busy = p.action
	p.wait(steps.Removal, p.action, "")
}

// removeOrphan removes a member that maps to no ordinal, or a second ID at one ordinal.
// Orphans are few (the member list is bounded, api.MaxReportedMembers) but each costs one quorum
// check, counted once (facts.voters), and the wait names the first only.
func (p *plan) removeOrphan() bool {
	var refused []*facts.Member
	for _, m := range p.f.Truth.Orphans {
		if p.quorumAllowsRemoving(m) {
			p.removeMember(m, "orphan")
			return true
		}
		refused = append(refused, m)
	}
	switch n := len(refused); {
	case n == 1:
		p.wait(steps.Removal, "", "quorum does not allow removing orphan member %s (%s)", refused[0].ID, refused[0].PeerURL)
	case n > 1:
		p.wait(steps.Removal, "", "quorum does not allow removing orphan member %s (%s) nor %d more", refused[0].ID, refused[0].PeerURL, n-1)
	}
	return false
}

// removeDead removes a voter that has been gone for minutes, when the quorum rule allows it. A voter
// whose agent reports its data lost is replaced by that agent itself (repairJoin); only when several
// are lost at once, so that no join can pass etcd's check that every voter is connected, are their old
// IDs removed here first, one at a time.
func (p *plan) removeDead() bool {
	f := p.f
	_, healthy := f.Truth.Voters()
	all, _ := f.Truth.Voters()
	for _, m := range f.Truth.Members {
		if m.Ordinal < 0 || !m.Voter() {
			continue
		}
		reason := ""
		switch {
		case m.Dead:
			reason = "dead"
		case p.lostData(m) && all-healthy > 1:
			reason = "data-lost"
		default:
			continue
		}
		if p.quorumAllowsRemoving(m) {
			p.removeMember(m, reason)
			return true
		}
		p.wait(steps.Removal, f.Names.Pod(m.Ordinal), "(member %s) is %s but removing it would break quorum", m.ID, reason)
		return true
	}
	return false
}

// lostData: the member's agent runs (fresh Lease held by its pod) and asks to join: its data is gone.
func (p *plan) lostData(m *facts.Member) bool {
	f := p.f
	lv := f.Leases[m.Ordinal]
	return !m.Healthy && lv != nil && lv.Fresh && lv.Report.Reason() == api.ReasonWaitingForJoin &&
		(f.Pods[m.Ordinal] == nil || string(f.Pods[m.Ordinal].UID) == lv.Holder)
}

// joinable says whether ordinal i may be given join-permitted now, and why not.
// A replacement (the ordinal's old, unhealthy member goes first) needs every other voter healthy; no
// member joins while another defragments.
func (p *plan) joinable(i int) (bool, string) {
	f := p.f
	for _, m := range f.Truth.Members {
		if m.Voter() && !m.Healthy && m.Ordinal != i {
			return false, "every voter to be healthy before a member joins"
		}
	}
	if pvc := f.PVCs[i]; pvc != nil && pvc.DeletionTimestamp != nil {
		return false, fmt.Sprintf("claim %s to finish deleting", pvc.Name)
	}
	if who := steps.Defragmenting(p.f); who != "" {
		return false, fmt.Sprintf("%s to finish defragmenting before %s joins", who, f.Names.Pod(i))
	}
	if what := p.restartingInPlace(); what != "" {
		return false, fmt.Sprintf("%s before %s joins", what, f.Names.Pod(i))
	}
	return true, ""
}

// repairJoin lets a wanted ordinal below replicas (re)join when its agent asks: its member was removed,
// or it lost its data and must replace its old ID (the quorum rule applies to that removal). An ordinal
// whose agent does not ask (pod pending, node gone) blocks nothing.
func (p *plan) repairJoin() bool {
	f := p.f
	for i := 0; i < int(p.Replicas) && i < p.Target(); i++ {
		m := f.Truth.Primary[i]
		lv := f.Leases[i]
		asking := lv != nil && lv.Fresh && lv.Report.Reason() == api.ReasonWaitingForJoin &&
			(f.Pods[i] == nil || string(f.Pods[i].UID) == lv.Holder)
		if m != nil && m.Healthy {
			continue
		}
		if !asking {
			continue // noteCleanup says so
		}
		replace := m != nil
		if replace && !p.quorumAllowsRemoving(m) {
			p.wait(steps.Join, f.Names.Pod(i), "lost its data but replacing member %s would break quorum", m.ID)
			continue
		}
		if ok, why := p.joinable(i); !ok {
			p.wait(steps.Join, "", "%s", why)
			continue
		}
		p.leases.Permit(i, p.f.Now, p.timeout(p.Spec.Timeouts.LearnerPromotionSeconds))
		p.action = fmt.Sprintf("%s to join the cluster", f.Names.Pod(i))
		p.Busy = p.action
		p.wait(steps.Join, p.action, "")
		return true
	}
	return false
}

// joiningAs: m is the member the agent at its ordinal is adding under a live join permission: its agent
// reports that member ID, or m is a learner that has not started yet (added a moment before its agent's
// first report with the new ID: counting it unhealthy flapped the phase to Degraded on every join).
func (p *plan) joiningAs(m *facts.Member) bool {
	lv := p.f.Leases[m.Ordinal]
	if !p.leases.Joining(m.Ordinal, p.f.Now) || lv == nil {
		return false
	}
	return lv.Report.MemberID == m.ID || m.Learner && !m.Started
}
