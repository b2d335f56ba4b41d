package steps

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// Recovery from the freshest survivor (docs/design/19-recovery.md). Derived afresh at every sync from
// the reports, never from a record of its own: the plan is a function of what the members say, so a lost
// ConfigMap or status cannot make a second plan that disagrees with the first.
//
// It is allowed only when a quorum of the last known voters lost their data for good (their agents, in
// their current pods, report no data for deadMemberSeconds): the others together are then fewer than a
// quorum of the old membership and can never form one again, whoever comes back. Among them the member
// with the highest revision, then raft term (both reported while it knows no leader), then the lowest
// ordinal survives. Every other member that holds data is fenced first (its agent sets the data aside,
// never deletes it); members not heard from are waited for deadMemberSeconds, then fenced in their Lease
// for when they return. Then the survivor restarts as a one-member cluster on its data, and the others
// rejoin as learners through the usual grow, one at a time.

// RecoveryState is the plan, for the Lease intents and status.recovery (Decision.Recovery).
type RecoveryState struct {
	Status   *api.RecoveryStatus
	Token    string
	Survivor int // ordinal asked to force, -1 none
	// SurvivorID: the survivor's member ID, as its data holds it.
	SurvivorID string
	Fence      map[int]string // ordinal -> the member ID whose data it sets aside
}

// RecoveryInput is what Recovery reads of the decisions before it: the spec in force (ChooseSpec) and
// spec.paused.
type RecoveryInput struct {
	HasSpec bool
	Spec    api.ClusterSpec
	Paused  bool
}

// recoveryVoter is one last known voter as the plan sees it.
type recoveryVoter struct {
	name, id string
	ordinal  int
	report   *api.Report // fresh report of the member's agent in its current pod; nil otherwise
	lost     bool        // reports no data for deadMemberSeconds, or set its data aside for a recovery
	fenced   string      // the recovery token it set its data aside for ("" none)
	holds    bool        // reports this member's data (its member ID) and its revision
	// forcing: the last answer asked it to restart alone (observed) and it does not report healthy yet:
	// the plan keeps it while it restarts (its report says no revision meanwhile).
	forcing api.RecoverIntent
	since   time.Duration
}

// Recovery plans the recovery from the freshest survivor: which member survives, which are fenced, and
// what status.recovery says. Called with the quorum lost (no fresh report of a healthy voter); the plan
// (sync) writes the intents it returns on the member Leases.
func Recovery(f *facts.Facts, in RecoveryInput) RecoveryState {
	out := RecoveryState{Survivor: -1}
	if !in.HasSpec || !f.Bootstrapped || !f.Formed {
		return out
	}
	// The spec in force this sync (adopted now, or latched), not the record: the answer that adopts a
	// changed mode must say what the next one says.
	mode := in.Spec.QuorumLossMode()
	if mode == api.QuorumLossFromBackup {
		return out // the snapshot restore (sync/facts/inplace.go) answers it
	}
	deadAfter := time.Duration(*in.Spec.Timeouts.DeadMemberSeconds) * time.Second
	voters := recoveryVoters(f, deadAfter)
	st := &api.RecoveryStatus{Phase: api.RecoveryWaiting}
	out.Status = st
	var lost, holders, unheard, forcing []recoveryVoter
	for _, v := range voters {
		m := api.RecoveryMember{Name: v.name, MemberID: v.id}
		switch {
		case v.fenced != "":
			m.Holds = "data set aside (recovery " + v.fenced + ")"
			lost = append(lost, v)
		case v.lost:
			m.Holds = "no data (lost for good)"
			lost = append(lost, v)
		case v.forcing.Token != "":
			m.Holds = "restarting alone on its data (recovery " + v.forcing.Token + ")"
			forcing = append(forcing, v)
		case v.holds:
			m.Holds = fmt.Sprintf("revision %d, raft term %d", v.report.Revision, v.report.RaftTerm)
			if v.report.MemberID != v.id {
				m.Holds += " (as member " + v.report.MemberID + ")"
			}
			holders = append(holders, v)
		case v.report != nil && v.report.MemberID == "":
			m.Holds = fmt.Sprintf("no data for %s (lost after %s)", v.since.Round(time.Second), deadAfter)
			unheard = append(unheard, v)
		default:
			m.Holds = "not heard from"
			if v.since > 0 {
				m.Holds = fmt.Sprintf("not heard from for %s", v.since.Round(time.Second))
			}
			unheard = append(unheard, v)
		}
		st.Members = append(st.Members, m)
	}
	if len(voters) == 0 {
		st.Message = "no record of the voters (status.members): nothing can be planned"
		return out
	}
	if q := api.Quorum(len(voters)); len(lost) < q {
		var soon []string
		for _, v := range unheard {
			if v.report != nil && v.report.MemberID == "" {
				soon = append(soon, v.name)
			}
		}
		if len(lost)+len(soon) >= q {
			st.Message = fmt.Sprintf("%s report no data: they count as lost after %s without a ready pod (spec.timeouts.deadMemberSeconds)", strings.Join(soon, ", "), deadAfter)
			return out
		}
		st.Message = fmt.Sprintf("%d of %d voters lost their data for good, fewer than a quorum (%d): the others may still come back with theirs, and etcd recovers by itself then", len(lost), len(voters), q)
		return out
	}
	if len(forcing) > 0 {
		// The survivor asked restarts: its report has no revision until it answers again. The plan
		// stays the one asked, never a new one beside it.
		v := forcing[0]
		out.Token, out.SurvivorID, out.Survivor = v.forcing.Token, v.forcing.MemberID, v.ordinal
		st.Phase, st.Token, st.Survivor = api.RecoveryForcing, out.Token, v.name
		st.Message = fmt.Sprintf("%s restarts on its data as a one-member cluster; the others rejoin as learners, one at a time", v.name)
		return out
	}
	if len(holders) == 0 {
		st.Message = "no member that reports its data is left: restore from a backup (kubectl etcd restore NAME --in-place)"
		return out
	}
	sort.SliceStable(holders, func(a, b int) bool {
		ra, rb := holders[a].report, holders[b].report
		if ra.Revision != rb.Revision {
			return ra.Revision > rb.Revision
		}
		if ra.RaftTerm != rb.RaftTerm {
			return ra.RaftTerm > rb.RaftTerm
		}
		return holders[a].ordinal < holders[b].ordinal
	})
	s := holders[0]
	out.Token, out.SurvivorID = api.RecoveryToken(s.report.MemberID, s.report.Revision), s.report.MemberID
	st.Token, st.Survivor, st.Revision, st.RaftTerm = out.Token, s.name, s.report.Revision, s.report.RaftTerm
	st.Loses = recoveryLoses(s, holders[1:], unheard)
	for _, v := range unheard {
		if v.since < deadAfter {
			st.Message = fmt.Sprintf("%s: waiting %s for it before the plan is carried out (it may hold newer data)", v.name, (deadAfter - v.since).Round(time.Second))
			return out
		}
	}
	apply := strings.TrimSpace(f.Parent.Annotations[api.AnnRecoverApply])
	switch {
	case mode == api.QuorumLossFromSurvivor:
	case apply == out.Token:
	case apply != "":
		st.Phase = api.RecoveryPlanned
		st.Message = fmt.Sprintf("annotation %s %q is not this plan (%s): nothing done; kubectl etcd recover NAME --plan shows it", api.AnnRecoverApply, apply, out.Token)
		return out
	default:
		st.Phase = api.RecoveryPlanned
		st.Message = "spec.recovery.quorumLoss is Manual: kubectl etcd recover NAME --apply carries this plan out"
		return out
	}
	if in.Paused {
		st.Message = "spec.paused to be cleared"
		return out
	}
	// Fence every other member that holds data (and, for when they return, those not heard from), then
	// force the survivor once all that can answer set theirs aside.
	out.Fence = map[int]string{}
	pending := []string{}
	for _, v := range append(append([]recoveryVoter{}, holders[1:]...), unheard...) {
		id := v.id
		if v.holds {
			id = v.report.MemberID // the data's member, which the agent checks
		}
		if v.ordinal < 0 || id == "" {
			continue
		}
		out.Fence[v.ordinal] = id
		if v.holds {
			pending = append(pending, v.name)
		}
	}
	if len(pending) > 0 {
		st.Phase = api.RecoveryFencing
		st.Message = fmt.Sprintf("%s to set its data aside before %s restarts alone on its data", strings.Join(pending, ", "), s.name)
		return out
	}
	st.Phase = api.RecoveryForcing
	st.Message = fmt.Sprintf("%s restarts on its data as a one-member cluster; the others rejoin as learners, one at a time", s.name)
	out.Survivor = s.ordinal
	return out
}

// recoveryVoters are the last known voters (status.members: the hook keeps them while no member list
// is known), each with what its agent says.
func recoveryVoters(f *facts.Facts, deadAfter time.Duration) []recoveryVoter {
	var out []recoveryVoter
	for _, m := range f.Parent.Status.Members {
		if m.Role != api.RoleLeader && m.Role != api.RoleVoter {
			continue
		}
		v := recoveryVoter{name: m.Name, id: m.ID, ordinal: f.Names.PodOrdinal(m.Name)}
		i := v.ordinal
		if i < 0 {
			out = append(out, v)
			continue
		}
		lv := f.Leases[i]
		if lv != nil && !lv.Renewed.IsZero() {
			v.since = f.Now.Sub(lv.Renewed)
		}
		if lv != nil && lv.Recover.Role == api.RecoverSurvivor && !lv.Report.Healthy && (lv.Report.Revision == 0 || !lv.Fresh) &&
			(lv.Report.MemberID == lv.Recover.MemberID || lv.Report.MemberID == "" && m.ID == lv.Recover.MemberID) {
			// The survivor asked restarts alone: its report has no revision meanwhile, and its Lease may go
			// unrenewed while etcd stops. The plan stays the one asked, never a new one beside it.
			v.forcing = lv.Recover
			out = append(out, v)
			continue
		}
		// (A report of another parent reads empty already: readfacts.)
		r, ok := f.AgentReport(i)
		if !ok {
			out = append(out, v)
			continue
		}
		v.report = &r
		v.since = 0
		waiting, noData := f.WithoutData(i)
		switch {
		case r.MemberID == "" && r.Recovered != "":
			// Its data is set aside (fenced): it can only rejoin as a new member.
			v.lost, v.fenced = true, r.Recovered
		case noData:
			v.since, v.lost = waiting, waiting >= deadAfter
		case r.MemberID != "" && r.Revision > 0 && !r.Healthy && (r.ClusterID == "" || f.ClusterID == "" || r.ClusterID == f.ClusterID):
			// Its own data (an ordinal's data is the member its peer URL names; a member ID other than the
			// record's is one that rejoined since: still this ordinal's data of this cluster).
			v.holds = true
		}
		out = append(out, v)
	}
	return out
}

// recoveryLoses says what the plan loses, as far as the reports tell: the revisions another member
// holds beyond the survivor (none when it is the freshest of all that report), and whatever members not
// heard from hold.
func recoveryLoses(s recoveryVoter, others, unheard []recoveryVoter) string {
	var parts []string
	var ahead int64
	for _, v := range others {
		ahead = max(ahead, v.report.Revision-s.report.Revision)
	}
	if ahead > 0 {
		parts = append(parts, fmt.Sprintf("up to %d revisions another member holds", ahead))
	} else {
		parts = append(parts, "no revision another member that reports holds ("+s.name+" is the freshest)")
	}
	if len(unheard) > 0 {
		var names []string
		for _, v := range unheard {
			names = append(names, v.name)
		}
		parts = append(parts, "whatever "+strings.Join(names, ", ")+" (not heard from) may hold beyond revision "+fmt.Sprint(s.report.Revision))
	}
	parts = append(parts, "writes acknowledged by the lost members only, after the survivor's last entry")
	return strings.Join(parts, "; ")
}
