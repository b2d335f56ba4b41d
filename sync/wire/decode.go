package wire

import (
	"bytes"
	"slices"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/etcdhook/etcdhook/api"
)

// decodeOptions read as encoding/json does (the Kubernetes types carry v1 tags and methods).
var decodeOptions = jsonv1.DefaultOptionsV1()

// Unmarshal decodes b into v as encoding/json would (the options every read of this package uses).
func Unmarshal(b []byte, v any) error { return jsonv2.Unmarshal(b, v, decodeOptions) }

// Decode checks and types a request body: a body that is not a request is a *MalformedError, one the
// hook refuses an *InputError. After the request's value only whitespace, or a stray ']' or '}' (where
// json.Decoder.More stopped, which the hook always accepted), may follow.
func Decode(body []byte) (*Observed, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(body), decodeOptions)
	var req Request
	if err := jsonv2.UnmarshalDecode(dec, &req, decodeOptions); err != nil {
		return nil, &MalformedError{Msg: err.Error()}
	}
	if err := trailing(body[dec.InputOffset():]); err != nil {
		return nil, err
	}
	return DecodeRequest(&req)
}

// trailing refuses anything after the request's value but whitespace or a stray ']' or '}'.
func trailing(rest []byte) error {
	for _, c := range rest {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case ']', '}':
			return nil
		}
		return &MalformedError{Msg: "data after the request object"}
	}
	return nil
}

// childKeys are the groups every registration declares: Metacontroller sends each, empty or not.
var childKeys = []string{KeyStatefulSet, KeyService, KeyPDB, KeyConfigMap, KeyLease, KeyJob, KeyServiceAccount, KeyRole, KeyRoleBinding}

// DecodeRequest checks and types a request. Any error is an *InputError.
func DecodeRequest(req *Request) (*Observed, error) {
	if len(req.Parent) == 0 || string(req.Parent) == "null" {
		return nil, InputErrorf("request has no parent")
	}
	o := &Observed{Finalizing: req.Finalizing}
	if err := decodeParent(req.Parent, o); err != nil {
		return nil, err
	}
	p := &o.Parent
	if err := checkParent(p, req.Finalizing); err != nil {
		return nil, err
	}
	for _, k := range childKeys {
		// An absent group is not an empty one: answering as if it were would delete every object of
		// that kind.
		if _, ok := req.Children[k]; !ok {
			return nil, InputErrorf("children group %s is absent (Metacontroller sends every declared group, even empty): refusing to answer, which would delete its objects", k)
		}
	}
	if err := unknownGroups(req.Children, append(slices.Clone(childKeys), KeyCronJob, KeyNetworkPolicy)); err != nil {
		return nil, err
	}
	for _, k := range []string{KeyPod, KeyPVC} {
		if _, ok := req.Related[k]; !ok {
			return nil, InputErrorf("related group %s is absent (the customize hook asks for it): refusing to decide without it", k)
		}
	}
	ns, c, r := p.Namespace, req.Children, req.Related
	o.Raw = map[ChildID][]byte{}
	var err error
	if o.StatefulSets, err = group[appsv1.StatefulSet](c, KeyStatefulSet, "StatefulSet", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.Services, err = group[corev1.Service](c, KeyService, "Service", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.PDBs, err = group[policyv1.PodDisruptionBudget](c, KeyPDB, "PodDisruptionBudget", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.ConfigMaps, err = group[corev1.ConfigMap](c, KeyConfigMap, "ConfigMap", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.Leases, err = group[coordv1.Lease](c, KeyLease, "Lease", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.Jobs, err = group[batchv1.Job](c, KeyJob, "Job", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.ServiceAccounts, err = group[corev1.ServiceAccount](c, KeyServiceAccount, "ServiceAccount", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.Roles, err = group[rbacv1.Role](c, KeyRole, "Role", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.RoleBindings, err = group[rbacv1.RoleBinding](c, KeyRoleBinding, "RoleBinding", ns, o.Raw); err != nil {
		return nil, err
	}
	if _, o.CronJobsDeclared = c[KeyCronJob]; o.CronJobsDeclared {
		if o.CronJobs, err = group[batchv1.CronJob](c, KeyCronJob, "CronJob", ns, o.Raw); err != nil {
			return nil, err
		}
	}
	if _, o.NetworkPoliciesDeclared = c[KeyNetworkPolicy]; o.NetworkPoliciesDeclared {
		if o.NetworkPolicies, err = group[networkingv1.NetworkPolicy](c, KeyNetworkPolicy, "NetworkPolicy", ns, o.Raw); err != nil {
			return nil, err
		}
	}
	if o.Pods, err = group[corev1.Pod](r, KeyPod, "Pod", ns, nil); err != nil {
		return nil, err
	}
	if o.PVCs, err = group[corev1.PersistentVolumeClaim](r, KeyPVC, "PersistentVolumeClaim", ns, nil); err != nil {
		return nil, err
	}
	if _, ok := r[KeySecret]; ok {
		if o.Secrets, err = group[corev1.Secret](r, KeySecret, "Secret", ns, nil); err != nil {
			return nil, err
		}
	}
	// Related objects of other types cannot be deleted by our answer, so they are only ignored.
	if err := unexpectedCore(o); err != nil {
		return nil, err
	}
	return o, nil
}

// decodeParent types the parent. The spec is decoded on its own: a spec the API server accepted but
// that does not fit the hook's types (a mistyped affinity kept by preserve-unknown-fields, a quantity
// that does not parse) is an invalid spec, answered with the last valid children and InvalidSpec, never
// a 4xx that would freeze status and every repair.
func decodeParent(b []byte, o *Observed) error {
	var w struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Spec            jsontext.Value    `json:"spec"`
		Status          api.ClusterStatus `json:"status"`
	}
	if err := Unmarshal(b, &w); err != nil {
		return InputErrorf("parent: %v", err)
	}
	o.Parent = api.EtcdCluster{TypeMeta: w.TypeMeta, ObjectMeta: w.Metadata, Status: w.Status}
	if len(w.Spec) > 0 && string(w.Spec) != "null" {
		if err := Unmarshal(w.Spec, &o.Parent.Spec); err != nil {
			o.Parent.Spec = api.ClusterSpec{}
			o.SpecError = err.Error()
		}
	}
	return nil
}

// kubeObject is a typed Kubernetes object: its kind and metadata are checked after decoding.
type kubeObject[T any] interface {
	*T
	metav1.Object
	GetObjectKind() schema.ObjectKind
}

// group decodes one group, each object into its type, and checks its kind, name and namespace: objects
// are indexed by their own name, never by the request's key. raw, when given, receives each object's
// bytes.
func group[T any, PT kubeObject[T]](groups map[string]map[string]jsontext.Value, key, kind, ns string, raw map[ChildID][]byte) (map[string]*T, error) {
	objs := groups[key]
	out := make(map[string]*T, len(objs))
	keys := make([]string, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := PT(new(T))
		if err := Unmarshal(objs[k], v); err != nil {
			return nil, InputErrorf("%s[%q]: %v", key, k, err)
		}
		if got := v.GetObjectKind().GroupVersionKind().Kind; got != "" && got != kind {
			return nil, InputErrorf("%s[%q] has kind %q", key, k, got)
		}
		name := v.GetName()
		if name == "" {
			return nil, InputErrorf("%s[%q] has no metadata.name", key, k)
		}
		if v.GetNamespace() != "" && v.GetNamespace() != ns {
			return nil, InputErrorf("%s[%q] is in namespace %q, the parent in %q", key, k, v.GetNamespace(), ns)
		}
		if _, dup := out[name]; dup {
			return nil, InputErrorf("%s has two objects named %q", key, name)
		}
		out[name] = (*T)(v)
		if raw != nil {
			raw[ChildID{key, name}] = objs[k]
		}
	}
	return out, nil
}

// unexpectedCore refuses a StatefulSet, Service, PodDisruptionBudget or ConfigMap child with a name the
// hook does not render: answering would delete it, and such an object was not made by this hook.
// (Leases, Jobs and RBAC objects of other names are the hook's own leftovers and are let go.)
func unexpectedCore(o *Observed) error {
	n := api.Names{Cluster: o.Parent.Name, Namespace: o.Parent.Namespace}
	for _, c := range []struct {
		kind string
		got  []string
		want []string
	}{
		{"StatefulSet", names(o.StatefulSets), []string{n.StatefulSet(), n.BackupWriter()}},
		{"Service", names(o.Services), []string{n.ClientService(), n.PeerService()}},
		{"PodDisruptionBudget", names(o.PDBs), []string{n.PDB()}},
		{"ConfigMap", names(o.ConfigMaps), []string{n.ConfigMap()}},
	} {
		for _, name := range c.got {
			if !slices.Contains(c.want, name) {
				return InputErrorf("child %s %q is not one etcdhook renders (want %v): refusing to answer, which would delete it", c.kind, name, c.want)
			}
		}
	}
	return nil
}

// names are a group's object names, sorted.
func names[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// unknownGroups refuses child types the hook does not render: answering would delete all of them.
func unknownGroups(groups map[string]map[string]jsontext.Value, known []string) error {
	var bad []string
	for k, objs := range groups {
		if !slices.Contains(known, k) && len(objs) > 0 {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return InputErrorf("children of undeclared types %v: the CompositeController registration and the hook disagree", bad)
	}
	return nil
}

// checkParent refuses a parent that is not an EtcdCluster with a name, a namespace and a UID.
// Metacontroller sends finalizing only for a parent being deleted: the answer to it releases every
// child, so a request that says finalizing about a live parent is refused, never acted upon.
func checkParent(p *api.EtcdCluster, finalizing bool) error {
	if p.APIVersion != api.APIVersion || p.Kind != api.Kind {
		return InputErrorf("parent is %s %s, want %s %s", p.APIVersion, p.Kind, api.APIVersion, api.Kind)
	}
	if p.Name == "" || p.Namespace == "" || p.UID == "" {
		return InputErrorf("parent metadata must have name, namespace and uid")
	}
	if finalizing && p.DeletionTimestamp == nil {
		return InputErrorf("finalizing is set but the parent has no metadata.deletionTimestamp: refusing to release its children")
	}
	return nil
}

// ClaimTemplates returns a StatefulSet's spec.volumeClaimTemplates exactly as the API server returned it
// (nil if it has none). The templates are immutable and Metacontroller's merge replaces the whole list
// (its entries have no name key to merge by), so only the server's own bytes make the desired object a
// fixed point: a typed round trip loses `metadata.creationTimestamp: null` and rewrites it each sync.
func ClaimTemplates(raw []byte) jsontext.Value {
	var w struct {
		Spec struct {
			VolumeClaimTemplates jsontext.Value `json:"volumeClaimTemplates"`
		} `json:"spec"`
	}
	if len(raw) == 0 || Unmarshal(raw, &w) != nil || len(w.Spec.VolumeClaimTemplates) == 0 || w.Spec.VolumeClaimTemplates.Kind() == 'n' {
		return nil
	}
	return w.Spec.VolumeClaimTemplates
}
