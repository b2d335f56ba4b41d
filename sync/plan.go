package sync

import (
	"fmt"
	"sort"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/render"
)

// Timing of Jobs and resyncs.
const (
	succeededJobGrace = 2 * time.Minute
	retryBackoffBase  = 30 * time.Second
	retryBackoffMax   = 10 * time.Minute
	maxAttempts       = 99
	resyncBusySeconds = 5
	resyncIdleSeconds = 60
)

// plan is the outcome of one decision: what to render and what to say in status.
type plan struct {
	f        *facts
	opts     Options
	spec     api.ClusterSpec // rendered from
	hasSpec  bool
	problems []api.Problem // why the user's spec is not (yet) applied
	// certProblems: what is wrong with the user's TLS Secrets; certBlocked: the spec was not adopted
	// because of them.
	certProblems []certProblem
	certBlocked  bool
	// paused: spec.paused (pause.go).
	paused bool
	// pendingSpec: a valid new spec waits for the step in flight.
	pendingSpec bool

	replicas  int32
	partition int32
	hash      string
	leases    map[int]*api.Intent // the hook's half of each member Lease, by ordinal
	jobs      []render.Job        // new Jobs and carried-over observed ones

	// busy names the membership change in flight ("" when none); action the change started this sync.
	busy    string
	action  string
	waiting []string // what the hook waits for, in order
	stalled string   // a step past its deadline
	rolling bool
	// cleanup: pods or volumes of removed ordinals are still to go.
	cleanup bool
	// busyVolume: the step in flight (busy) only touches volumes: deletes a removed member's, grows a
	// member's claim or re-creates the StatefulSet for its claim template (the cluster has its size).
	busyVolume bool
	// growing: the claim whose growth Job this answer starts; growth: the step in flight (busy) grows
	// volumes (volumes.go).
	growing string
	growth  bool
	// rollingTo: the revision the roll in progress brings the members to (ConfigKeyRollingTo).
	rollingTo string
	// rollHeld: the next roll step waits for quorum.
	rollHeld bool
	// removing: a remove Job was made this sync.
	removing bool
	// unsafe reasons block actions (QuorumLost, SplitBrain).
	quorumLost bool
	// released: observed children the plan deletes on purpose ("key/name" -> reason).
	released map[string]string
	// defrag: the defragmentation pass due and the member asked (defrag.go).
	defrag defragState
	// caRot: the CA rotation's step and restart (carotation.go).
	caRot caRotationState
	// tlsSw: where a switch of spec.security.tls.enabled stands (tlsswitch.go); tlsWaitsForCA: a new
	// spec switching TLS waits for a CA rotation in progress (whose restarts go on meanwhile).
	tlsSw         tlsSwitchState
	tlsWaitsForCA bool

	// In-place restore (inplace.go): the record to write; restoring while one runs; why it is stuck.
	inPlace        *inPlaceRecord
	restoring      bool
	inPlaceFailure string
}

func (p *plan) wait(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for _, w := range p.waiting {
		if w == msg {
			return
		}
	}
	p.waiting = append(p.waiting, msg)
}

// target is the latched size; 0 when there is no spec to render from.
func (p *plan) target() int {
	if p.spec.Size == nil {
		return 0
	}
	return int(*p.spec.Size)
}

func (p *plan) timeout(secs *int32) time.Duration { return time.Duration(*secs) * time.Second }

func (p *plan) lease(i int) *api.Intent {
	lp := p.leases[i]
	if lp == nil {
		lp = &api.Intent{}
		p.leases[i] = lp
	}
	return lp
}

func (p *plan) setIntent(i int, intent string) {
	lp := p.lease(i)
	if lp.Kind != intent {
		lp.Kind = intent
		lp.Since = p.f.now.UTC().Format(time.RFC3339)
	}
}

func (p *plan) permit(i int) {
	p.setIntent(i, api.IntentMember)
	lp := p.lease(i)
	lp.Join = api.NewJoinWindow(p.f.now, p.timeout(p.spec.Timeouts.LearnerPromotionSeconds))
}

// decide runs the membership protocol of docs/design/06-sync-order.md §6 for one sync.
func decide(f *facts, opts Options) (*plan, error) {
	p := &plan{f: f, opts: opts.withDefaults(), leases: map[int]*api.Intent{}}
	p.carry()
	// Intents are judged against the spec in force when they were written (the applied one): a
	// hand-edited intent must not even make a step look in flight.
	ref := api.Defaulted(api.WithAppliedDefaults(f.parent.Spec, f.applied))
	if f.applied != nil {
		ref = *f.applied
	}
	p.normalizeIntents(ref)
	if err := p.chooseSpec(); err != nil {
		return nil, err
	}
	if !p.hasSpec {
		return p, nil
	}
	// Every URL the plan renders (Job endpoints, status) has the scheme every member serves now.
	p.decideTLSMode()
	f.names.TLS = p.clientHTTPS()
	p.hash = render.TemplateHash(render.PodTemplate(p.templateInput()))
	p.keepJobs()
	p.keepVolumeJobs()
	// A restore in flight goes on while paused (steps in flight finish); none starts (chooseInPlace).
	if p.decideInPlace() {
		p.releaseRestoreJobs()
		return p, nil
	}
	p.releaseRestoreJobs()
	if p.paused {
		p.pause()
		p.askPeerSwitch(false)
		p.askCARotation()
		p.askDefrag()
		return p, nil
	}
	switch {
	case !f.bootstrapped:
		p.bootstrap()
	case f.splitBrain:
		p.wait("two cluster IDs %v are reported: no membership change is made until a human resolves it", f.clusterIDs)
	case !f.truthKnown():
		p.quorumLost = true
		p.wait("no voting member reports a healthy cluster; waiting for quorum (see README: Recovering from quorum loss)")
		p.roll(false)
	default:
		p.reconcile()
	}
	p.floorReplicas()
	p.trimLeases()
	p.askPeerSwitch(f.bootstrapped && !f.splitBrain)
	p.askCARotation()
	p.askDefrag()
	if f.bootstrapped && f.truthKnown() {
		p.noteStalledJoins()
	}
	return p, nil
}

// carry starts from what was observed: replicas, partition, the hook's Lease intents.
func (p *plan) carry() {
	f := p.f
	p.replicas = 1
	if f.sts != nil && f.sts.Spec.Replicas != nil {
		p.replicas = *f.sts.Spec.Replicas
	}
	if p.replicas > api.MaxSize || p.replicas < 0 {
		// The hook never renders more than MaxSize: a larger count is a hand edit (kubectl scale), never
		// a number to render from.
		f.distrusted = append(f.distrusted, fmt.Sprintf("StatefulSet %s has replicas %d, outside 0..%d: not taken as a floor", f.names.StatefulSet(), p.replicas, api.MaxSize))
		p.replicas = api.MaxSize
	}
	if f.sts != nil && f.sts.Spec.UpdateStrategy.RollingUpdate != nil && f.sts.Spec.UpdateStrategy.RollingUpdate.Partition != nil {
		p.partition = *f.sts.Spec.UpdateStrategy.RollingUpdate.Partition
	}
	if p.partition < 0 || p.partition > api.MaxSize {
		p.partition = api.MaxSize
	}
	for i, lv := range f.leases {
		lp := p.lease(i)
		lp.Kind, lp.Since, lp.Join = lv.intent, lv.intentSince, lv.join
	}
}

// chooseSpec latches the spec: a valid spec is adopted unless a membership step is in flight; an invalid
// one leaves the last applied spec (read from the ConfigMap, not from the request) in force.
func (p *plan) chooseSpec() error {
	f := p.f
	// Defaults and the change rules come from the record even when it is not rendered from (recorded):
	// a cluster an older hook recorded under looser rules still runs what it says.
	cand := api.Defaulted(api.WithAppliedDefaults(f.parent.Spec, f.recorded))
	cand.Paused = false // a switch, not part of the spec the children are rendered from
	p.paused = f.parent.Spec.Paused
	p.problems = api.Validate(f.names.Cluster, cand)
	if f.obs.SpecError != "" {
		p.problems = append([]api.Problem{{Reason: "SpecDoesNotDecode", Message: "spec: " + f.obs.SpecError}}, p.problems...)
	}
	if len(p.problems) == 0 {
		p.problems = api.ValidateChange(f.recorded, cand, f.running, f.imageVersions, f.storageFloor())
	}
	if len(p.problems) == 0 && f.recorded != nil && !sameTLSSecretNames(f.recorded.Security.TLS, cand.Security.TLS) && f.tlsSwitchSeen() {
		// Members still serve the certificates of the Secrets they started on: another Secret can mean
		// another CA, which peers on TLS would refuse (docs/design/14-tls.md §14.8).
		p.problems = append(p.problems, api.Problem{Reason: "TLSSecretChange", Message: "spec.security.tls peer/client secretName cannot change while TLS is being switched (status.tls.switch): set them back, and change them once the switch is over"})
	}
	valid := len(p.problems) == 0
	switch {
	case valid:
		// The user's TLS Secrets (docs/design/14-tls.md §14.5): while one is unusable no spec change is adopted
		// (a new or restarted pod could not start: the new spec may add members or roll them), and the
		// roll holds (roll.go); a Secret that goes bad under an unchanged spec changes nothing rendered
		// (the running members keep their files).
		p.certProblems = checkTLSSecrets(f, f.secretsToCheck(cand))
		if len(p.certProblems) > 0 && (f.applied == nil || !specEqual(*f.applied, cand)) {
			valid, p.certBlocked = false, true
		}
	case f.applied != nil && sameTLSSecrets(*f.applied, cand):
		// Only Secrets the request's spec names are related: the applied spec's are known only when
		// they are the same.
		p.certProblems = checkTLSSecrets(f, f.secretsToCheck(*f.applied))
	}
	if p.paused {
		// Nothing new is adopted while paused: the recorded spec stays in force (a new cluster gets
		// nothing until it is unpaused).
		if f.applied != nil {
			p.spec, p.hasSpec = *f.applied, true
			p.pendingSpec = valid && !specEqual(*f.applied, cand)
		}
		return nil
	}
	switch {
	case f.applied == nil && valid && f.recorded != nil && p.inFlight() != "":
		// A record that is not rendered from, and a step in flight: the new spec waits as it would
		// behind a valid record, and the children stay as they are meanwhile.
		p.pendingSpec = true
		p.wait("%s to finish before the spec is adopted (the recorded spec fails validation: nothing is rendered from it)", p.inFlight())
	case f.applied == nil && valid:
		p.spec, p.hasSpec = cand, true
	case f.applied == nil:
		// No spec to render from. Existing children are answered unchanged (echoLastApplied) and
		// status says why: a 4xx would freeze status and every repair along with it.
	case valid && !specEqual(*f.applied, cand) && p.inFlight() != "":
		p.spec, p.hasSpec, p.pendingSpec = *f.applied, true, true
	case valid && f.applied.Security.TLS.TLSOn() != cand.Security.TLS.TLSOn() && f.caRotationUnderway():
		// A CA rotation finishes first: its restarts and a switch's peer URL moves are one kind of step,
		// and the switch renders the certificates the rotation is replacing.
		p.spec, p.hasSpec, p.pendingSpec, p.tlsWaitsForCA = *f.applied, true, true, true
		p.wait("the CA rotation to finish before TLS is switched %s", onOff(cand.Security.TLS.TLSOn()))
	case valid && f.applied.Security.TLS.TLSOn() != cand.Security.TLS.TLSOn() && !f.truthKnown():
		// Without a member list the template's TLS cannot be derived (tlsswitch.go): a switch adopted now
		// would render the final template over members whose peer URLs are on the other scheme.
		p.spec, p.hasSpec, p.pendingSpec = *f.applied, true, true
		p.wait("a healthy quorum before TLS is switched %s", onOff(cand.Security.TLS.TLSOn()))
	case valid:
		p.spec, p.hasSpec = cand, true
	default:
		p.spec, p.hasSpec = *f.applied, true
	}
	return nil
}

// inFlight names the membership change under way, judged from observed objects alone.
func (p *plan) inFlight() string {
	what, _ := p.stepInFlight()
	return what
}

// stepInFlight is inFlight, and whether that step is only the deletion of a removed member's volume
// (housekeeping: it holds the next step, but the cluster has its size).
func (p *plan) stepInFlight() (what string, volume bool) {
	f := p.f
	// (While its snapshot is verified the cluster serves as before: nothing of it is held.)
	if r := f.inPlace; r.inFlight() && !r.Verifying {
		return fmt.Sprintf("the in-place restore of %q", r.Request), false
	}
	for _, id := range sortedKeys(f.removeJobs) {
		js := f.removeJobs[id]
		last := js[len(js)-1]
		if last.state == jobActive {
			return fmt.Sprintf("Job %s removing member %s", last.job.Name, id), false
		}
		if last.state == jobSucceeded && f.member(id) != nil && f.now.Sub(last.finished) < succeededJobGrace {
			return fmt.Sprintf("member %s to leave the member list after Job %s", id, last.job.Name), false
		}
	}
	for _, i := range sortedKeys(f.pvcJobs) {
		js := f.pvcJobs[i]
		if js[len(js)-1].state == jobActive {
			return fmt.Sprintf("Job %s deleting the volume of %s", js[len(js)-1].job.Name, f.names.Pod(i)), true
		}
	}
	if what := p.volumeStepInFlight(); what != "" {
		return what, true
	}
	if m := f.learner(); m != nil {
		return fmt.Sprintf("learner %s (%s) to be promoted", m.ID, m.PeerURL), false
	}
	// The Lease intents as normalised (carry, normalizeIntents), never the raw observed ones.
	for _, i := range sortedKeys(p.leases) {
		lp := p.leases[i]
		m := f.primary[i]
		if lp.Kind == api.IntentLeave && m != nil && p.quorumAllowsRemoving(m) {
			return fmt.Sprintf("%s to leave the cluster", f.names.Pod(i)), false
		}
		if p.joining(i) && (m == nil || !f.reportsHealthyVoter(i, m.ID)) {
			return fmt.Sprintf("%s to join the cluster", f.names.Pod(i)), false
		}
	}
	return "", false
}

// adoptFloor raises floor to cover every ordinal with a claim when the spec adopts existing data: a
// cluster re-created on the kept claims of an old one must start all of the old members together, since
// pod 0 alone runs on one member's data and can never reach the old quorum. A claim of a member that was
// removed makes its agent wait for a join; a seed is only ever used on an empty volume.
func (p *plan) adoptFloor(floor int32) int32 {
	if !p.spec.AdoptExistingData {
		return floor
	}
	for i, pvc := range p.f.pvcs {
		if pvc.DeletionTimestamp == nil && int32(i+1) > floor {
			floor = int32(i + 1)
		}
	}
	return floor
}

// normalizeIntents re-derives the hook-owned half of every Lease from what the hook itself would have
// written: it never passes through a value it did not decide (a hand edit, a typo, a second writer).
//   - an intent other than member or leave is dropped (trimLeases sets it again);
//   - leave is only ever asked of ordinals at or above the target, one member at a time (the highest);
//   - intent-since must parse and not be in the future;
//   - a join permission must parse, start no later than now and end no later than one promotion timeout
//     after it starts; at most one ordinal holds one: the learner's if a join is under way, else the
//     lowest (etcd admits one learner at a time, so a second permission could only race the first).
func (p *plan) normalizeIntents(ref api.ClusterSpec) {
	f := p.f
	note := func(format string, args ...any) { f.distrusted = append(f.distrusted, fmt.Sprintf(format, args...)) }
	target := 0
	if ref.Size != nil {
		target = int(*ref.Size)
	}
	maxWindow := api.MaxLearnerPromotionSeconds * time.Second
	if t := ref.Timeouts.LearnerPromotionSeconds; t != nil && *t > 0 && *t <= api.MaxLearnerPromotionSeconds {
		maxWindow = time.Duration(*t) * time.Second
	}
	leaving := -1
	for _, i := range sortedKeys(p.leases) {
		lp := p.leases[i]
		switch lp.Kind {
		case "", api.IntentMember:
		case api.IntentLeave:
			if i < target && f.primary[i] != nil {
				note("%s carried intent leave below the target size: set back to member", f.names.Lease(i))
				p.setIntent(i, api.IntentMember)
			} else if f.primary[i] != nil {
				leaving = i // the highest wins: sortedKeys is ascending
			}
		default:
			note("%s carried an unknown intent %q: re-derived", f.names.Lease(i), lp.Kind)
			lp.Kind, lp.Since = "", ""
		}
		if lp.Since != "" {
			if t, err := time.Parse(time.RFC3339, lp.Since); err != nil || t.After(f.now.Add(MaxClockSkew)) {
				note("%s carried intent-since %q, not a past time: reset", f.names.Lease(i), lp.Since)
				lp.Since = f.now.UTC().Format(time.RFC3339)
			}
		}
		if w := lp.Join; !w.IsZero() {
			if w.From.After(f.now.Add(MaxClockSkew)) || w.Until.Sub(w.From) > maxWindow {
				permitted, deadline := w.Annotations()
				note("%s carried a join permission %q..%q the hook never writes: dropped", f.names.Lease(i), permitted, deadline)
				lp.Join = api.JoinWindow{}
			} else if f.truthKnown() && i >= target && f.primary[i] == nil {
				note("%s carried a join permission above the target size: dropped", f.names.Lease(i))
				lp.Join = api.JoinWindow{}
			}
		}
	}
	for _, i := range sortedKeys(p.leases) {
		if lp := p.leases[i]; lp.Kind == api.IntentLeave && f.primary[i] != nil && i != leaving {
			note("%s carried a second leave intent: only one member leaves at a time", f.names.Lease(i))
			p.setIntent(i, api.IntentMember)
		}
	}
	keep := -1
	if m := f.learner(); m != nil && m.ordinal >= 0 && p.leases[m.ordinal] != nil && !p.leases[m.ordinal].Join.IsZero() {
		keep = m.ordinal
	}
	for _, i := range sortedKeys(p.leases) {
		lp := p.leases[i]
		if lp.Join.IsZero() {
			continue
		}
		if keep < 0 {
			keep = i
		}
		if i != keep {
			note("%s carried a second join permission: only one member joins at a time", f.names.Lease(i))
			lp.Join = api.JoinWindow{}
		}
	}
}

// bootstrap: replicas 1, the seed may start "new" (docs/design/07-steps.md §7.1). Nothing else happens before a cluster ID exists.
func (p *plan) bootstrap() {
	f := p.f
	p.replicas = p.adoptFloor(1)
	p.setIntent(0, api.IntentMember)
	p.lease(0).Seed = true
	p.busy = "bootstrap"
	if lv := f.leases[0]; lv != nil && lv.report.Reason() == api.ReasonForeignData {
		p.wait("%s refuses its volume: %s", f.names.Pod(0), lv.report.Error)
		return
	}
	p.wait("%s to bootstrap the cluster", f.names.Pod(0))
}

// reconcile is the normal path: cluster bootstrapped, one cluster ID, a healthy voter's member list known.
func (p *plan) reconcile() {
	p.busy, p.busyVolume = p.stepInFlight()
	p.growth = p.busy != "" && p.busy == p.volumeStepInFlight()
	p.advanceJoins()
	p.advanceLeave()
	p.advanceLearner()
	if p.busy != "" {
		p.wait("%s", p.busy)
		p.roll(false)
		return
	}
	// A StatefulSet that has not observed the hook's last write may still act on the one before:
	// nothing new starts until it has (silently: the lag is normal and short).
	if f := p.f; f.sts != nil && f.sts.Status.ObservedGeneration < f.sts.Generation {
		p.roll(false)
		return
	}
	for _, step := range []func() bool{p.removeOrphan, p.removeDead, p.repairJoin, p.deleteVolume} {
		if step() {
			// The roll is still evaluated (and may step over a pod that is down anyway) so that the
			// status reads the same whichever path a sync takes.
			p.roll(false)
			return
		}
	}
	// Shrinking goes before a roll (fewer pods to restart, and a leaving pod need not become healthy
	// first); a roll goes before growing, unless quorum holds it and members are missing: a cluster
	// growing from two voters may add its third before any restart is safe.
	if p.scaleDown() {
		p.roll(false)
		return
	}
	if p.roll(true) && !(p.rollHeld && len(p.f.primary) < p.target()) {
		return
	}
	if p.scaleUp() {
		return
	}
	p.growVolumes()
}

// member finds a truth member by ID.
func (f *facts) member(id string) *memberView {
	for _, m := range f.members {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// quorumAllowsRemoving applies the quorum rule of docs/design/08-safety-rules.md §8.2 to removing m.
func (p *plan) quorumAllowsRemoving(m *memberView) bool {
	all, healthy := p.f.voters()
	return api.RemovalAllowed(all, healthy, m.Learner, m.healthy) == nil
}

// advanceJoins clears join permissions of finished joins and of ordinals no longer wanted.
func (p *plan) advanceJoins() {
	f := p.f
	for _, i := range sortedKeys(p.leases) {
		lp := p.leases[i]
		if lp.Join.IsZero() {
			continue
		}
		m := f.primary[i]
		switch {
		case m != nil && !m.Learner && f.reportsHealthyVoter(i, m.ID):
			lp.Join = api.JoinWindow{}
		case m == nil && i >= p.target() && p.busy == "":
			lp.Join = api.JoinWindow{}
		}
	}
}

// noteStalledJoins runs after the decision: a permission that expired and was not renewed this sync
// (renewal happens when the agent asks again) is a stalled step.
func (p *plan) noteStalledJoins() {
	f := p.f
	for _, i := range sortedKeys(p.leases) {
		lp := p.leases[i]
		lv := f.leases[i]
		if lp.Join.IsZero() || lv == nil || !sameWindow(lv.join, lp.Join) || f.primary[i] != nil {
			continue
		}
		if !lv.permitLive(f.now) {
			p.stalled = fmt.Sprintf("%s was permitted to join at %s and has not joined", f.names.Pod(i), lv.joinPermitted)
		}
	}
}

// advanceLearner removes a learner that missed its promotion deadline, or that no join explains.
func (p *plan) advanceLearner() {
	f := p.f
	m := f.learner()
	if m == nil {
		return
	}
	reason := ""
	// A learner is explained only by a live join permission at its ordinal; past its deadline (or with
	// none, e.g. an add that raced the deadline) it goes: learners cost no quorum and block every join.
	switch {
	case m.ordinal < 0:
		reason = "orphan"
	case p.joining(m.ordinal): // the permission as normalised, not as observed
	case m.ordinal >= p.target():
		reason = "unwanted-learner"
	default:
		reason = "stuck-learner"
	}
	if reason == "" {
		return
	}
	if reason == "stuck-learner" {
		p.stalled = fmt.Sprintf("learner %s (%s) was not promoted in time", m.ID, m.PeerURL)
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
	for _, i := range sortedKeys(p.leases) {
		lp := p.leases[i]
		m := f.primary[i]
		if lp.Kind != api.IntentLeave || m == nil {
			continue
		}
		if !p.quorumAllowsRemoving(m) {
			// Health changed since the leave was asked: the member stays until quorum allows it
			// again, and other repairs can go first. An agent already removing itself meets etcd's own
			// check; one that made it anyway is seen as gone and parked by the next sync.
			p.setIntent(i, api.IntentMember)
			p.wait("%s stays a member: quorum does not allow it to leave now", f.names.Pod(i))
			return
		}
		lv := f.leases[i]
		since, err := time.Parse(time.RFC3339, lp.Since)
		// An agent without its data cannot remove its member itself.
		agentGone := lv == nil || !lv.fresh || p.lostData(m)
		slow := err == nil && f.now.Sub(since) >= p.timeout(p.spec.Timeouts.LeaveSeconds)
		if agentGone || slow {
			p.removeMember(m, "leave")
		}
		return
	}
}

// keepJobs carries observed Jobs over: active ones, the latest failed attempt while its reason may still
// hold, and succeeded ones until their effect shows. Finished Jobs whose effect is observed are dropped.
func (p *plan) keepJobs() {
	f := p.f
	for _, id := range sortedKeys(f.removeJobs) {
		js := f.removeJobs[id]
		m := f.member(id)
		last := js[len(js)-1]
		for _, jv := range js {
			keep := false
			switch jv.state {
			case jobActive:
				keep = true
			case jobSucceeded:
				keep = m != nil && jv == last
			case jobFailed:
				// The latest failure stays visible (its number and time drive the backoff of the next
				// attempt), and the one before it while a retry runs.
				keep = m != nil && (jv == last || (last.state == jobActive && jv.attempt == last.attempt-1))
			}
			if keep || !p.judgeJobs() {
				p.jobs = append(p.jobs, render.Job{Kind: render.JobCarried, Carried: jv.job})
			} else {
				p.release(KeyJob, jv.job.Name, "finished remove Job whose outcome is observed")
			}
		}
	}
	for _, i := range sortedKeys(f.pvcJobs) {
		js := f.pvcJobs[i]
		last := js[len(js)-1]
		pvc := f.pvcs[i]
		gone := pvc == nil || pvc.DeletionTimestamp != nil
		for _, jv := range js {
			retrying := last.state == jobActive && jv.attempt == last.attempt-1
			if jv.state == jobActive || (!gone && (jv == last || retrying)) || !p.judgeJobs() {
				p.jobs = append(p.jobs, render.Job{Kind: render.JobCarried, Carried: jv.job})
			} else {
				p.release(KeyJob, jv.job.Name, "finished volume Job whose outcome is observed")
			}
		}
	}
}

// judgeJobs: only with one cluster and a known member list can a finished Job be judged done; otherwise
// every observed Job is kept.
func (p *plan) judgeJobs() bool {
	return p.f.bootstrapped && !p.f.splitBrain && p.f.truthKnown()
}

// removalRunning says whether any remove Job is active or was made this sync: removals go one at a time.
func (p *plan) removalRunning() bool {
	if p.removing {
		return true
	}
	for _, js := range p.f.removeJobs {
		if js[len(js)-1].state == jobActive {
			return true
		}
	}
	return false
}

// removeMember emits the next remove Job for m unless one is running or the backoff has not passed.
func (p *plan) removeMember(m *memberView, reason string) {
	f := p.f
	js := f.removeJobs[m.ID]
	attempt := 1
	if len(js) > 0 {
		last := js[len(js)-1]
		switch last.state {
		case jobActive:
			p.wait("Job %s to remove member %s (%s)", last.job.Name, m.ID, reason)
			return
		case jobSucceeded:
			if f.now.Sub(last.finished) < succeededJobGrace {
				return
			}
		case jobFailed:
			if next := last.finished.Add(backoff(last.attempt)); f.now.Before(next) {
				p.wait("retrying the removal of member %s after %s (Job %s failed)", m.ID, next.UTC().Format(time.RFC3339), last.job.Name)
				return
			}
		}
		attempt = last.attempt + 1
	}
	if attempt > maxAttempts {
		p.wait("member %s could not be removed in %d attempts: see Job %s", m.ID, maxAttempts, js[len(js)-1].job.Name)
		return
	}
	job := render.Job{Kind: render.JobRemove, Attempt: attempt, MemberID: m.ID, PeerURL: m.PeerURL, Reason: reason, Endpoints: p.voterEndpoints(m.ID)}
	p.jobs = append(p.jobs, job)
	p.removing = true
	p.action = fmt.Sprintf("Job %s removing member %s", job.Name(f.names), m.ID)
	p.busy = p.action
	p.wait("%s", p.action)
}

func backoff(attempt int) time.Duration {
	d := retryBackoffBase
	for i := 1; i < attempt && d < retryBackoffMax; i++ {
		d *= 2
	}
	if d > retryBackoffMax {
		d = retryBackoffMax
	}
	return d
}

// removeOrphan removes a member that maps to no ordinal, or a second ID at one ordinal.
// Orphans are few (the member list is bounded, api.MaxReportedMembers) but each costs one quorum
// check, counted once (facts.voters), and the wait names the first only.
func (p *plan) removeOrphan() bool {
	var refused []*memberView
	for _, m := range p.f.orphans {
		if p.quorumAllowsRemoving(m) {
			p.removeMember(m, "orphan")
			return true
		}
		refused = append(refused, m)
	}
	switch n := len(refused); {
	case n == 1:
		p.wait("quorum does not allow removing orphan member %s (%s)", refused[0].ID, refused[0].PeerURL)
	case n > 1:
		p.wait("quorum does not allow removing orphan member %s (%s) nor %d more", refused[0].ID, refused[0].PeerURL, n-1)
	}
	return false
}

// removeDead removes a voter that has been gone for minutes, when the quorum rule allows it. A voter
// whose agent reports its data lost is replaced by that agent itself (repairJoin); only when several
// are lost at once, so that no join can pass etcd's check that every voter is connected, are their old
// IDs removed here first, one at a time.
func (p *plan) removeDead() bool {
	f := p.f
	_, healthy := f.voters()
	all, _ := f.voters()
	for _, m := range f.members {
		if m.ordinal < 0 || !m.voter() {
			continue
		}
		reason := ""
		switch {
		case m.dead:
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
		p.wait("%s (member %s) is %s but removing it would break quorum", f.names.Pod(m.ordinal), m.ID, reason)
		return true
	}
	return false
}

// lostData: the member's agent runs (fresh Lease held by its pod) and asks to join: its data is gone.
func (p *plan) lostData(m *memberView) bool {
	f := p.f
	lv := f.leases[m.ordinal]
	return !m.healthy && lv != nil && lv.fresh && lv.report.Reason() == api.ReasonWaitingForJoin &&
		(f.pods[m.ordinal] == nil || string(f.pods[m.ordinal].UID) == lv.holder)
}

// joinable says whether ordinal i may be given join-permitted now, and why not.
// A replacement (the ordinal's old, unhealthy member goes first) needs every other voter healthy; no
// member joins while another defragments.
func (p *plan) joinable(i int) (bool, string) {
	f := p.f
	for _, m := range f.members {
		if m.voter() && !m.healthy && m.ordinal != i {
			return false, "every voter to be healthy before a member joins"
		}
	}
	if pvc := f.pvcs[i]; pvc != nil && pvc.DeletionTimestamp != nil {
		return false, fmt.Sprintf("claim %s to finish deleting", pvc.Name)
	}
	if who := p.defragmenting(); who != "" {
		return false, fmt.Sprintf("%s to finish defragmenting before %s joins", who, f.names.Pod(i))
	}
	if what := p.restartingInPlace(); what != "" {
		return false, fmt.Sprintf("%s before %s joins", what, f.names.Pod(i))
	}
	return true, ""
}

// repairJoin lets a wanted ordinal below replicas (re)join when its agent asks: its member was removed,
// or it lost its data and must replace its old ID (the quorum rule applies to that removal). An ordinal
// whose agent does not ask (pod pending, node gone) blocks nothing.
func (p *plan) repairJoin() bool {
	f := p.f
	for i := 0; i < int(p.replicas) && i < p.target(); i++ {
		m := f.primary[i]
		lv := f.leases[i]
		asking := lv != nil && lv.fresh && lv.report.Reason() == api.ReasonWaitingForJoin &&
			(f.pods[i] == nil || string(f.pods[i].UID) == lv.holder)
		if m != nil && m.healthy {
			continue
		}
		if !asking {
			continue // noteCleanup says so
		}
		replace := m != nil
		if replace && !p.quorumAllowsRemoving(m) {
			p.wait("%s lost its data but replacing member %s would break quorum", f.names.Pod(i), m.ID)
			continue
		}
		if ok, why := p.joinable(i); !ok {
			p.wait("%s", why)
			continue
		}
		p.permit(i)
		p.action = fmt.Sprintf("%s to join the cluster", f.names.Pod(i))
		p.busy = p.action
		p.wait("%s", p.action)
		return true
	}
	return false
}

// deleteVolume deletes the claim of an ordinal that left: above replicas, no member, no pod.
func (p *plan) deleteVolume() bool {
	f := p.f
	if p.spec.Storage.EmptyDir != nil {
		return false
	}
	for _, i := range sortedKeys(f.pvcs) {
		pvc := f.pvcs[i]
		// Below the target a volume is a member's to be, never a removed one's: after an in-place restore
		// the cluster grows back from one member onto the old volumes (their agents move the replaced
		// data aside), and a shrink reversed before its volumes went re-creates them.
		if i < int(p.replicas) || i < p.target() || f.primary[i] != nil || f.pods[i] != nil || pvc.DeletionTimestamp != nil ||
			pvc.Labels[api.LabelClusterUID] != f.uid {
			continue
		}
		if f.sts == nil || f.sts.Spec.Replicas == nil || int(*f.sts.Spec.Replicas) > i {
			continue // the StatefulSet has not been lowered yet
		}
		js := f.pvcJobs[i]
		attempt := 1
		if len(js) > 0 {
			last := js[len(js)-1]
			if last.state == jobFailed && f.now.Before(last.finished.Add(backoff(last.attempt))) {
				p.wait("retrying the deletion of claim %s after Job %s failed", pvc.Name, last.job.Name)
				return true
			}
			attempt = last.attempt + 1
		}
		if attempt > maxAttempts {
			continue
		}
		job := render.Job{Kind: render.JobDeleteVolume, Attempt: attempt, Ordinal: i, Endpoints: p.voterEndpoints("")}
		p.jobs = append(p.jobs, job)
		p.action = fmt.Sprintf("Job %s deleting the volume of %s", job.Name(f.names), f.names.Pod(i))
		p.busy, p.busyVolume = p.action, true
		p.wait("%s", p.action)
		return true
	}
	return false
}

// scaleDown asks a member above the target to leave (docs/design/07-steps.md §7.5): an unhealthy one first, since its
// removal costs no quorum, else the highest.
func (p *plan) scaleDown() bool {
	f := p.f
	h := f.highestMemberOrdinal()
	if h < p.target() {
		return false
	}
	for i := h; i >= p.target(); i-- {
		if m := f.primary[i]; m != nil && !m.healthy && p.quorumAllowsRemoving(m) {
			h = i
			break
		}
	}
	m := f.primary[h]
	if !p.quorumAllowsRemoving(m) {
		p.wait("quorum does not allow %s to leave now", f.names.Pod(h))
		return true
	}
	if who := p.defragmenting(); who != "" && m.healthy {
		p.wait("%s to finish defragmenting before %s leaves", who, f.names.Pod(h))
		return true
	}
	if what := p.restartingInPlace(); what != "" && m.healthy {
		p.wait("%s before %s leaves", what, f.names.Pod(h))
		return true
	}
	p.setIntent(h, api.IntentLeave)
	p.lease(h).Join = api.JoinWindow{}
	p.action = fmt.Sprintf("%s to leave the cluster", f.names.Pod(h))
	p.busy = p.action
	if lv := f.leases[h]; lv == nil || !lv.fresh || p.lostData(m) {
		p.removeMember(m, "leave") // its agent cannot remove it
		if p.busy == p.action {
			p.wait("%s", p.action)
		}
		return true
	}
	p.action = fmt.Sprintf("%s to leave the cluster", f.names.Pod(h))
	p.busy = p.action
	p.wait("%s", p.action)
	return true
}

// scaleUp raises replicas by one and permits the new ordinal to join.
func (p *plan) scaleUp() bool {
	f := p.f
	n := len(f.primary)
	if n >= p.target() {
		return false
	}
	i := int(p.replicas)
	for j := 0; j < i; j++ {
		if f.primary[j] == nil {
			return false // repairJoin handles holes below replicas
		}
	}
	if ok, why := p.joinable(i); !ok {
		p.wait("%s", why)
		return true
	}
	if js := f.pvcJobs[i]; len(js) > 0 && js[len(js)-1].state == jobActive {
		p.wait("the old claim of %s to be deleted", f.names.Pod(i))
		return true
	}
	p.replicas = int32(i + 1)
	p.permit(i)
	p.action = fmt.Sprintf("%s to join the cluster", f.names.Pod(i))
	p.busy = p.action
	p.wait("%s", p.action)
	return true
}

// floorReplicas keeps invariant 2 (replicas >= 1 + highest member ordinal) and drops pods that are
// neither members nor wanted nor joining.
func (p *plan) floorReplicas() {
	f := p.f
	if !f.bootstrapped {
		return
	}
	floor := int32(f.highestMemberOrdinal() + 1)
	if f.truthKnown() && int32(f.unionHighest+1) > floor {
		// Another fresh healthy voter lists a member the freshest report does not: the safest view wins.
		floor = int32(f.unionHighest + 1)
	}
	if !f.truthKnown() {
		// Without a member list nothing is lowered: status.members is the best memory of who is a member.
		floor = p.replicas
		for _, m := range f.parent.Status.Members {
			if i := f.names.PodOrdinal(m.Name); int32(i+1) > floor {
				floor = int32(i + 1)
			}
		}
		floor = p.adoptFloor(floor)
	}
	for i := range p.leases {
		if p.joining(i) && int32(i+1) > floor && i < p.target() {
			floor = int32(i + 1)
		}
	}
	want := p.replicas
	if t := int32(p.target()); want > t && f.truthKnown() {
		want = t
	}
	if want < floor {
		want = floor
	}
	if want < 1 {
		want = 1
	}
	// Members missing (a create, a scale-up) and the member list known: every wanted pod starts at once,
	// and each joins when its agent asks and it is its turn (scaleUp, repairJoin: one at a time, every
	// voter healthy, under a join permission). Started one per join, pod starts (3-5 s each) were most
	// of a create-5 (e2e/RESULTS.md, timeline). Derived from the target and the member list, not from the
	// observed replicas, so a stale cache cannot take a started pod away. It stops below an ordinal whose
	// old claim is still being deleted: a pod would bind it.
	if t := int32(p.target()); f.truthKnown() && !f.splitBrain && len(f.primary) < p.target() {
		for want < t && !p.claimDeleting(int(want)) {
			want++
		}
	}
	p.replicas = want
	if f.truthKnown() {
		p.noteCleanup()
	}
	if p.partition > p.replicas {
		p.partition = p.replicas
	}
}

// claimDeleting: the claim of ordinal i is being deleted, or a Job is deleting it.
func (p *plan) claimDeleting(i int) bool {
	if pvc := p.f.pvcs[i]; pvc != nil && pvc.DeletionTimestamp != nil {
		return true
	}
	js := p.f.pvcJobs[i]
	return len(js) > 0 && js[len(js)-1].state == jobActive
}

// noteCleanup says what is left of ordinals above replicas that are no longer members: a pod that must
// stop, a volume that must be deleted. Derived from observed objects, so a resync says the same.
func (p *plan) noteCleanup() {
	f := p.f
	for i := 0; i < int(p.replicas) && i < p.target(); i++ {
		lp := p.leases[i]
		if f.primary[i] == nil && (lp == nil || lp.Join.IsZero()) {
			p.wait("%s has no member and its agent has not asked to join", f.names.Pod(i))
		}
	}
	for _, i := range sortedKeys(f.pods) {
		if i >= int(p.replicas) && f.primary[i] == nil {
			p.cleanup = true
			p.wait("%s to stop", f.names.Pod(i))
		}
	}
	if p.spec.Storage.EmptyDir != nil || p.busy != "" {
		return
	}
	for _, i := range sortedKeys(f.pvcs) {
		pvc := f.pvcs[i]
		if i >= int(p.replicas) && f.primary[i] == nil && f.pods[i] == nil && pvc.DeletionTimestamp == nil && pvc.Labels[api.LabelClusterUID] == f.uid {
			p.cleanup = true
			p.wait("claim %s of the removed member to be deleted", pvc.Name)
		}
	}
}

// trimLeases renders a Lease for every ordinal in use: below replicas, a member, or with a pod left.
func (p *plan) trimLeases() {
	f := p.f
	n := int(p.replicas)
	if h := f.highestMemberOrdinal() + 1; h > n {
		n = h
	}
	for i := range f.pods {
		if i+1 > n {
			n = i + 1
		}
	}
	for i := range p.leases {
		if i >= n {
			delete(p.leases, i)
		}
	}
	for _, lv := range f.leases {
		if lv.ordinal >= n {
			p.release(KeyLease, lv.lease.Name, fmt.Sprintf("ordinal %d has no member, no pod and is above replicas", lv.ordinal))
		}
	}
	for i := 0; i < n; i++ {
		lp := p.lease(i)
		switch {
		case i >= int(p.replicas) && f.primary[i] == nil:
			// A pod above replicas is on its way out: a restart must park, never rejoin.
			if lp.Kind != api.IntentLeave {
				p.setIntent(i, api.IntentLeave)
			}
			lp.Join = api.JoinWindow{}
		case lp.Kind == "":
			p.setIntent(i, api.IntentMember)
		case lp.Kind == api.IntentLeave && i < int(p.replicas) && i < p.target() && f.primary[i] == nil && f.truthKnown():
			// A wanted ordinal below replicas that has left (a stale answer can leave this behind)
			// becomes a member again: its parked agent restarts and asks to join.
			p.setIntent(i, api.IntentMember)
		}
	}
}

// sameWindow: two join windows are the same permission.
func sameWindow(a, b api.JoinWindow) bool { return a.From.Equal(b.From) && a.Until.Equal(b.Until) }

// sortedKeys returns a map's int or string keys in order, so every loop is deterministic.
func sortedKeys[K int | string, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

func specEqual(a, b api.ClusterSpec) bool {
	return string(render.SpecJSON(a)) == string(render.SpecJSON(b))
}

const lastAppliedAnnotation = "metacontroller.k8s.io/last-applied-configuration"

func ptr[T any](v T) *T { return &v }
