package sync

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/etcdhook/etcdhook/api"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// The request from bytes to Observed: Shape and split the body (bodyshape.go, split.go), decode each
// group with the object readers (decode.go), then refuse what a registration never sends.

// Decode checks and types a request. Any error is an *InputError.
func Decode(req *Request) (*Observed, error) {
	rq := &rawRequest{parent: req.Parent, finalizing: req.Finalizing}
	rq.children = groupsOf(req.Children)
	rq.related = groupsOf(req.Related)
	return decodeRequest(rq)
}

func groupsOf(m map[string]map[string]json.RawMessage) groups {
	g := groups{set: m != nil}
	for _, k := range sortedKeys(m) {
		gr := group{key: k}
		for _, name := range sortedKeys(m[k]) {
			gr.objs = append(gr.objs, rawObject{key: name, raw: m[k][name]})
		}
		g.list = append(g.list, gr)
	}
	return g
}

// DecodeBody checks and types a request body: a body that is not a request is a *MalformedError, one
// the hook refuses an *InputError. What it accepts and refuses is what json.Decoder into a Request and
// then Decode accepted and refused, but for values of the wrong type in fields the decision never
// reads, which no API server sends.
func DecodeBody(body []byte) (*Observed, error) {
	cb, _, err := CheckBody(body)
	if err != nil {
		return nil, err
	}
	return decodeChecked(cb)
}

// CheckedBody is a request body already checked as JSON (CheckBody), and split when it could be in the
// same pass.
type CheckedBody struct {
	b     []byte
	split *rawRequest
}

// CheckBody checks body as DecodeBody does (an error is a *MalformedError) and, in the same pass,
// counts its shape, for the bounds the server checks before decoding.
func CheckBody(body []byte) (CheckedBody, BodyShape, error) {
	var sp splitter
	sh, end, err := shape(body, &sp)
	if err != nil {
		return CheckedBody{}, sh, malformed(body, err)
	}
	cb := CheckedBody{b: body[:end]} // the value alone: what may follow it (a stray ']' or '}') is not decoded
	if sp.ok {
		sp.rq.children.resolve()
		sp.rq.related.resolve()
		cb.split = &sp.rq
	}
	return cb, sh, nil
}

// decodeChecked splits a checked body into a Request (go-json-experiment, encoding/json's rules: keys
// match case-insensitively, a later key overwrites an earlier one, a second children object adds its
// groups to the first, null clears a map) and types it.
func decodeChecked(cb CheckedBody) (*Observed, error) {
	if cb.split != nil {
		return decodeRequest(cb.split)
	}
	r := objReaders.Get().(*objReader)
	rq, err := splitBody(r, cb.b)
	objReaders.Put(r)
	if err != nil {
		return nil, malformed(cb.b, err)
	}
	return decodeRequest(rq)
}

// malformed words a refused body as encoding/json words it (the hook's messages before DecodeBody).
func malformed(body []byte, err error) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	var req Request
	switch derr := dec.Decode(&req); {
	case derr != nil:
		return &MalformedError{Msg: derr.Error()}
	case dec.More():
		return &MalformedError{Msg: "data after the request object"}
	}
	return &MalformedError{Msg: err.Error()}
}

// decodeRequest types a split request, refusing what Decode always refused, in the same order.
func decodeRequest(req *rawRequest) (*Observed, error) {
	if len(req.parent) == 0 || string(req.parent) == "null" {
		return nil, inputErrorf("request has no parent")
	}
	o := &Observed{Finalizing: req.finalizing}
	// The spec is decoded on its own: a spec the API server accepted but that does not fit the hook's
	// types (a mistyped affinity kept by preserve-unknown-fields, a quantity that does not parse) is an
	// invalid spec, answered with the last valid children and InvalidSpec, never a 4xx that would
	// freeze status and every repair.
	rp := objReaders.Get().(*objReader)
	spec, err := readParent(rp, req.parent, &o.Parent)
	objReaders.Put(rp)
	if err != nil {
		// Worded as encoding/json words it.
		var parent struct {
			api.EtcdCluster
			Spec json.RawMessage `json:"spec"`
		}
		if werr := json.Unmarshal(req.parent, &parent); werr != nil {
			err = werr
		}
		return nil, inputErrorf("parent: %v", err)
	}
	if len(spec) > 0 && string(spec) != "null" {
		if err := json.Unmarshal(spec, &o.Parent.Spec); err != nil {
			o.Parent.Spec = api.ClusterSpec{}
			o.SpecError = err.Error()
		}
	}
	p := &o.Parent
	if err := checkParent(p, req.finalizing); err != nil {
		return nil, err
	}
	ns := p.Namespace
	childKeys := [...]string{KeyStatefulSet, KeyService, KeyPDB, KeyConfigMap, KeyLease, KeyJob, KeyServiceAccount, KeyRole, KeyRoleBinding}
	var c [len(childKeys)]*group
	for i, k := range childKeys {
		// Metacontroller always sends every declared group, empty or not. An absent group is not an
		// empty one: answering as if it were would delete every object of that kind.
		g, ok := req.children.get(k)
		if !ok || !req.children.set {
			return nil, inputErrorf("children group %s is absent (Metacontroller sends every declared group, even empty): refusing to answer, which would delete its objects", k)
		}
		c[i] = g
	}
	if err := unknownGroups(req.children, append(childKeys[:], KeyCronJob, KeyNetworkPolicy), "children"); err != nil {
		return nil, err
	}
	var r [2]*group
	for i, k := range []string{KeyPod, KeyPVC} {
		g, ok := req.related.get(k)
		if !ok || !req.related.set {
			return nil, inputErrorf("related group %s is absent (the customize hook asks for it): refusing to decide without it", k)
		}
		r[i] = g
	}
	o.raw = make(map[childID][]byte, 24)
	rd := objReaders.Get().(*objReader)
	defer objReaders.Put(rd)
	if o.StatefulSets, err = decodeGroup(rd, c[0], "StatefulSet", ns, o.raw, readStatefulSet); err != nil {
		return nil, err
	}
	if o.Services, err = decodeGroup(rd, c[1], "Service", ns, o.raw, readIdentity[corev1.Service]); err != nil {
		return nil, err
	}
	if o.PDBs, err = decodeGroup(rd, c[2], "PodDisruptionBudget", ns, o.raw, readIdentity[policyv1.PodDisruptionBudget]); err != nil {
		return nil, err
	}
	if o.ConfigMaps, err = decodeGroup(rd, c[3], "ConfigMap", ns, o.raw, readConfigMap); err != nil {
		return nil, err
	}
	if o.Leases, err = decodeGroup(rd, c[4], "Lease", ns, o.raw, readLease); err != nil {
		return nil, err
	}
	if o.Jobs, err = decodeGroup(rd, c[5], "Job", ns, o.raw, readJob); err != nil {
		return nil, err
	}
	if o.ServiceAccounts, err = decodeGroup(rd, c[6], "ServiceAccount", ns, o.raw, readIdentity[corev1.ServiceAccount]); err != nil {
		return nil, err
	}
	if o.Roles, err = decodeGroup(rd, c[7], "Role", ns, o.raw, readIdentity[rbacv1.Role]); err != nil {
		return nil, err
	}
	if o.RoleBindings, err = decodeGroup(rd, c[8], "RoleBinding", ns, o.raw, readIdentity[rbacv1.RoleBinding]); err != nil {
		return nil, err
	}
	if g, ok := req.children.get(KeyCronJob); ok {
		o.CronJobsDeclared = true
		if o.CronJobs, err = decodeGroup(rd, g, "CronJob", ns, o.raw, readIdentity[batchv1.CronJob]); err != nil {
			return nil, err
		}
	}
	if g, ok := req.children.get(KeyNetworkPolicy); ok {
		o.NetworkPoliciesDeclared = true
		if o.NetworkPolicies, err = decodeGroup(rd, g, "NetworkPolicy", ns, o.raw, readIdentity[networkingv1.NetworkPolicy]); err != nil {
			return nil, err
		}
	}
	if o.Pods, err = decodeGroup(rd, r[0], "Pod", ns, nil, readPod); err != nil {
		return nil, err
	}
	if o.PVCs, err = decodeGroup(rd, r[1], "PersistentVolumeClaim", ns, nil, readPVC); err != nil {
		return nil, err
	}
	if g, ok := req.related.get(KeySecret); ok {
		if o.Secrets, err = decodeGroup(rd, g, "Secret", ns, nil, readSecret); err != nil {
			return nil, err
		}
	}
	// Related objects of other types cannot be deleted by our answer, so they are only ignored.
	if err := unexpectedCore(o); err != nil {
		return nil, err
	}
	return o, nil
}

// claimTemplates returns a StatefulSet's spec.volumeClaimTemplates exactly as the API server returned
// it (nil if it has none). The templates are immutable and Metacontroller's merge replaces the whole list
// (its entries have no name key to merge by), so only the server's own bytes make the desired object a
// fixed point: a typed round trip loses `metadata.creationTimestamp: null` and rewrites it each sync.
func claimTemplates(raw []byte) []byte {
	if len(raw) == 0 {
		return nil
	}
	var w struct {
		Spec struct {
			VolumeClaimTemplates jsontext.Value `json:"volumeClaimTemplates"`
		} `json:"spec"`
	}
	// raw was checked and decoded already: an error here means no templates.
	if jsonv2.Unmarshal(raw, &w, readOptions) != nil || w.Spec.VolumeClaimTemplates.Kind() == 'n' {
		return nil
	}
	return w.Spec.VolumeClaimTemplates
}

// unexpectedCore refuses a StatefulSet, Service, PodDisruptionBudget or ConfigMap child with a name the
// hook does not render: answering would delete it, and such an object was not made by this hook.
// (Leases, Jobs and RBAC objects of other names are the hook's own leftovers and are let go.)
func unexpectedCore(o *Observed) error {
	n := api.Names{Cluster: o.Parent.Name, Namespace: o.Parent.Namespace}
	check := func(kind string, got []string, want ...string) error {
		for _, name := range got {
			ok := false
			for _, w := range want {
				ok = ok || name == w
			}
			if !ok {
				return inputErrorf("child %s %q is not one etcdhook renders (want %v): refusing to answer, which would delete it", kind, name, want)
			}
		}
		return nil
	}
	for _, err := range []error{
		check("StatefulSet", sortedKeys(o.StatefulSets), n.StatefulSet(), n.BackupWriter()),
		check("Service", sortedKeys(o.Services), n.ClientService(), n.PeerService()),
		check("PodDisruptionBudget", sortedKeys(o.PDBs), n.PDB()),
		check("ConfigMap", sortedKeys(o.ConfigMaps), n.ConfigMap()),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// unknownGroups refuses child types the hook does not render: answering would delete all of them.
func unknownGroups(g groups, known []string, what string) error {
	var bad []string
	for _, gr := range g.list {
		isKnown := false
		for _, k := range known {
			isKnown = isKnown || gr.key == k
		}
		if !isKnown && len(gr.objs) > 0 {
			bad = append(bad, gr.key)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return inputErrorf("%s of undeclared types %v: the CompositeController registration and the hook disagree", what, bad)
	}
	return nil
}

// checkParent refuses a parent that is not an EtcdCluster with a name, a namespace and a UID.
// Metacontroller sends finalizing only for a parent being deleted: the answer to it releases every
// child, so a request that says finalizing about a live parent is refused, never acted upon.
func checkParent(p *api.EtcdCluster, finalizing bool) error {
	if p.APIVersion != api.APIVersion || p.Kind != api.Kind {
		return inputErrorf("parent is %s %s, want %s %s", p.APIVersion, p.Kind, api.APIVersion, api.Kind)
	}
	if p.Name == "" || p.Namespace == "" || p.UID == "" {
		return inputErrorf("parent metadata must have name, namespace and uid")
	}
	if finalizing && p.DeletionTimestamp == nil {
		return inputErrorf("finalizing is set but the parent has no metadata.deletionTimestamp: refusing to release its children")
	}
	return nil
}
