package sync

import (
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/render"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// decide runs one sync's membership protocol (docs/design/06-sync-order.md §6): it starts from what was
// observed, the hook's own Lease halves re-derived (steps.Carry), latches the spec (steps.ChooseSpec)
// and takes at most one membership step (reconcile). The order below is the precedence of the steps;
// each step family is a pure function in package steps whose value the plan takes in (plan.go), except
// the roll (roll.go).
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
	p.Standby = steps.Standby(f, steps.StandbyInput{HasSpec: p.HasSpec, Spec: p.Spec})
	p.Distrusted = append(p.Distrusted, p.Standby.Distrusted...)
	if p.Standby.Waiting != "" {
		p.wait(steps.Promote, "", "%s", p.Standby.Waiting)
	}
	auth := steps.Auth(f, steps.AuthInput{HasSpec: p.HasSpec, Spec: p.Standby.AuthSpec(p.Spec)})
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

// bootstrap starts the cluster (steps.StartCluster).
func (p *plan) bootstrap() {
	d := steps.StartCluster(p.f, steps.BootstrapInput{Spec: p.Spec, Replicas: p.Replicas, Leases: p.leases, SeedBootstrap: p.opts.SeedBootstrap})
	p.Replicas, p.leases, p.staticN, p.Busy = d.Replicas, d.Leases, d.StaticN, "bootstrap"
	p.await(d.Waiting...)
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
