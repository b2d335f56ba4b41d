package sync

import (
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
	p = &plan{f: f, opts: opts.withDefaults(), leases: steps.Leases{}, Decision: steps.Decision{Names: f.Names}}
	// Whatever path the sync takes, the backup Lease is read for status with the spec chosen, and the
	// conclusions are drawn from every step taken.
	defer func() {
		if err == nil {
			backup := steps.BackupReports(f, steps.BackupInput{HasSpec: p.HasSpec, Spec: p.Spec})
			p.Backup, p.Distrusted = backup.Reports, append(p.Distrusted, backup.Distrusted...)
			p.conclude()
		}
	}()
	carried := steps.Carry(f)
	p.Replicas, p.partition, p.leases = carried.Replicas, carried.Partition, carried.Leases
	p.Distrusted = append(p.Distrusted, carried.Distrusted...)
	p.chooseSpec()
	if !p.HasSpec {
		return p, nil
	}
	// The spec as adopted is recorded; the one rendered carries the raised quota and storage.
	p.userSpec = p.Spec
	space := steps.Space(f, steps.SpaceInput{Spec: p.Spec, Paused: p.Paused, Replicas: p.Replicas})
	p.Space, p.Spec = space.State, space.Spec
	auth := steps.Auth(f, steps.AuthInput{HasSpec: p.HasSpec, Spec: p.Spec})
	p.Auth = auth.Config
	p.Distrusted = append(p.Distrusted, auth.Distrusted...)
	// Every URL the plan renders (Job endpoints, status) has the scheme every member serves now.
	p.TLSSw = steps.TLSModeOf(f, p.Spec)
	p.Names.TLS = p.TLSSw.ClientHTTPS()
	p.hash = render.TemplateHash(render.PodTemplate(p.templateInput()))
	p.keepJobs()
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
		p.member((*steps.Members).NoteStalledJoins)
	}
	return p, nil
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
	p.Replicas = steps.AdoptFloor(p.f, p.Spec, 1)
	p.leases.SetIntent(0, api.IntentMember, p.f.Now)
	p.leases.Lease(0).Seed = true
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
		p.leases.SetIntent(i, api.IntentMember, p.f.Now)
		p.leases.Lease(i).Static = n
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
		p.leases.SetIntent(i, api.IntentMember, p.f.Now)
	}
	p.Busy = "bootstrap"
	p.wait(steps.Bootstrap, "", "the record of a static creation of %d members does not agree with the StatefulSet or the Leases (see InputIgnored): no member is asked to start until it does", p.f.StaticRecord)
}

// reconcile is the normal path: cluster bootstrapped, one cluster ID, a healthy voter's member list known.
func (p *plan) reconcile() {
	p.Busy, p.BusyVolume = steps.StepInFlight(p.f, p.leases)
	p.Growth = p.Busy != "" && p.Busy == steps.VolumeStepInFlight(p.f)
	p.member((*steps.Members).AdvanceJoins)
	p.member((*steps.Members).AdvanceLeave)
	p.member((*steps.Members).AdvanceLearner)
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
	repairs := []func() bool{
		func() bool { return p.member((*steps.Members).RemoveOrphan) },
		func() bool { return p.member((*steps.Members).RemoveDead) },
		func() bool { return p.member((*steps.Members).RepairJoin) },
		p.deleteVolume,
	}
	for _, step := range repairs {
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
	if p.member((*steps.Members).ScaleDown) {
		p.roll(false)
		return
	}
	if p.roll(true) && !(p.rollHeld && len(p.f.Truth.Primary) < p.Target()) {
		return
	}
	if p.member((*steps.Members).ScaleUp) {
		return
	}
	p.growVolumes()
}

// chooseSpec latches the spec (steps.ChooseSpec) against the step in flight.
func (p *plan) chooseSpec() {
	inFlight, _ := steps.StepInFlight(p.f, p.leases)
	c := steps.ChooseSpec(p.f, steps.SpecInput{InFlight: inFlight})
	p.SpecState, p.tlsWaitsForCA = c.SpecState, c.TLSWaitsForCA
	p.await(c.Wait)
}
