package render

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

// Status renders the parent status of what the decision d decided from the facts f, and changes neither.
// It holds no per-call clock values: lastTransitionTime is carried over while a condition's status is
// unchanged, so the same facts give the same status and no sync loop.
func Status(f *facts.Facts, d *steps.Decision) *api.ClusterStatus {
	st := &api.ClusterStatus{
		ObservedGeneration: f.Parent.Generation,
		Bootstrapped:       f.Bootstrapped,
		ClusterID:          f.ClusterID,
	}
	if d.HasSpec {
		st.Replicas = d.Replicas
	}
	if f.StatefulSet != nil {
		st.ReadyReplicas = f.StatefulSet.Status.ReadyReplicas
	} else {
		// A StatefulSet being made over running pods (sync/volumes.go) will count them: count them already.
		for i := range f.Pods {
			if f.PodReady(i) {
				st.ReadyReplicas++
			}
		}
	}
	if d.HasSpec {
		st.Target = &api.Target{Size: *d.Spec.Size, Version: d.Spec.Version}
	}
	st.Members = memberStatus(f, d)
	for _, m := range st.Members {
		if m.Role == api.RoleLeader {
			st.Leader = m.Name
		}
	}
	if len(f.Running) > 0 {
		st.CurrentVersion = f.Running[0].String()
	}
	// Before the conditions: a backup report it cannot use is noted as ignored input.
	st.Backup = backupStatus(f, d)
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
	case d.Restoring:
		add(api.CondAvailable, false, "RestoringInPlace", fmt.Sprintf("the data is being replaced by %q (%s)", d.InPlace.Request, d.InPlacePhase))
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
		if !m.Healthy && !d.ExpectedDown[m.ID] {
			unhealthy = append(unhealthy, facts.MemberName(f, m))
		}
	}
	creating := creating(f, d)
	switch {
	case d.Restoring:
		// Asked for: the members are down on purpose.
		add(api.CondDegraded, false, "RestoringInPlace", "")
	case creating:
		add(api.CondDegraded, false, "Creating", "")
	case d.QuorumLost:
		add(api.CondDegraded, true, "QuorumLost", "no voting member reports a healthy cluster")
	case len(unhealthy) > 0:
		add(api.CondDegraded, true, "MembersUnhealthy", "unhealthy: "+strings.Join(unhealthy, ", "))
	case d.Stalled != "":
		add(api.CondDegraded, true, "StepStalled", d.Stalled)
	case f.Bootstrapped && len(f.Truth.Primary) < d.Target() && d.HasSpec && !progressing(d) && d.Defragmenting == "":
		// (A grow waiting for a member to finish defragmenting is under way, not degraded.)
		add(api.CondDegraded, true, "MembersMissing", fmt.Sprintf("%d of %d members", len(f.Truth.Primary), d.Target()))
	default:
		add(api.CondDegraded, false, "AllMembersHealthy", "")
	}
	switch {
	case d.Stalled != "":
		add(api.CondProgressing, false, "StepDeadlineExceeded", d.Stalled)
	case d.Restoring && d.InPlaceFailure != "":
		// Stuck until a human acts (RestoreFailed says how): nothing is progressing.
		add(api.CondProgressing, false, "Waiting", d.InPlaceFailure)
	case d.Restoring:
		add(api.CondProgressing, true, "RestoringInPlace", message(d))
	case !f.Bootstrapped && d.HasSpec:
		add(api.CondProgressing, true, "Bootstrapping", message(d))
	case d.PendingSpec:
		add(api.CondProgressing, true, "SpecPending", "the new spec waits for: "+pendingFor(d))
	case d.Busy != "" && d.Growth:
		add(api.CondProgressing, true, "VolumeGrowth", d.Busy)
	case d.Busy != "":
		add(api.CondProgressing, true, "MembershipChange", d.Busy)
	case d.TLSSw.Active():
		add(api.CondProgressing, true, "TLSSwitch", message(d))
	case d.Rolling:
		add(api.CondProgressing, true, "RollingUpdate", message(d))
	case d.CARot.Active:
		add(api.CondProgressing, true, "CARotation", message(d))
	case len(d.Waiting) > 0:
		add(api.CondProgressing, false, "Waiting", message(d))
	default:
		add(api.CondProgressing, false, "Stable", "")
	}
	if d.QuorumLost && !creating {
		add(api.CondQuorumLost, true, "NoHealthyVoter", "no voting member reports a healthy cluster; membership is frozen. See README: Recovering from quorum loss")
	}
	if f.SplitBrain {
		add(api.CondSplitBrain, true, "ClusterIDMismatch", fmt.Sprintf("cluster IDs %s are reported; no membership change is made", strings.Join(f.ClusterIDs, ", ")))
	}
	if len(f.Distrusted)+len(d.Distrusted) > 0 {
		notes := append(slices.Clone(f.Distrusted), d.Distrusted...)
		sort.Strings(notes) // gathered from maps: one order, so the same request gives the same bytes
		add(api.CondInputIgnored, true, "ImpossibleInput", strings.Join(slices.Compact(notes), "; "))
	}
	if foreign := foreignData(f); foreign != "" {
		add(api.CondForeignData, true, "VolumeOfAnotherCluster", foreign)
	}
	if len(d.Problems) > 0 {
		var msgs []string
		for _, pr := range d.Problems {
			msgs = append(msgs, pr.Message)
		}
		add(api.CondInvalidSpec, true, d.Problems[0].Reason, strings.Join(msgs, "; ")+keptNote(f, d))
	}
	st.TLS = tlsStatus(f, d)
	st.Storage = storageStatus(f, d)
	st.Space = spaceStatus(d)
	st.Recovery = recoveryStatus(f, d)
	st.Auth = authStatus(f, d, add)
	st.Standby = standbyStatus(d, add)
	tlsConditions(f, d, st.TLS, add, userCertsExpiring(st.Auth, f.Now.Add(api.CertExpiringDays*24*time.Hour)))
	backupConditions(f, d, st.Backup, add)
	continuousConditions(f, d, st.Backup, add)
	copyConditions(d, st.Backup, add)
	databaseConditions(f, d, add)
	defragCondition(f, d, d.Defrag, add)
	if d.HasSpec && d.Spec.Network.PolicyOn() && !f.Observed.NetworkPoliciesDeclared {
		add(api.CondNetworkPolicyMissing, true, "NotRegistered", "spec.network.policy is on but the CompositeController does not declare networking.k8s.io/v1 networkpolicies: the members' ports are open to every pod; apply the current metacontroller/ registration (operations.md §11)")
	}
	st.Restore = restoreStatus(f, d, add)
	if rs := inPlaceStatus(f, d, add); rs != nil {
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
	if d.Paused {
		msg := "spec.paused: no membership change, roll or spec change is started; steps already in flight finish"
		if d.PendingSpec {
			msg += "; a spec change waits"
		}
		if !d.HasSpec {
			msg += "; nothing is created until it is unpaused"
		}
		add(api.CondPaused, true, "SpecPaused", msg)
	}
	if d.HasSpec && d.Target()%2 == 0 {
		add(api.CondEvenSize, true, "EvenSize", fmt.Sprintf("size %d tolerates no more failures than size %d", d.Target(), d.Target()-1))
	}
	if d.HasSpec && d.Target() <= 2 {
		add(api.CondLimitedDisruptionBudget, true, "SizeBelowThree",
			"the PodDisruptionBudget allows one member down (a quorum budget would block every drain), so a drain makes the cluster unavailable")
	}
	st.Conditions = carryTransitions(conds, f.Parent.Status.Conditions, f.Now)
	st.Phase = phase(f, d, available, len(unhealthy) > 0)
	// The message adds what holds the spec to the decision's waits; it changes nothing decided
	// (the resync pace among them).
	waits := slices.Clip(d.Waiting)
	if d.HasSpec && len(d.Problems) > 0 {
		waits = waits.Add(steps.Wait{Kind: steps.Spec, Detail: fmt.Sprintf("a valid spec (%s)", d.Problems[0].Message)})
	}
	if d.HasSpec && d.CertBlocked {
		waits = waits.Add(steps.Wait{Kind: steps.Spec, Detail: fmt.Sprintf("usable TLS Secrets (%s)", d.CertProblems[0])})
	}
	st.Message = waits.String()
	if !d.HasSpec && d.Paused {
		st.Message = "paused: nothing is created until spec.paused is false"
	}
	if !d.HasSpec && d.CertBlocked {
		st.Message = fmt.Sprintf("nothing is created until the TLS Secrets are usable: %s", d.CertProblems[0])
	}
	if !d.HasSpec && len(d.Problems) > 0 {
		st.Message = "nothing is created until the spec is valid: " + d.Problems[0].Message
		if d.Echo {
			st.Message = fmt.Sprintf("children are left exactly as they are until the spec is valid (the last valid spec is not recorded: ConfigMap %s is missing): %s", f.Names.ConfigMap(), d.Problems[0].Message)
		}
	}
	st.Message = boundMessage(st.Message)
	return st
}

// MaxMessageBytes bounds every message the hook writes into status (each condition's and
// status.message). The CRD allows 32768 for a condition's message; a longer one made the API server
// refuse the whole status write, so status froze (a 40 KB agent error, a long URL). Messages quote
// inputs, which are bounded (api/bounds.go) but add up: several members' errors, several ignored inputs.
const MaxMessageBytes = 4096

// boundMessage cuts msg to MaxMessageBytes on a character boundary and says how much was left out.
func boundMessage(msg string) string {
	if len(msg) <= MaxMessageBytes {
		return msg
	}
	kept := api.CutAt(msg, MaxMessageBytes-64)
	return fmt.Sprintf("%s… (%d more bytes)", kept, len(msg)-len(kept))
}

func pendingFor(d *steps.Decision) string {
	if d.Busy != "" {
		return d.Busy
	}
	return message(d)
}

func progressing(d *steps.Decision) bool {
	return d.Busy != "" || d.Rolling || d.PendingSpec || d.TLSSw.Active()
}

func foreignData(f *facts.Facts) string {
	var out []string
	for _, lv := range f.SortedLeases() {
		if lv.Report.Reason() == api.ReasonForeignData {
			out = append(out, fmt.Sprintf("%s: %s", f.Names.Pod(lv.Ordinal), lv.Report.Error))
		}
	}
	return strings.Join(out, "; ")
}

func message(d *steps.Decision) string { return d.Waiting.String() }

// creating: a new cluster has not yet had all its members healthy for the first time (the hook's record,
// ConfigMap key formed, says whether it ever had), and no step has stalled.
// Until then a seed that has not reported yet, or a learner on its way in, is the normal course of a
// create: neither Degraded nor QuorumLost is reported (a deadline that passes still is).
func creating(f *facts.Facts, d *steps.Decision) bool {
	return f.Bootstrapped && d.HasSpec && !f.Formed && d.Stalled == "" && !d.FormedNow(f)
}

func phase(f *facts.Facts, d *steps.Decision, available, unhealthy bool) string {
	obsPhase := f.Parent.Status.Phase
	switch {
	case d.Paused:
		return api.PhasePaused
	case d.Restoring:
		return api.PhaseRestoring
	case !d.HasSpec, f.SplitBrain, !f.Bootstrapped && foreignData(f) != "", seeding(d) && f.SeedRefused():
		return api.PhaseFailed
	case !f.Bootstrapped && seeding(d):
		return api.PhaseRestoring
	case !f.Bootstrapped, creating(f, d):
		return api.PhaseCreating
	case d.QuorumLost || !available || d.Stalled != "":
		return api.PhaseDegraded
	case obsPhase == "" && len(f.Truth.Primary) < d.Target():
		return api.PhaseCreating
	case unhealthy:
		return api.PhaseDegraded
	case d.Rolling:
		return api.PhaseUpgrading
	case d.Busy != "" && !d.BusyVolume || len(f.Truth.Primary) != d.Target() || d.PendingSpec:
		// Not while only cleanup is left (a removed member's pod stopping, its claim being deleted): the
		// cluster has its size; that took 5-7 s of every scale-down (e2e/RESULTS.md, timeline).
		return api.PhaseScaling
	}
	return api.PhaseRunning
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

func keptNote(f *facts.Facts, d *steps.Decision) string {
	if d.HasSpec && f.Applied != nil {
		return fmt.Sprintf(" (children keep the last valid spec: size %d, version %s)", *d.Spec.Size, d.Spec.Version)
	}
	return ""
}

// seeding says whether the seed restores a snapshot before its first start (spec.restore, or a
// standby's primary snapshot).
func seeding(d *steps.Decision) bool {
	r, _ := d.Spec.SeedRestore()
	return r != nil
}
