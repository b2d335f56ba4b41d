package sync

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// status renders the parent status. It holds no per-call clock values: lastTransitionTime is carried over
// while a condition's status is unchanged, so the same facts give the same status and no sync loop.
func (p *plan) status() *api.ClusterStatus {
	f := p.f
	st := &api.ClusterStatus{
		ObservedGeneration: f.Parent.Generation,
		Bootstrapped:       f.Bootstrapped,
		ClusterID:          f.ClusterID,
	}
	if p.HasSpec {
		st.Replicas = p.Replicas
	}
	if f.StatefulSet != nil {
		st.ReadyReplicas = f.StatefulSet.Status.ReadyReplicas
	} else {
		// A StatefulSet being made over running pods (volumes.go) will count them: count them already.
		for i := range f.Pods {
			if f.PodReady(i) {
				st.ReadyReplicas++
			}
		}
	}
	if p.HasSpec {
		st.Target = &api.Target{Size: *p.Spec.Size, Version: p.Spec.Version}
	}
	st.Members = p.memberStatus()
	for _, m := range st.Members {
		if m.Role == api.RoleLeader {
			st.Leader = m.Name
		}
	}
	if len(f.Running) > 0 {
		st.CurrentVersion = f.Running[0].String()
	}
	// Before the conditions: a backup report it cannot use is noted as ignored input.
	st.Backup = p.backupStatus()
	var conds []metav1.Condition
	add := func(typ string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		conds = append(conds, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: boundMessage(msg), ObservedGeneration: f.Parent.Generation})
	}
	all, healthy := f.Truth.Voters()
	available := f.Bootstrapped && f.Truth.Known() && !f.SplitBrain && healthy >= api.Quorum(all)
	switch {
	case p.Restoring:
		add(api.CondAvailable, false, "RestoringInPlace", fmt.Sprintf("the data is being replaced by %q (%s)", p.InPlace.Request, p.InPlacePhase))
	case available:
		add(api.CondAvailable, true, "QuorumHealthy", fmt.Sprintf("%d of %d voters healthy", healthy, all))
	case !f.Bootstrapped:
		add(api.CondAvailable, false, "NotBootstrapped", "the cluster has not been bootstrapped yet")
	case f.SplitBrain:
		add(api.CondAvailable, false, "SplitBrain", "members report different cluster IDs")
	default:
		add(api.CondAvailable, false, "NoQuorum", "no voting member reports a healthy cluster")
	}
	// Degraded means a member that should be healthy is not (not one a step takes down on purpose:
	// ExpectedDown); an old voter being replaced after data loss still counts.
	var unhealthy []string
	for _, m := range f.Truth.Members {
		if !m.Healthy && !p.ExpectedDown[m.ID] {
			unhealthy = append(unhealthy, facts.MemberName(f, m))
		}
	}
	creating := p.creating()
	switch {
	case p.Restoring:
		// Asked for: the members are down on purpose.
		add(api.CondDegraded, false, "RestoringInPlace", "")
	case creating:
		add(api.CondDegraded, false, "Creating", "")
	case p.QuorumLost:
		add(api.CondDegraded, true, "QuorumLost", "no voting member reports a healthy cluster")
	case len(unhealthy) > 0:
		add(api.CondDegraded, true, "MembersUnhealthy", "unhealthy: "+strings.Join(unhealthy, ", "))
	case p.Stalled != "":
		add(api.CondDegraded, true, "StepStalled", p.Stalled)
	case f.Bootstrapped && len(f.Truth.Primary) < p.Target() && p.HasSpec && !p.progressing() && p.Defragmenting == "":
		// (A grow waiting for a member to finish defragmenting is under way, not degraded.)
		add(api.CondDegraded, true, "MembersMissing", fmt.Sprintf("%d of %d members", len(f.Truth.Primary), p.Target()))
	default:
		add(api.CondDegraded, false, "AllMembersHealthy", "")
	}
	switch {
	case p.Stalled != "":
		add(api.CondProgressing, false, "StepDeadlineExceeded", p.Stalled)
	case p.Restoring && p.InPlaceFailure != "":
		// Stuck until a human acts (RestoreFailed says how): nothing is progressing.
		add(api.CondProgressing, false, "Waiting", p.InPlaceFailure)
	case p.Restoring:
		add(api.CondProgressing, true, "RestoringInPlace", p.message())
	case !f.Bootstrapped && p.HasSpec:
		add(api.CondProgressing, true, "Bootstrapping", p.message())
	case p.PendingSpec:
		add(api.CondProgressing, true, "SpecPending", "the new spec waits for: "+p.pendingFor())
	case p.Busy != "" && p.Growth:
		add(api.CondProgressing, true, "VolumeGrowth", p.Busy)
	case p.Busy != "":
		add(api.CondProgressing, true, "MembershipChange", p.Busy)
	case p.TLSSw.Active():
		add(api.CondProgressing, true, "TLSSwitch", p.message())
	case p.Rolling:
		add(api.CondProgressing, true, "RollingUpdate", p.message())
	case p.CARot.Active:
		add(api.CondProgressing, true, "CARotation", p.message())
	case len(p.Waiting) > 0:
		add(api.CondProgressing, false, "Waiting", p.message())
	default:
		add(api.CondProgressing, false, "Stable", "")
	}
	if p.QuorumLost && !creating {
		add(api.CondQuorumLost, true, "NoHealthyVoter", "no voting member reports a healthy cluster; membership is frozen. See README: Recovering from quorum loss")
	}
	if f.SplitBrain {
		add(api.CondSplitBrain, true, "ClusterIDMismatch", fmt.Sprintf("cluster IDs %s are reported; no membership change is made", strings.Join(f.ClusterIDs, ", ")))
	}
	if len(f.Distrusted)+len(p.Distrusted) > 0 {
		notes := append(slices.Clone(f.Distrusted), p.Distrusted...)
		sort.Strings(notes) // gathered from maps: one order, so the same request gives the same bytes
		add(api.CondInputIgnored, true, "ImpossibleInput", strings.Join(slices.Compact(notes), "; "))
	}
	if foreign := p.foreignData(); foreign != "" {
		add(api.CondForeignData, true, "VolumeOfAnotherCluster", foreign)
	}
	if len(p.Problems) > 0 {
		var msgs []string
		for _, pr := range p.Problems {
			msgs = append(msgs, pr.Message)
		}
		add(api.CondInvalidSpec, true, p.Problems[0].Reason, strings.Join(msgs, "; ")+p.keptNote())
	}
	st.TLS = p.tlsStatus()
	st.Storage = p.storageStatus()
	st.Space = p.spaceStatus()
	st.Recovery = p.recoveryStatus()
	st.Auth = p.authStatus(add)
	p.tlsConditions(st.TLS, add, p.userCertsExpiring(st.Auth, f.Now.Add(api.CertExpiringDays*24*time.Hour)))
	p.backupConditions(st.Backup, add)
	p.continuousConditions(st.Backup, add)
	p.copyConditions(st.Backup, add)
	p.databaseConditions(add)
	p.defragCondition(p.Defrag, add)
	if p.HasSpec && p.Spec.Network.PolicyOn() && !f.Observed.NetworkPoliciesDeclared {
		add(api.CondNetworkPolicyMissing, true, "NotRegistered", "spec.network.policy is on but the CompositeController does not declare networking.k8s.io/v1 networkpolicies: the members' ports are open to every pod; apply the current metacontroller/ registration (operations.md §11)")
	}
	st.Restore = p.restoreStatus(add)
	if rs := p.inPlaceStatus(add); rs != nil {
		st.Restore = rs
	}
	if why := f.InPlace.Refusal; why != "" {
		// Named by its value (as Redact quotes it): a client that set a new value tells the refusal of
		// its own from an older one still shown (kubectl etcd restore --in-place).
		if req := f.InPlace.RestoreFrom; req != "" && !strings.Contains(why, strconv.Quote(backup.Redact(req))) {
			why = fmt.Sprintf("%s %q: %s", api.AnnRestoreFrom, backup.Redact(req), why)
		}
		add(api.CondRestoreFailed, true, "InvalidRestoreRequest", why+": nothing was changed (a value is acted on once: set another to try again)")
	}
	if p.Paused {
		msg := "spec.paused: no membership change, roll or spec change is started; steps already in flight finish"
		if p.PendingSpec {
			msg += "; a spec change waits"
		}
		if !p.HasSpec {
			msg += "; nothing is created until it is unpaused"
		}
		add(api.CondPaused, true, "SpecPaused", msg)
	}
	if p.HasSpec && p.Target()%2 == 0 {
		add(api.CondEvenSize, true, "EvenSize", fmt.Sprintf("size %d tolerates no more failures than size %d", p.Target(), p.Target()-1))
	}
	if p.HasSpec && p.Target() <= 2 {
		add(api.CondLimitedDisruptionBudget, true, "SizeBelowThree",
			"the PodDisruptionBudget allows one member down (a quorum budget would block every drain), so a drain makes the cluster unavailable")
	}
	st.Conditions = carryTransitions(conds, f.Parent.Status.Conditions, f.Now)
	st.Phase = p.phase(available, len(unhealthy) > 0)
	// The message adds what holds the spec to the plan's waits; it changes nothing the plan decided
	// (the resync pace among them).
	waits := slices.Clip(p.Waiting)
	if p.HasSpec && len(p.Problems) > 0 {
		waits = waits.Add(steps.Wait{Kind: steps.Spec, Detail: fmt.Sprintf("a valid spec (%s)", p.Problems[0].Message)})
	}
	if p.HasSpec && p.CertBlocked {
		waits = waits.Add(steps.Wait{Kind: steps.Spec, Detail: fmt.Sprintf("usable TLS Secrets (%s)", p.CertProblems[0])})
	}
	st.Message = waits.String()
	if !p.HasSpec && p.Paused {
		st.Message = "paused: nothing is created until spec.paused is false"
	}
	if !p.HasSpec && p.CertBlocked {
		st.Message = fmt.Sprintf("nothing is created until the TLS Secrets are usable: %s", p.CertProblems[0])
	}
	if !p.HasSpec && len(p.Problems) > 0 {
		st.Message = "nothing is created until the spec is valid: " + p.Problems[0].Message
		if p.Echo {
			st.Message = fmt.Sprintf("children are left exactly as they are until the spec is valid (the last valid spec is not recorded: ConfigMap %s is missing): %s", f.Names.ConfigMap(), p.Problems[0].Message)
		}
	}
	st.Message = boundMessage(st.Message)
	return st
}

// maxMessageBytes bounds every message the hook writes into status (each condition's and
// status.message). The CRD allows 32768 for a condition's message; a longer one made the API server
// refuse the whole status write, so status froze (a 40 KB agent error, a long URL). Messages quote
// inputs, which are bounded (api/bounds.go) but add up: several members' errors, several ignored inputs.
const maxMessageBytes = 4096

// boundMessage cuts msg to maxMessageBytes on a character boundary and says how much was left out.
func boundMessage(msg string) string {
	if len(msg) <= maxMessageBytes {
		return msg
	}
	kept := api.CutAt(msg, maxMessageBytes-64)
	return fmt.Sprintf("%s… (%d more bytes)", kept, len(msg)-len(kept))
}

func (p *plan) pendingFor() string {
	if p.Busy != "" {
		return p.Busy
	}
	return p.message()
}

func (p *plan) progressing() bool {
	return p.Busy != "" || p.Rolling || p.PendingSpec || p.TLSSw.Active()
}

func (p *plan) foreignData() string {
	var out []string
	for _, lv := range p.f.SortedLeases() {
		if lv.Report.Reason() == api.ReasonForeignData {
			out = append(out, fmt.Sprintf("%s: %s", p.f.Names.Pod(lv.Ordinal), lv.Report.Error))
		}
	}
	return strings.Join(out, "; ")
}

func (p *plan) message() string { return p.Waiting.String() }

// creating: a new cluster has not yet had all its members healthy for the first time (the hook's record,
// ConfigMap key formed, says whether it ever had), and no step has stalled.
// Until then a seed that has not reported yet, or a learner on its way in, is the normal course of a
// create: neither Degraded nor QuorumLost is reported (a deadline that passes still is).
func (p *plan) creating() bool {
	f := p.f
	return f.Bootstrapped && p.HasSpec && !f.Formed && p.Stalled == "" && !p.FormedNow(p.f)
}

func (p *plan) phase(available, unhealthy bool) string {
	f := p.f
	obsPhase := f.Parent.Status.Phase
	switch {
	case p.Paused:
		return api.PhasePaused
	case p.Restoring:
		return api.PhaseRestoring
	case !p.HasSpec, f.SplitBrain, !f.Bootstrapped && p.foreignData() != "", p.Spec.Restore != nil && f.SeedRefused():
		return api.PhaseFailed
	case !f.Bootstrapped && p.Spec.Restore != nil:
		return api.PhaseRestoring
	case !f.Bootstrapped, p.creating():
		return api.PhaseCreating
	case p.QuorumLost || !available || p.Stalled != "":
		return api.PhaseDegraded
	case obsPhase == "" && len(f.Truth.Primary) < p.Target():
		return api.PhaseCreating
	case unhealthy:
		return api.PhaseDegraded
	case p.Rolling:
		return api.PhaseUpgrading
	case p.Busy != "" && !p.BusyVolume || len(f.Truth.Primary) != p.Target() || p.PendingSpec:
		// Not while only cleanup is left (a removed member's pod stopping, its claim being deleted): the
		// cluster has its size; that took 5-7 s of every scale-down (e2e/RESULTS.md, timeline).
		return api.PhaseScaling
	}
	return api.PhaseRunning
}

// memberStatus lists the truth's members; without a member list the last known members are kept, unhealthy.
func (p *plan) memberStatus() []api.MemberStatus {
	f := p.f
	if !f.Truth.Known() {
		var out []api.MemberStatus
		for _, m := range f.Parent.Status.Members {
			m.Healthy = false
			out = append(out, m)
		}
		return out
	}
	out := []api.MemberStatus{}
	for _, m := range f.Truth.Members {
		ms := api.MemberStatus{ID: m.ID, PeerURL: m.PeerURL, ClientURL: m.ClientURL, Healthy: m.Healthy, Version: m.Version, Role: api.RoleVoter,
			DBSize: m.DBSize, DBSizeInUse: m.DBSizeInUse, LastDefragTime: m.LastDefrag}
		switch {
		case m.Learner:
			ms.Role = api.RoleLearner
		case m.ID == f.Truth.LeaderID:
			ms.Role = api.RoleLeader
		}
		ms.Name = facts.MemberName(f, m)
		if m.Ordinal >= 0 && ms.ClientURL == "" {
			ms.ClientURL = p.Names.ClientURL(m.Ordinal)
		}
		out = append(out, ms)
	}
	return out
}

// carryTransitions keeps lastTransitionTime from the observed condition of the same type and status.
func carryTransitions(conds, observed []metav1.Condition, now time.Time) []metav1.Condition {
	old := map[string]metav1.Condition{}
	for _, c := range observed {
		old[c.Type] = c
	}
	for i := range conds {
		if o, ok := old[conds[i].Type]; ok && o.Status == conds[i].Status && !o.LastTransitionTime.IsZero() {
			conds[i].LastTransitionTime = o.LastTransitionTime
		} else {
			conds[i].LastTransitionTime = metav1.NewTime(now.UTC().Truncate(1e9))
		}
	}
	sort.SliceStable(conds, func(i, j int) bool { return conds[i].Type < conds[j].Type })
	return conds
}
