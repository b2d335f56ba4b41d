package facts

import (
	"fmt"

	"github.com/etcdhook/etcdhook/api"
)

// The record of a static creation (docs/design/07-steps.md §7.1). The StatefulSet carries it
// (etcd.io/bootstrap: static/N), written in the same object that creates the pods: no member of a static
// creation runs without it. agent.json and every member Lease carry copies the agents check against each
// other; the hook reads the StatefulSet's alone.

// readStatic reads the record. It is in force (f.Static) while it is valid and agrees with what a
// static creation renders: replicas N. A record that does not agree is a
// hand edit: noted and not followed, and until the cluster exists the creation is held (no member is
// asked to start any way) rather than continued or begun again from a seed.
func (f *Facts) readStatic() {
	f.Static, f.StaticRecord = 0, 0
	if f.StatefulSet == nil {
		return
	}
	v, ok := f.StatefulSet.Annotations[api.AnnBootstrap]
	if !ok {
		return
	}
	n, isStatic, err := api.ParseStaticBootstrap(v)
	if !isStatic || err != nil {
		f.Distrusted = append(f.Distrusted, fmt.Sprintf("StatefulSet %s has %s %q, not static/N with N from 2 to %d: ignored", f.Names.StatefulSet(), api.AnnBootstrap, v, api.MaxSize))
		return
	}
	f.StaticRecord = n
	if r := f.StatefulSet.Spec.Replicas; r == nil || int(*r) != n {
		f.Distrusted = append(f.Distrusted, fmt.Sprintf("StatefulSet %s records a static creation of %d members but has replicas %s: the record is not followed", f.Names.StatefulSet(), n, replicasText(r)))
		return
	}
	for _, lv := range f.SortedLeases() {
		if lv.Lease.Annotations[api.AnnBootstrap] == api.BootstrapSeed {
			// A seed renders replicas 1 until the cluster exists: beside replicas N the mark is the hand
			// edit. The agents ignore it too (agent.json says static), and the answer replaces it.
			f.Distrusted = append(f.Distrusted, fmt.Sprintf("Lease %s carries the seed mark beside a static creation of %d members: ignored", lv.Lease.Name, n))
		}
	}
	f.Static = n
}

// LeaseRecord is the static creation the Leases ask for when the StatefulSet is missing (an answer
// applied in part: its ConfigMap and Leases without its StatefulSet): every mark the same static/N, no
// seed mark, and nothing of a member anywhere (no pod, claim, report or status member). Then no pod of
// it ever ran and the creation goes on as recorded, rather than be started a second way from a seed
// whose pod could read the marks of the first before the answer replaces them. 0: none.
func (f *Facts) LeaseRecord() int {
	o, st := f.Observed, f.Parent.Status
	if f.StatefulSet != nil || len(o.Pods) > 0 || len(o.PVCs) > 0 || st.Bootstrapped || st.ClusterID != "" || len(st.Members) > 0 {
		return 0
	}
	n := 0
	for _, lv := range f.SortedLeases() {
		r := lv.Report
		if r.ClusterID != "" || r.MemberID != "" || r.Role != "" && r.Role != api.RoleNone {
			return 0
		}
		m, ok, err := api.ParseStaticBootstrap(lv.Lease.Annotations[api.AnnBootstrap])
		switch {
		case lv.Lease.Annotations[api.AnnBootstrap] == "":
			continue
		case !ok || err != nil || n != 0 && m != n:
			return 0
		}
		n = m
	}
	return n
}

// FreshCreation says whether nothing of an earlier cluster can exist: no StatefulSet, ConfigMap, pod,
// claim or Lease of this name, a status that never saw a member, and a spec that neither adopts data nor
// restores a snapshot (spec.restore, or a standby's seed). Only then may every member start from one static initial cluster; any evidence
// of earlier data takes the seed's path, whose joins etcd checks one at a time.
func (f *Facts) FreshCreation(spec api.ClusterSpec) bool {
	o, st := f.Observed, f.Parent.Status
	return f.StatefulSet == nil && f.cm == nil && len(o.Pods) == 0 && len(o.PVCs) == 0 && len(o.Leases) == 0 &&
		!st.Bootstrapped && st.ClusterID == "" && len(st.Members) == 0 && f.InPlace.Record == nil && len(f.retired) == 0 &&
		!spec.AdoptExistingData && spec.Restore == nil && spec.Standby == nil && spec.Storage.EmptyDir == nil &&
		spec.Size != nil && *spec.Size >= 2
}

func replicasText(r *int32) string {
	if r == nil {
		return "unset"
	}
	return fmt.Sprint(*r)
}
