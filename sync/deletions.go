package sync

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// Deletion is an observed child the answer leaves out on purpose: Metacontroller deletes it. Every
// child the hook leaves out must be one of these, with the reason the plan gave.
type Deletion struct {
	Key    string // group key, e.g. Lease.coordination.k8s.io/v1
	Name   string
	Reason string
}

// childRef is one observed child.
type childRef struct {
	key  string
	name string
	meta metav1.Object
}

// refsOf appends the children of one kind, by name.
func refsOf[T metav1.Object](out []childRef, key string, m map[string]T) []childRef {
	start := len(out)
	for name, obj := range m {
		out = append(out, childRef{key: key, name: name, meta: obj})
	}
	slices.SortFunc(out[start:], func(a, b childRef) int { return strings.Compare(a.name, b.name) })
	return out
}

// childRefs lists every observed child, in a fixed order.
func childRefs(o *Observed) []childRef {
	n := len(o.ServiceAccounts) + len(o.Roles) + len(o.RoleBindings) + len(o.ConfigMaps) + len(o.Services) +
		len(o.StatefulSets) + len(o.PDBs) + len(o.Leases) + len(o.Jobs) + len(o.CronJobs) + len(o.NetworkPolicies)
	if n == 0 {
		return nil
	}
	out := make([]childRef, 0, n)
	out = refsOf(out, wire.KeyServiceAccount, o.ServiceAccounts)
	out = refsOf(out, wire.KeyRole, o.Roles)
	out = refsOf(out, wire.KeyRoleBinding, o.RoleBindings)
	out = refsOf(out, wire.KeyConfigMap, o.ConfigMaps)
	out = refsOf(out, wire.KeyService, o.Services)
	out = refsOf(out, wire.KeyStatefulSet, o.StatefulSets)
	out = refsOf(out, wire.KeyPDB, o.PDBs)
	out = refsOf(out, wire.KeyLease, o.Leases)
	out = refsOf(out, wire.KeyJob, o.Jobs)
	out = refsOf(out, wire.KeyCronJob, o.CronJobs)
	out = refsOf(out, wire.KeyNetworkPolicy, o.NetworkPolicies)
	return out
}

// deletionInput is what deletions reads of the decision: the children it released on purpose ("key/name"
// -> reason), whether the NetworkPolicy is on, and why the backup writer is not rendered ("" when it is).
type deletionInput struct {
	released  map[string]string
	policyOn  bool
	writerOff string
	// applierOff: why the standby's applier StatefulSet is let go ("" while it is rendered).
	applierOff string
}

// deletions checks the rendered children against the observed ones: each observed child left out must
// have been released by the plan, or be a leftover of a kind the hook renders under fixed names (a
// Lease, Job, ServiceAccount, Role or RoleBinding whose name etcdhook never renders). Anything else is
// a bug that would make Metacontroller delete a live object: the answer is refused instead (500).
func deletions(f *facts.Facts, rendered map[wire.ChildID]bool, in deletionInput) ([]Deletion, error) {
	var out []Deletion
	for _, c := range childRefs(f.Observed) {
		if rendered[wire.ChildID{Key: c.key, Name: c.name}] {
			continue
		}
		id := c.key + "/" + c.name
		reason, ok := in.released[id]
		if !ok {
			switch c.key {
			case wire.KeyLease:
				if f.Names.LeaseOrdinal(c.name) < 0 {
					reason, ok = "not a member Lease name of this cluster", true
				}
			case wire.KeyJob:
				if !knownJob(f, c.name) {
					reason, ok = "not a Job name etcdhook makes", true
				}
			case wire.KeyServiceAccount, wire.KeyRole, wire.KeyRoleBinding, wire.KeyCronJob:
				reason, ok = "not a name etcdhook renders", true
			case wire.KeyStatefulSet:
				switch c.name {
				case f.Names.BackupWriter():
					reason = in.writerOff
				case f.Names.StandbyApplier():
					reason = in.applierOff
				}
				ok = reason != ""
			case wire.KeyNetworkPolicy:
				if c.name != f.Names.NetworkPolicy() {
					reason, ok = "not a name etcdhook renders", true
				} else if !in.policyOn {
					reason, ok = "spec.network.policy is false", true
				}
			}
		}
		if !ok {
			return nil, fmt.Errorf("the answer would delete %s without a reason: refusing it", id)
		}
		out = append(out, Deletion{Key: c.key, Name: c.name, Reason: reason})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key+out[i].Name < out[j].Key+out[j].Name })
	return out, nil
}

// knownJob says whether name parses as a remove, pvc-delete or restore Job of this cluster.
func knownJob(f *facts.Facts, name string) bool {
	if strings.HasPrefix(name, f.Names.Cluster+"-restore-") {
		return true
	}
	for _, js := range f.RemoveJobs {
		for _, jv := range js {
			if jv.Job.Name == name {
				return true
			}
		}
	}
	for _, js := range f.DeleteVolumeJobs {
		for _, jv := range js {
			if jv.Job.Name == name {
				return true
			}
		}
	}
	return false
}

// echoLastApplied answers without a spec to render from (the spec is invalid and the last valid one is
// not recorded): every observed child is answered so that Metacontroller's 3-way merge changes nothing.
// The answer has the shape of the configuration Metacontroller last applied (the same fields, so its
// merge removes none) with the values of the observed object (so it sets none): the annotation is only
// trusted for which fields exist, never for their values, which a hand edit could have changed. A child
// without that record cannot be answered safely, and the request is refused.
func echoLastApplied(o *Observed) ([]any, error) {
	out := []any{}
	for _, c := range childRefs(o) {
		last := lastApplied(o.Raw(wire.ChildID{Key: c.key, Name: c.name}))
		if last == "" {
			return nil, wire.InputErrorf("the spec cannot be rendered and child %s %q carries no %s to answer it with unchanged: refusing to answer, which would delete it", c.key, c.name, lastAppliedAnnotation)
		}
		if err := api.BoundLastApplied.Check(last); err != nil {
			return nil, wire.InputErrorf("child %s %q: %s is beyond its bound (%v): refusing to answer, which would delete it", c.key, c.name, lastAppliedAnnotation, err)
		}
		var shape, observed map[string]any
		if err := wire.Unmarshal([]byte(last), &shape); err != nil {
			return nil, wire.InputErrorf("child %s %q: %s is not a JSON object: %v", c.key, c.name, lastAppliedAnnotation, err)
		}
		if err := wire.Unmarshal(o.Raw(wire.ChildID{Key: c.key, Name: c.name}), &observed); err != nil {
			return nil, wire.InputErrorf("child %s %q: %v", c.key, c.name, err)
		}
		m := projectObserved(observed, shape)
		// Identity always comes from the object itself.
		for _, k := range []string{"apiVersion", "kind"} {
			m[k] = observed[k]
		}
		md, _ := m["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			m["metadata"] = md
		}
		omd, _ := observed["metadata"].(map[string]any)
		md["name"], md["namespace"] = c.name, omd["namespace"]
		delete(m, "status")
		out = append(out, m)
	}
	return out, nil
}

// lastApplied reads a child's last-applied configuration from its bytes.
func lastApplied(raw []byte) string {
	var w struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if wire.Unmarshal(raw, &w) != nil {
		return ""
	}
	return w.Metadata.Annotations[lastAppliedAnnotation]
}

// projectObserved keeps, of observed, the object keys that shape has (recursively through objects);
// lists and scalars are taken whole from observed. A key shape has but observed lacks is left out.
func projectObserved(observed, shape map[string]any) map[string]any {
	out := make(map[string]any, len(shape))
	for k, sv := range shape {
		ov, ok := observed[k]
		if !ok {
			continue
		}
		sm, sIsMap := sv.(map[string]any)
		om, oIsMap := ov.(map[string]any)
		if sIsMap && oIsMap {
			out[k] = projectObserved(om, sm)
			continue
		}
		out[k] = ov
	}
	return out
}

const lastAppliedAnnotation = "metacontroller.k8s.io/last-applied-configuration"
