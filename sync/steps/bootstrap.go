package steps

import (
	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// BootstrapInput is what StartCluster reads of the decisions before it.
type BootstrapInput struct {
	// Spec: the spec rendered; Replicas, Leases: carried over (Bootstrap works on a copy of the Leases).
	Spec     api.ClusterSpec
	Replicas int32
	Leases   Leases
	// SeedBootstrap: the server's option to create every cluster from a seed, never statically.
	SeedBootstrap bool
}

// BootstrapDecision is the bootstrap's part of the decision (Busy is "bootstrap").
type BootstrapDecision struct {
	Replicas int32
	Leases   Leases
	// StaticN: the static creation this sync renders, 0 none.
	StaticN int
	Waiting Waits
}

func (d *BootstrapDecision) wait(kind WaitKind, subject, format string, args ...any) {
	d.Waiting = d.Waiting.Addf(kind, subject, format, args...)
}

// StartCluster: every member at once from a static initial cluster at a fresh creation, else replicas 1 and
// the seed may start "new" (docs/design/07-steps.md §7.1). Nothing else happens before a cluster ID exists.
func StartCluster(f *facts.Facts, in BootstrapInput) BootstrapDecision {
	d := BootstrapDecision{Replicas: in.Replicas, Leases: in.Leases.Clone()}
	if n := staticCreation(f, in); n > 0 {
		bootstrapStatic(f, &d, n)
		return d
	}
	if f.StaticRecord > 0 {
		holdStatic(f, &d)
		return d
	}
	d.Replicas = AdoptFloor(f, in.Spec, 1)
	d.Leases.SetIntent(0, api.IntentMember, f.Now)
	d.Leases.Lease(0).Seed = true
	if lv := f.Leases[0]; lv != nil && lv.Report.Reason() == api.ReasonForeignData {
		d.wait(Bootstrap, f.Names.Pod(0), "refuses its volume: %s", lv.Report.Error)
		return d
	}
	if f.SeedRefused() {
		d.wait(Restore, "", "the restore has failed and is not retried (RestoreFailed): delete this EtcdCluster and restore again, or delete pod %s to try once more after fixing the cause", f.Names.Pod(0))
		return d
	}
	d.wait(Bootstrap, f.Names.Pod(0), "to bootstrap the cluster")
	return d
}

// staticCreation is the member count of the static creation this sync renders: the one the StatefulSet
// records and still agrees with, the one the Leases ask for when nothing else of it was applied, or, at
// a fresh creation, the spec's size. 0: the seed's way.
func staticCreation(f *facts.Facts, in BootstrapInput) int {
	if f.Static > 0 {
		return f.Static
	}
	if n := f.LeaseRecord(); n > 0 {
		return n
	}
	if f.StatefulSet == nil && !in.SeedBootstrap && f.FreshCreation(in.Spec) {
		return TargetOf(in.Spec)
	}
	return 0
}

// bootstrapStatic renders a static creation of n members: replicas n, every Lease asks its member to
// start from the static initial cluster (the agents check it against agent.json). The marks go with the
// first cluster ID: from then on a member without data joins as any member does.
func bootstrapStatic(f *facts.Facts, d *BootstrapDecision, n int) {
	d.StaticN = n
	d.Replicas = int32(n)
	for i := 0; i < n; i++ {
		d.Leases.SetIntent(i, api.IntentMember, f.Now)
		d.Leases.Lease(i).Static = n
	}
	for i := 0; i < n; i++ {
		if lv := f.Leases[i]; lv != nil && lv.Report.Reason() == api.ReasonForeignData {
			d.wait(Bootstrap, f.Names.Pod(i), "refuses its volume: %s", lv.Report.Error)
		}
	}
	d.wait(Bootstrap, "", "%d members to start together and form the cluster", n)
}

// holdStatic: the StatefulSet records a static creation that the rest does not agree with (a hand
// edit, InputIgnored says which). Until it agrees again no member is asked to start: a member that ran
// already goes on (etcd forms the cluster by itself and its report ends the creation); nothing is
// started a second way, from a seed or from another initial cluster.
func holdStatic(f *facts.Facts, d *BootstrapDecision) {
	for i := 0; i < int(d.Replicas); i++ {
		d.Leases.SetIntent(i, api.IntentMember, f.Now)
	}
	d.wait(Bootstrap, "", "the record of a static creation of %d members does not agree with the StatefulSet or the Leases (see InputIgnored): no member is asked to start until it does", f.StaticRecord)
}
