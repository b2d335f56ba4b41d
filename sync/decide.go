package sync

import (
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/render"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// decide runs one sync's membership protocol (docs/design/06-sync-order.md §6): it starts from what was
// observed (carry), re-derives the hook's own Lease halves (normalizeIntents), latches the spec
// (chooseSpec) and takes at most one membership step (reconcile). Step families are in their own files
// (members.go, scale.go, roll.go, volumes.go, tlsswitch.go, inplace.go) or, moved, in package steps as
// pure functions whose values the plan copies (steps.Space, Auth, Paused, Recovery, RotateCA, Defrag).
func decide(f *facts.Facts, opts Options) (p *plan, err error) {
	p = &plan{f: f, opts: opts.withDefaults(), leases: map[int]*api.Intent{}, Decision: steps.Decision{Names: f.Names}}
	// Whatever path the sync takes, the backup Lease is read for status with the spec chosen, and the
	// conclusions are drawn from every step taken.
	defer func() {
		if err == nil {
			p.readBackupReports()
			p.conclude()
		}
	}()
	p.carry()
	// Intents are judged against the spec in force when they were written (the applied one): a
	// hand-edited intent must not even make a step look in flight.
	ref := api.Defaulted(api.WithAppliedDefaults(f.Parent.Spec, f.Applied))
	if f.Applied != nil {
		ref = *f.Applied
	}
	p.normalizeIntents(ref)
	if err := p.chooseSpec(); err != nil {
		return nil, err
	}
	if !p.HasSpec {
		return p, nil
	}
	// The spec as adopted is recorded; the one rendered carries the raised quota and storage.
	p.userSpec = p.Spec
	space := steps.Space(f, steps.SpaceInput{Spec: p.Spec, Paused: p.Paused, Replicas: p.Replicas})
	p.Space, p.Spec = space.State, space.Spec
	p.Standby = steps.Standby(f, steps.StandbyInput{HasSpec: p.HasSpec, Spec: p.Spec})
	p.Distrusted = append(p.Distrusted, p.Standby.Distrusted...)
	if p.Standby.Waiting != "" {
		p.wait(steps.Promote, "", "%s", p.Standby.Waiting)
	}
	auth := steps.Auth(f, steps.AuthInput{HasSpec: p.HasSpec, Spec: p.Standby.AuthSpec(p.Spec)})
	p.Auth = auth.Config
	p.Distrusted = append(p.Distrusted, auth.Distrusted...)
	// Every URL the plan renders (Job endpoints, status) has the scheme every member serves now.
	p.decideTLSMode()
	p.Names.TLS = p.clientHTTPS()
	p.hash = render.TemplateHash(render.PodTemplate(p.templateInput()))
	p.keepJobs()
	p.keepVolumeJobs()
	// A restore in flight goes on while paused (steps in flight finish); none starts (chooseInPlace).
	if p.decideInPlace() {
		p.releaseRestoreJobs()
		return p, nil
	}
	p.releaseRestoreJobs()
	if p.Paused {
		pause := steps.Paused(f, steps.PauseInput{Hash: p.hash, Replicas: p.Replicas, Partition: p.partition})
		p.partition, p.Waiting, p.pauseWaited = pause.Partition, p.Waiting.Add(pause.Wait), true
		p.askPeerSwitch(false)
		p.askCARotation()
		p.askDefrag()
		return p, nil
	}
	switch {
	case !f.Bootstrapped:
		p.bootstrap()
	case f.SplitBrain:
		p.wait(steps.SplitBrain, "", "two cluster IDs %v are reported: no membership change is made until a human resolves it", f.ClusterIDs)
	case !f.Truth.Known():
		p.QuorumLost = true
		p.decideRecovery()
		p.wait(steps.Quorum, "", "no voting member reports a healthy cluster; waiting for quorum (see README: Recovering from quorum loss)")
		p.roll(false)
	default:
		p.reconcile()
	}
	p.floorReplicas()
	p.trimLeases()
	p.askPeerSwitch(f.Bootstrapped && !f.SplitBrain)
	p.askCARotation()
	p.askDefrag()
	if f.Bootstrapped && f.Truth.Known() {
		p.noteStalledJoins()
	}
	return p, nil
}

// carry starts from what was observed: replicas, partition, the hook's Lease intents.
func (p *plan) carry() {
	f := p.f
	p.Replicas = 1
	if f.StatefulSet != nil && f.StatefulSet.Spec.Replicas != nil {
		p.Replicas = *f.StatefulSet.Spec.Replicas
	}
	if p.Replicas > api.MaxSize || p.Replicas < 0 {
		// The hook never renders more than MaxSize: a larger count is a hand edit (kubectl scale), never
		// a number to render from.
		p.distrust("StatefulSet %s has replicas %d, outside 0..%d: not taken as a floor", f.Names.StatefulSet(), p.Replicas, api.MaxSize)
		p.Replicas = api.MaxSize
	}
	if f.StatefulSet != nil && f.StatefulSet.Spec.UpdateStrategy.RollingUpdate != nil && f.StatefulSet.Spec.UpdateStrategy.RollingUpdate.Partition != nil {
		p.partition = *f.StatefulSet.Spec.UpdateStrategy.RollingUpdate.Partition
	}
	if p.partition < 0 || p.partition > api.MaxSize {
		p.partition = api.MaxSize
	}
	for i, lv := range f.Leases {
		lp := p.lease(i)
		lp.Kind, lp.Since, lp.Join = lv.Intent, lv.IntentSince, lv.Join
	}
}

// chooseSpec latches the spec: a valid spec is adopted unless a membership step is in flight; an invalid
// one leaves the last applied spec (read from the ConfigMap, not from the request) in force.
func (p *plan) chooseSpec() error {
	f := p.f
	// Defaults and the change rules come from the record even when it is not rendered from (recorded):
	// a cluster an older hook recorded under looser rules still runs what it says.
	cand := api.Defaulted(api.WithAppliedDefaults(f.Parent.Spec, f.Recorded))
	cand.Paused = false // a switch, not part of the spec the children are rendered from
	p.Paused = f.Parent.Spec.Paused
	p.Problems = api.Validate(f.Names.Cluster, cand)
	if msg := api.StandbyOwnFolder(f.Names, cand); msg != "" {
		p.Problems = append(p.Problems, api.Problem{Reason: "InvalidStandby", Message: msg})
	}
	if f.Observed.SpecError != "" {
		p.Problems = append([]api.Problem{{Reason: "SpecDoesNotDecode", Message: "spec: " + f.Observed.SpecError}}, p.Problems...)
	}
	if len(p.Problems) == 0 {
		p.Problems = api.ValidateChange(f.Recorded, cand, f.Running, f.ImageVersions, f.StorageFloor())
	}
	if len(p.Problems) == 0 {
		p.Problems = steps.AuthRemovalRefused(f.Recorded, cand, f.AuthReport())
	}
	if len(p.Problems) == 0 && f.Recorded != nil && !sameTLSSecretNames(f.Recorded.Security.TLS, cand.Security.TLS) && f.TLSSwitchSeen() {
		// Members still serve the certificates of the Secrets they started on: another Secret can mean
		// another CA, which peers on TLS would refuse (docs/design/14-tls.md §14.8).
		p.Problems = append(p.Problems, api.Problem{Reason: "TLSSecretChange", Message: "spec.security.tls peer/client secretName cannot change while TLS is being switched (status.tls.switch): set them back, and change them once the switch is over"})
	}
	valid := len(p.Problems) == 0
	switch {
	case valid:
		// The user's TLS Secrets (docs/design/14-tls.md §14.5): while one is unusable no spec change is adopted
		// (a new or restarted pod could not start: the new spec may add members or roll them), and the
		// roll holds (roll.go); a Secret that goes bad under an unchanged spec changes nothing rendered
		// (the running members keep their files).
		p.CertProblems = checkTLSSecrets(f, secretsToCheck(f, cand))
		if len(p.CertProblems) > 0 && (f.Applied == nil || !specEqual(*f.Applied, cand)) {
			valid, p.CertBlocked = false, true
		}
	case f.Applied != nil && sameTLSSecrets(*f.Applied, cand):
		// Only Secrets the request's spec names are related: the applied spec's are known only when
		// they are the same.
		p.CertProblems = checkTLSSecrets(f, secretsToCheck(f, *f.Applied))
	}
	if p.Paused {
		// Nothing new is adopted while paused: the recorded spec stays in force (a new cluster gets
		// nothing until it is unpaused).
		if f.Applied != nil {
			p.Spec, p.HasSpec = *f.Applied, true
			p.PendingSpec = valid && !specEqual(*f.Applied, cand)
		}
		return nil
	}
	switch {
	case f.Applied == nil && valid && f.Recorded != nil && p.inFlight() != "":
		// A record that is not rendered from, and a step in flight: the new spec waits as it would
		// behind a valid record, and the children stay as they are meanwhile.
		p.PendingSpec = true
		p.wait(steps.Spec, p.inFlight(), "to finish before the spec is adopted (the recorded spec fails validation: nothing is rendered from it)")
	case f.Applied == nil && valid:
		p.Spec, p.HasSpec = cand, true
	case f.Applied == nil:
		// No spec to render from. Existing children are answered unchanged (echoLastApplied) and
		// status says why: a 4xx would freeze status and every repair along with it.
	case valid && !specEqual(*f.Applied, cand) && p.inFlight() != "":
		p.Spec, p.HasSpec, p.PendingSpec = *f.Applied, true, true
	case valid && f.Applied.Security.TLS.TLSOn() != cand.Security.TLS.TLSOn() && f.CARotationUnderway():
		// A CA rotation finishes first: its restarts and a switch's peer URL moves are one kind of step,
		// and the switch renders the certificates the rotation is replacing.
		p.Spec, p.HasSpec, p.PendingSpec, p.tlsWaitsForCA = *f.Applied, true, true, true
		p.wait(steps.Spec, "", "the CA rotation to finish before TLS is switched %s", onOff(cand.Security.TLS.TLSOn()))
	case valid && f.Applied.Security.TLS.TLSOn() != cand.Security.TLS.TLSOn() && !f.Truth.Known():
		// Without a member list the template's TLS cannot be derived (tlsswitch.go): a switch adopted now
		// would render the final template over members whose peer URLs are on the other scheme.
		p.Spec, p.HasSpec, p.PendingSpec = *f.Applied, true, true
		p.wait(steps.Spec, "", "a healthy quorum before TLS is switched %s", onOff(cand.Security.TLS.TLSOn()))
	case valid:
		p.Spec, p.HasSpec = cand, true
	default:
		p.Spec, p.HasSpec = *f.Applied, true
	}
	return nil
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
	note := p.distrust
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
			if i < target && f.Truth.Primary[i] != nil {
				note("%s carried intent leave below the target size: set back to member", f.Names.Lease(i))
				p.setIntent(i, api.IntentMember)
			} else if f.Truth.Primary[i] != nil {
				leaving = i // the highest wins: sortedKeys is ascending
			}
		default:
			note("%s carried an unknown intent %q: re-derived", f.Names.Lease(i), lp.Kind)
			lp.Kind, lp.Since = "", ""
		}
		if lp.Since != "" {
			if t, err := time.Parse(time.RFC3339, lp.Since); err != nil || t.After(f.Now.Add(facts.MaxClockSkew)) {
				note("%s carried intent-since %q, not a past time: reset", f.Names.Lease(i), lp.Since)
				lp.Since = f.Now.UTC().Format(time.RFC3339)
			}
		}
		if w := lp.Join; !w.IsZero() {
			if w.From.After(f.Now.Add(facts.MaxClockSkew)) || w.Until.Sub(w.From) > maxWindow {
				permitted, deadline := w.Annotations()
				note("%s carried a join permission %q..%q the hook never writes: dropped", f.Names.Lease(i), permitted, deadline)
				lp.Join = api.JoinWindow{}
			} else if f.Truth.Known() && i >= target && f.Truth.Primary[i] == nil {
				note("%s carried a join permission above the target size: dropped", f.Names.Lease(i))
				lp.Join = api.JoinWindow{}
			}
		}
	}
	for _, i := range sortedKeys(p.leases) {
		if lp := p.leases[i]; lp.Kind == api.IntentLeave && f.Truth.Primary[i] != nil && i != leaving {
			note("%s carried a second leave intent: only one member leaves at a time", f.Names.Lease(i))
			p.setIntent(i, api.IntentMember)
		}
	}
	keep := -1
	if m := f.Truth.Learner(); m != nil && m.Ordinal >= 0 && p.leases[m.Ordinal] != nil && !p.leases[m.Ordinal].Join.IsZero() {
		keep = m.Ordinal
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
			note("%s carried a second join permission: only one member joins at a time", f.Names.Lease(i))
			lp.Join = api.JoinWindow{}
		}
	}
}

// bootstrap: every member at once from a static initial cluster at a fresh creation, else replicas 1 and
// the seed may start "new" (docs/design/07-steps.md §7.1). Nothing else happens before a cluster ID exists.
func (p *plan) bootstrap() {
	f := p.f
	if n := p.staticCreation(); n > 0 {
		p.bootstrapStatic(n)
		return
	}
	if f.StaticRecord > 0 {
		p.holdStatic()
		return
	}
	p.Replicas = p.adoptFloor(1)
	p.setIntent(0, api.IntentMember)
	p.lease(0).Seed = true
	p.Busy = "bootstrap"
	if lv := f.Leases[0]; lv != nil && lv.Report.Reason() == api.ReasonForeignData {
		p.wait(steps.Bootstrap, f.Names.Pod(0), "refuses its volume: %s", lv.Report.Error)
		return
	}
	if f.SeedRefused() {
		p.wait(steps.Restore, "", "the restore has failed and is not retried (RestoreFailed): delete this EtcdCluster and restore again, or delete pod %s to try once more after fixing the cause", f.Names.Pod(0))
		return
	}
	p.wait(steps.Bootstrap, f.Names.Pod(0), "to bootstrap the cluster")
}

// staticCreation is the member count of the static creation this sync renders: the one the StatefulSet
// records and still agrees with, the one the Leases ask for when nothing else of it was applied, or, at
// a fresh creation, the spec's size. 0: the seed's way.
func (p *plan) staticCreation() int {
	f := p.f
	if f.Static > 0 {
		return f.Static
	}
	if n := f.LeaseRecord(); n > 0 {
		return n
	}
	if f.StatefulSet == nil && !p.opts.SeedBootstrap && f.FreshCreation(p.Spec) {
		return p.Target()
	}
	return 0
}

// bootstrapStatic renders a static creation of n members: replicas n, every Lease asks its member to
// start from the static initial cluster (the agents check it against agent.json). The marks go with the
// first cluster ID: from then on a member without data joins as any member does.
func (p *plan) bootstrapStatic(n int) {
	f := p.f
	p.staticN = n
	p.Replicas = int32(n)
	for i := 0; i < n; i++ {
		p.setIntent(i, api.IntentMember)
		p.lease(i).Static = n
	}
	p.Busy = "bootstrap"
	for i := 0; i < n; i++ {
		if lv := f.Leases[i]; lv != nil && lv.Report.Reason() == api.ReasonForeignData {
			p.wait(steps.Bootstrap, f.Names.Pod(i), "refuses its volume: %s", lv.Report.Error)
		}
	}
	p.wait(steps.Bootstrap, "", "%d members to start together and form the cluster", n)
}

// holdStatic: the StatefulSet records a static creation that the rest does not agree with (a hand
// edit, InputIgnored says which). Until it agrees again no member is asked to start: a member that ran
// already goes on (etcd forms the cluster by itself and its report ends the creation); nothing is
// started a second way, from a seed or from another initial cluster.
func (p *plan) holdStatic() {
	for i := 0; i < int(p.Replicas); i++ {
		p.setIntent(i, api.IntentMember)
	}
	p.Busy = "bootstrap"
	p.wait(steps.Bootstrap, "", "the record of a static creation of %d members does not agree with the StatefulSet or the Leases (see InputIgnored): no member is asked to start until it does", p.f.StaticRecord)
}

// reconcile is the normal path: cluster bootstrapped, one cluster ID, a healthy voter's member list known.
func (p *plan) reconcile() {
	p.Busy, p.BusyVolume = p.stepInFlight()
	p.Growth = p.Busy != "" && p.Busy == p.volumeStepInFlight()
	p.advanceJoins()
	p.advanceLeave()
	p.advanceLearner()
	if p.Busy != "" {
		p.wait(steps.InFlight, p.Busy, "")
		p.roll(false)
		return
	}
	// A StatefulSet that has not observed the hook's last write may still act on the one before:
	// nothing new starts until it has (silently: the lag is normal and short).
	if f := p.f; f.StatefulSet != nil && f.StatefulSet.Status.ObservedGeneration < f.StatefulSet.Generation {
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
	if p.roll(true) && !(p.rollHeld && len(p.f.Truth.Primary) < p.Target()) {
		return
	}
	if p.scaleUp() {
		return
	}
	p.growVolumes()
}
