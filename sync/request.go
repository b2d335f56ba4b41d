package sync

import (
	"encoding/json"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/etcdhook/etcdhook/api"
)

// Request is a Metacontroller CompositeController sync/finalize request. Children and related objects are
// keyed "Kind.group/version" and then by name (hook v1) or namespace/name (hook v2); the inner key is
// never trusted, objects are identified by their own metadata, so both key formats decode alike.
type Request struct {
	Controller json.RawMessage                       `json:"controller,omitempty"`
	Parent     json.RawMessage                       `json:"parent"`
	Children   map[string]map[string]json.RawMessage `json:"children"`
	Related    map[string]map[string]json.RawMessage `json:"related"`
	Finalizing bool                                  `json:"finalizing"`
}

// Response is what Metacontroller applies. Children is never nil: an absent list deletes every child.
type Response struct {
	Status             *api.ClusterStatus `json:"status"`
	Children           []any              `json:"children"`
	ResyncAfterSeconds float64            `json:"resyncAfterSeconds"`
	Finalized          bool               `json:"finalized"`
	// Deleted lists the observed children this answer leaves out on purpose (not sent: the hook logs it).
	Deleted []Deletion `json:"-"`
}

// Group keys of the child and related types the registration declares (metacontroller/).
const (
	KeyStatefulSet    = "StatefulSet.apps/v1"
	KeyService        = "Service.v1"
	KeyPDB            = "PodDisruptionBudget.policy/v1"
	KeyConfigMap      = "ConfigMap.v1"
	KeyLease          = "Lease.coordination.k8s.io/v1"
	KeyJob            = "Job.batch/v1"
	KeyServiceAccount = "ServiceAccount.v1"
	KeyRole           = "Role.rbac.authorization.k8s.io/v1"
	KeyRoleBinding    = "RoleBinding.rbac.authorization.k8s.io/v1"
	KeyPod            = "Pod.v1"
	KeyPVC            = "PersistentVolumeClaim.v1"
)

// Observed is the decoded request: every object typed and indexed by name.
type Observed struct {
	Parent          api.EtcdCluster
	StatefulSets    map[string]*appsv1.StatefulSet
	Services        map[string]*corev1.Service
	PDBs            map[string]*policyv1.PodDisruptionBudget
	ConfigMaps      map[string]*corev1.ConfigMap
	Leases          map[string]*coordv1.Lease
	Jobs            map[string]*batchv1.Job
	ServiceAccounts map[string]*corev1.ServiceAccount
	Roles           map[string]*rbacv1.Role
	RoleBindings    map[string]*rbacv1.RoleBinding
	Pods            map[string]*corev1.Pod
	PVCs            map[string]*corev1.PersistentVolumeClaim
	Finalizing      bool
	// SpecError is why the parent's spec did not decode ("" when it did).
	SpecError string
	// Raw holds every child exactly as observed, by "group key/name" (for answers that must change
	// nothing, see echoLastApplied).
	Raw map[string]json.RawMessage
}

// InputError is a request the hook refuses (HTTP 4xx): nothing may be changed on its account.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// Decode checks and types a request. Any error is an *InputError.
func Decode(req *Request) (*Observed, error) {
	if len(req.Parent) == 0 || string(req.Parent) == "null" {
		return nil, inputErrorf("request has no parent")
	}
	o := &Observed{Finalizing: req.Finalizing}
	// The spec is decoded on its own: a spec the API server accepted but that does not fit the hook's
	// types (a mistyped affinity kept by preserve-unknown-fields, a quantity that does not parse) is an
	// invalid spec, answered with the last valid children and InvalidSpec, never a 4xx that would
	// freeze status and every repair.
	var parent struct {
		api.EtcdCluster
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(req.Parent, &parent); err != nil {
		return nil, inputErrorf("parent: %v", err)
	}
	o.Parent = parent.EtcdCluster
	if len(parent.Spec) > 0 && string(parent.Spec) != "null" {
		if err := json.Unmarshal(parent.Spec, &o.Parent.Spec); err != nil {
			o.Parent.Spec = api.ClusterSpec{}
			o.SpecError = err.Error()
		}
	}
	p := &o.Parent
	if p.APIVersion != api.APIVersion || p.Kind != api.Kind {
		return nil, inputErrorf("parent is %s %s, want %s %s", p.APIVersion, p.Kind, api.APIVersion, api.Kind)
	}
	if p.Name == "" || p.Namespace == "" || p.UID == "" {
		return nil, inputErrorf("parent metadata must have name, namespace and uid")
	}
	// Metacontroller sends finalizing only for a parent being deleted: the answer to it releases every
	// child, so a request that says finalizing about a live parent is refused, never acted upon.
	if req.Finalizing && p.DeletionTimestamp == nil {
		return nil, inputErrorf("finalizing is set but the parent has no metadata.deletionTimestamp: refusing to release its children")
	}
	ns := p.Namespace
	known := map[string]bool{}
	for _, k := range []string{KeyStatefulSet, KeyService, KeyPDB, KeyConfigMap, KeyLease, KeyJob, KeyServiceAccount, KeyRole, KeyRoleBinding} {
		known[k] = true
		// Metacontroller always sends every declared group, empty or not. An absent group is not an
		// empty one: answering as if it were would delete every object of that kind.
		if _, ok := req.Children[k]; !ok {
			return nil, inputErrorf("children group %s is absent (Metacontroller sends every declared group, even empty): refusing to answer, which would delete its objects", k)
		}
	}
	if err := unknownGroups(req.Children, known, "children"); err != nil {
		return nil, err
	}
	for _, k := range []string{KeyPod, KeyPVC} {
		if _, ok := req.Related[k]; !ok {
			return nil, inputErrorf("related group %s is absent (the customize hook asks for it): refusing to decide without it", k)
		}
	}
	var err error
	c, r := req.Children, req.Related
	o.Raw = map[string]json.RawMessage{}
	if o.StatefulSets, err = decodeGroup[appsv1.StatefulSet](c[KeyStatefulSet], KeyStatefulSet, "StatefulSet", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.Services, err = decodeGroup[corev1.Service](c[KeyService], KeyService, "Service", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.PDBs, err = decodeGroup[policyv1.PodDisruptionBudget](c[KeyPDB], KeyPDB, "PodDisruptionBudget", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.ConfigMaps, err = decodeGroup[corev1.ConfigMap](c[KeyConfigMap], KeyConfigMap, "ConfigMap", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.Leases, err = decodeGroup[coordv1.Lease](c[KeyLease], KeyLease, "Lease", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.Jobs, err = decodeGroup[batchv1.Job](c[KeyJob], KeyJob, "Job", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.ServiceAccounts, err = decodeGroup[corev1.ServiceAccount](c[KeyServiceAccount], KeyServiceAccount, "ServiceAccount", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.Roles, err = decodeGroup[rbacv1.Role](c[KeyRole], KeyRole, "Role", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.RoleBindings, err = decodeGroup[rbacv1.RoleBinding](c[KeyRoleBinding], KeyRoleBinding, "RoleBinding", ns, o.Raw); err != nil {
		return nil, err
	}
	if o.Pods, err = decodeGroup[corev1.Pod](r[KeyPod], KeyPod, "Pod", ns, nil); err != nil {
		return nil, err
	}
	if o.PVCs, err = decodeGroup[corev1.PersistentVolumeClaim](r[KeyPVC], KeyPVC, "PersistentVolumeClaim", ns, nil); err != nil {
		return nil, err
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
func claimTemplates(raw json.RawMessage) json.RawMessage {
	var sts struct {
		Spec struct {
			VolumeClaimTemplates json.RawMessage `json:"volumeClaimTemplates"`
		} `json:"spec"`
	}
	if json.Unmarshal(raw, &sts) != nil || string(sts.Spec.VolumeClaimTemplates) == "null" {
		return nil
	}
	return sts.Spec.VolumeClaimTemplates
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
		check("StatefulSet", sortedKeys(o.StatefulSets), n.StatefulSet()),
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
func unknownGroups(groups map[string]map[string]json.RawMessage, known map[string]bool, what string) error {
	var bad []string
	for k, objs := range groups {
		if !known[k] && len(objs) > 0 {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return inputErrorf("%s of undeclared types %v: the CompositeController registration and the hook disagree", what, bad)
	}
	return nil
}

// kubeObject is a typed Kubernetes object: its kind and metadata are read after one decode.
type kubeObject[T any] interface {
	*T
	metav1.Object
	GetObjectKind() schema.ObjectKind
}

// decodeGroup decodes one group, each object once, straight into its type, and checks its kind, name
// and namespace; objects are indexed by their own name, never by the request's key.
func decodeGroup[T any, PT kubeObject[T]](objs map[string]json.RawMessage, key, kind, ns string, raw map[string]json.RawMessage) (map[string]*T, error) {
	out := make(map[string]*T, len(objs))
	for _, k := range sortedKeys(objs) {
		v := PT(new(T))
		if err := json.Unmarshal(objs[k], v); err != nil {
			return nil, inputErrorf("%s[%q]: %v", key, k, err)
		}
		if got := v.GetObjectKind().GroupVersionKind().Kind; got != "" && got != kind {
			return nil, inputErrorf("%s[%q] has kind %q", key, k, got)
		}
		name := v.GetName()
		if name == "" {
			return nil, inputErrorf("%s[%q] has no metadata.name", key, k)
		}
		if v.GetNamespace() != "" && v.GetNamespace() != ns {
			return nil, inputErrorf("%s[%q] is in namespace %q, the parent in %q", key, k, v.GetNamespace(), ns)
		}
		if _, dup := out[name]; dup {
			return nil, inputErrorf("%s has two objects named %q", key, name)
		}
		out[name] = (*T)(v)
		if raw != nil {
			raw[key+"/"+name] = objs[k]
		}
	}
	return out, nil
}
