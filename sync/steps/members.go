package steps

import (
	"fmt"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// Joins and removals, one member at a time (docs/design/07-steps.md §7): a learner is permitted, promoted,
// a member asked to leave, a dead or orphaned one removed by a Job, a stalled join repaired; a member
// added or asked to leave to reach the spec's size.

// MembersInput is what the membership steps read of the decisions before them.
type MembersInput struct {
	// Names: the facts' names with the client scheme every member serves now (the Jobs' endpoints).
	Names api.Names
	// Spec: the spec rendered; Replicas: the StatefulSet's so far; Busy: the membership change in flight
	// ("" none); Removing: a remove Job was made this sync.
	Spec     api.ClusterSpec
	Replicas int32
	Busy     string
	Removing bool
	// Leases: the hook's Lease halves so far (Members works on a copy).
	Leases Leases
	// RestartingInPlace: the member whose etcd restarts in place now, as a wait ("" none).
	RestartingInPlace string
}

// Members is one membership step's work and its outcome: the Lease halves, replicas and change in flight
// as it leaves them, the Jobs it starts, a stalled step it notes and what it waits for. Each step is a
// method; NewMembers starts one from its input, and the caller reads the fields back.
type Members struct {
	f  *facts.Facts
	in MembersInput

	Leases   Leases
	Replicas int32
	// Busy: the change in flight; Action: the one this step started ("" none); Removing: a remove Job
	// was made this sync.
	Busy, Action string
	Removing     bool
	Jobs         []Job
	Stalled      string
	Waiting      Waits
}

// NewMembers starts a membership step from in (its Leases copied).
func NewMembers(f *facts.Facts, in MembersInput) *Members {
	return &Members{f: f, in: in, Leases: in.Leases.Clone(), Replicas: in.Replicas, Busy: in.Busy, Removing: in.Removing}
}

func (s *Members) wait(kind WaitKind, subject, format string, args ...any) {
	s.Waiting = s.Waiting.Addf(kind, subject, format, args...)
}

// start notes the change this step starts.
func (s *Members) start(kind WaitKind, action string) {
	s.Action, s.Busy = action, action
	s.wait(kind, action, "")
}

// seconds is a spec timeout (defaulted: never nil) as a duration.
func seconds(secs *int32) time.Duration { return time.Duration(*secs) * time.Second }

// QuorumAllowsRemoving applies the quorum rule of docs/design/08-safety-rules.md §8.2 to removing m.
func QuorumAllowsRemoving(f *facts.Facts, m *facts.Member) bool {
	all, healthy := f.Truth.Voters()
	return api.RemovalAllowed(all, healthy, m.Learner, m.Healthy) == nil
}

// lostData: the member's agent runs (fresh Lease held by its pod) and asks to join: its data is gone.
func lostData(f *facts.Facts, m *facts.Member) bool {
	lv := f.Leases[m.Ordinal]
	return !m.Healthy && lv != nil && lv.Fresh && lv.Report.Reason() == api.ReasonWaitingForJoin &&
		(f.Pods[m.Ordinal] == nil || string(f.Pods[m.Ordinal].UID) == lv.Holder)
}

// VoterEndpoints are the client URLs of the voters other than skip, for Jobs that talk to etcd (n: the
// names with the client scheme every member serves now).
func VoterEndpoints(f *facts.Facts, n api.Names, skip string) string {
	var eps []string
	for _, m := range f.Truth.Members {
		if m.Learner || m.ID == skip {
			continue
		}
		if m.Ordinal >= 0 {
			eps = append(eps, n.ClientURL(m.Ordinal))
		} else if m.ClientURL != "" {
			eps = append(eps, m.ClientURL)
		}
	}
	if len(eps) == 0 {
		eps = []string{n.ClientEndpoint()}
	}
	return strings.Join(eps, ",")
}

// JoiningAs: m is the member the agent at its ordinal is adding under a live join permission (ls): its
// agent reports that member ID, or m is a learner that has not started yet (added a moment before its
// agent's first report with the new ID: counting it unhealthy flapped the phase to Degraded on every
// join).
func JoiningAs(f *facts.Facts, ls Leases, m *facts.Member) bool {
	lv := f.Leases[m.Ordinal]
	if !ls.Joining(m.Ordinal, f.Now) || lv == nil {
		return false
	}
	return lv.Report.MemberID == m.ID || m.Learner && !m.Started
}

// AdvanceJoins clears join permissions of finished joins and of ordinals no longer wanted.
func (s *Members) AdvanceJoins() bool {
	f := s.f
	for _, i := range s.Leases.Ordinals() {
		lp := s.Leases[i]
		if lp.Join.IsZero() {
			continue
		}
		m := f.Truth.Primary[i]
		switch {
		case m != nil && !m.Learner && f.ReportsHealthyVoter(i, m.ID):
			lp.Join = api.JoinWindow{}
		case m == nil && i >= TargetOf(s.in.Spec) && s.Busy == "":
			lp.Join = api.JoinWindow{}
		}
	}
	return false
}

// NoteStalledJoins runs after the decision: a permission that expired and was not renewed this sync
// (renewal happens when the agent asks again) is a stalled step.
func (s *Members) NoteStalledJoins() bool {
	f := s.f
	for _, i := range s.Leases.Ordinals() {
		lp := s.Leases[i]
		lv := f.Leases[i]
		if lp.Join.IsZero() || lv == nil || !lv.Join.Same(lp.Join) || f.Truth.Primary[i] != nil {
			continue
		}
		if !lv.PermitLive(f.Now) {
			s.Stalled = fmt.Sprintf("%s was permitted to join at %s and has not joined", f.Names.Pod(i), lv.JoinPermitted)
		}
	}
	return false
}

// AdvanceLearner removes a learner that missed its promotion deadline, or that no join explains.
func (s *Members) AdvanceLearner() bool {
	f := s.f
	m := f.Truth.Learner()
	if m == nil {
		return false
	}
	reason := ""
	// A learner is explained only by a live join permission at its ordinal; past its deadline (or with
	// none, e.g. an add that raced the deadline) it goes: learners cost no quorum and block every join.
	switch {
	case m.Ordinal < 0:
		reason = "orphan"
	case s.Leases.Joining(m.Ordinal, f.Now): // the permission as normalised, not as observed
	case m.Ordinal >= TargetOf(s.in.Spec):
		reason = "unwanted-learner"
	default:
		reason = "stuck-learner"
	}
	if reason == "" {
		return false
	}
	if reason == "stuck-learner" {
		s.Stalled = fmt.Sprintf("learner %s (%s) was not promoted in time", m.ID, m.PeerURL)
	}
	if !s.removalRunning() {
		s.removeMember(m, reason)
	}
	return false
}

// removalRunning says whether any remove Job is active or was made this sync: removals go one at a time.
func (s *Members) removalRunning() bool {
	if s.Removing {
		return true
	}
	for _, js := range s.f.RemoveJobs {
		if js[len(js)-1].State == facts.JobActive {
			return true
		}
	}
	return false
}

// AdvanceLeave removes, through a Job, a leaving member whose agent is gone or too slow.
func (s *Members) AdvanceLeave() bool {
	f := s.f
	if s.removalRunning() {
		return false
	}
	for _, i := range s.Leases.Ordinals() {
		lp := s.Leases[i]
		m := f.Truth.Primary[i]
		if lp.Kind != api.IntentLeave || m == nil {
			continue
		}
		if !QuorumAllowsRemoving(f, m) {
			// Health changed since the leave was asked: the member stays until quorum allows it
			// again, and other repairs can go first. An agent already removing itself meets etcd's own
			// check; one that made it anyway is seen as gone and parked by the next sync.
			s.Leases.SetIntent(i, api.IntentMember, f.Now)
			s.wait(Scale, f.Names.Pod(i), "stays a member: quorum does not allow it to leave now")
			return false
		}
		lv := f.Leases[i]
		since, err := time.Parse(time.RFC3339, lp.Since)
		// An agent without its data cannot remove its member itself.
		agentGone := lv == nil || !lv.Fresh || lostData(f, m)
		slow := err == nil && f.Now.Sub(since) >= seconds(s.in.Spec.Timeouts.LeaveSeconds)
		if agentGone || slow {
			s.removeMember(m, "leave")
		}
		return false
	}
	return false
}

// removeMember emits the next remove Job for m unless one is running or the backoff has not passed.
func (s *Members) removeMember(m *facts.Member, reason string) {
	f := s.f
	js := f.RemoveJobs[m.ID]
	attempt := 1
	if len(js) > 0 {
		last := js[len(js)-1]
		switch last.State {
		case facts.JobActive:
			s.wait(Removal, "", "Job %s to remove member %s (%s)", last.Job.Name, m.ID, reason)
			return
		case facts.JobSucceeded:
			if f.Now.Sub(last.Finished) < SucceededJobGrace {
				return
			}
		case facts.JobFailed:
			if next := last.Finished.Add(Backoff(last.Attempt)); f.Now.Before(next) {
				s.wait(Removal, "", "retrying the removal of member %s after %s (Job %s failed)", m.ID, next.UTC().Format(time.RFC3339), last.Job.Name)
				return
			}
		}
		attempt = last.Attempt + 1
	}
	if attempt > MaxAttempts {
		s.wait(Removal, "", "member %s could not be removed in %d attempts: see Job %s", m.ID, MaxAttempts, js[len(js)-1].Job.Name)
		return
	}
	job := Job{Kind: JobRemove, Attempt: attempt, MemberID: m.ID, PeerURL: m.PeerURL, Reason: reason, Endpoints: VoterEndpoints(f, s.in.Names, m.ID)}
	s.Jobs = append(s.Jobs, job)
	s.Removing = true
	s.start(Removal, fmt.Sprintf("Job %s removing member %s", job.Name(f.Names), m.ID))
}

// RemoveOrphan removes a member that maps to no ordinal, or a second ID at one ordinal.
// Orphans are few (the member list is bounded, api.MaxReportedMembers) but each costs one quorum
// check, counted once (facts.voters), and the wait names the first only.
func (s *Members) RemoveOrphan() bool {
	var refused []*facts.Member
	for _, m := range s.f.Truth.Orphans {
		if QuorumAllowsRemoving(s.f, m) {
			s.removeMember(m, "orphan")
			return true
		}
		refused = append(refused, m)
	}
	switch n := len(refused); {
	case n == 1:
		s.wait(Removal, "", "quorum does not allow removing orphan member %s (%s)", refused[0].ID, refused[0].PeerURL)
	case n > 1:
		s.wait(Removal, "", "quorum does not allow removing orphan member %s (%s) nor %d more", refused[0].ID, refused[0].PeerURL, n-1)
	}
	return false
}

// RemoveDead removes a voter that has been gone for minutes, when the quorum rule allows it. A voter
// whose agent reports its data lost is replaced by that agent itself (RepairJoin); only when several
// are lost at once, so that no join can pass etcd's check that every voter is connected, are their old
// IDs removed here first, one at a time.
func (s *Members) RemoveDead() bool {
	f := s.f
	all, healthy := f.Truth.Voters()
	for _, m := range f.Truth.Members {
		if m.Ordinal < 0 || !m.Voter() {
			continue
		}
		reason := ""
		switch {
		case m.Dead:
			reason = "dead"
		case lostData(f, m) && all-healthy > 1:
			reason = "data-lost"
		default:
			continue
		}
		if QuorumAllowsRemoving(f, m) {
			s.removeMember(m, reason)
			return true
		}
		s.wait(Removal, f.Names.Pod(m.Ordinal), "(member %s) is %s but removing it would break quorum", m.ID, reason)
		return true
	}
	return false
}

// joinable says whether ordinal i may be given join-permitted now, and why not.
// A replacement (the ordinal's old, unhealthy member goes first) needs every other voter healthy; no
// member joins while another defragments.
func (s *Members) joinable(i int) (bool, string) {
	f := s.f
	for _, m := range f.Truth.Members {
		if m.Voter() && !m.Healthy && m.Ordinal != i {
			return false, "every voter to be healthy before a member joins"
		}
	}
	if pvc := f.PVCs[i]; pvc != nil && pvc.DeletionTimestamp != nil {
		return false, fmt.Sprintf("claim %s to finish deleting", pvc.Name)
	}
	if who := Defragmenting(f); who != "" {
		return false, fmt.Sprintf("%s to finish defragmenting before %s joins", who, f.Names.Pod(i))
	}
	if what := s.in.RestartingInPlace; what != "" {
		return false, fmt.Sprintf("%s before %s joins", what, f.Names.Pod(i))
	}
	return true, ""
}

// permit lets ordinal i join, under the spec's promotion timeout.
func (s *Members) permit(i int) {
	s.Leases.Permit(i, s.f.Now, seconds(s.in.Spec.Timeouts.LearnerPromotionSeconds))
}

// RepairJoin lets a wanted ordinal below replicas (re)join when its agent asks: its member was removed,
// or it lost its data and must replace its old ID (the quorum rule applies to that removal). An ordinal
// whose agent does not ask (pod pending, node gone) blocks nothing.
func (s *Members) RepairJoin() bool {
	f := s.f
	for i := 0; i < int(s.Replicas) && i < TargetOf(s.in.Spec); i++ {
		m := f.Truth.Primary[i]
		lv := f.Leases[i]
		asking := lv != nil && lv.Fresh && lv.Report.Reason() == api.ReasonWaitingForJoin &&
			(f.Pods[i] == nil || string(f.Pods[i].UID) == lv.Holder)
		if m != nil && m.Healthy {
			continue
		}
		if !asking {
			continue // FloorReplicas says so
		}
		if m != nil && !QuorumAllowsRemoving(f, m) {
			s.wait(Join, f.Names.Pod(i), "lost its data but replacing member %s would break quorum", m.ID)
			continue
		}
		if ok, why := s.joinable(i); !ok {
			s.wait(Join, "", "%s", why)
			continue
		}
		s.permit(i)
		s.start(Join, fmt.Sprintf("%s to join the cluster", f.Names.Pod(i)))
		return true
	}
	return false
}

// ScaleDown asks a member above the target to leave (docs/design/07-steps.md §7.5): an unhealthy one
// first, since its removal costs no quorum, else the highest.
func (s *Members) ScaleDown() bool {
	f := s.f
	target := TargetOf(s.in.Spec)
	h := f.Truth.HighestOrdinal()
	if h < target {
		return false
	}
	for i := h; i >= target; i-- {
		if m := f.Truth.Primary[i]; m != nil && !m.Healthy && QuorumAllowsRemoving(f, m) {
			h = i
			break
		}
	}
	m := f.Truth.Primary[h]
	if !QuorumAllowsRemoving(f, m) {
		s.wait(Scale, "", "quorum does not allow %s to leave now", f.Names.Pod(h))
		return true
	}
	if who := Defragmenting(f); who != "" && m.Healthy {
		s.wait(Scale, who, "to finish defragmenting before %s leaves", f.Names.Pod(h))
		return true
	}
	if what := s.in.RestartingInPlace; what != "" && m.Healthy {
		s.wait(Scale, what, "before %s leaves", f.Names.Pod(h))
		return true
	}
	s.Leases.SetIntent(h, api.IntentLeave, f.Now)
	s.Leases.Lease(h).Join = api.JoinWindow{}
	leave := fmt.Sprintf("%s to leave the cluster", f.Names.Pod(h))
	if lv := f.Leases[h]; lv == nil || !lv.Fresh || lostData(f, m) {
		s.Action, s.Busy = leave, leave
		s.removeMember(m, "leave") // its agent cannot remove it
		s.wait(Scale, s.Action, "")
		return true
	}
	s.start(Scale, leave)
	return true
}

// ScaleUp raises replicas by one and permits the new ordinal to join.
func (s *Members) ScaleUp() bool {
	f := s.f
	if len(f.Truth.Primary) >= TargetOf(s.in.Spec) {
		return false
	}
	i := int(s.Replicas)
	for j := 0; j < i; j++ {
		if f.Truth.Primary[j] == nil {
			return false // RepairJoin handles holes below replicas
		}
	}
	if ok, why := s.joinable(i); !ok {
		s.wait(Scale, "", "%s", why)
		return true
	}
	if js := f.DeleteVolumeJobs[i]; len(js) > 0 && js[len(js)-1].State == facts.JobActive {
		s.wait(Scale, "", "the old claim of %s to be deleted", f.Names.Pod(i))
		return true
	}
	s.Replicas = int32(i + 1)
	s.permit(i)
	s.start(Scale, fmt.Sprintf("%s to join the cluster", f.Names.Pod(i)))
	return true
}
