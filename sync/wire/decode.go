package wire

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"time"

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

// decodeOptions read as encoding/json does (the Kubernetes types carry v1 tags and methods), with two
// of the library's own unmarshalers in place of what costs most and gives nothing: metav1's times parsed
// as their UnmarshalJSON does, without the json.Unmarshal of a string it calls for each (a request holds
// a hundred), managedFields passed over (never read; an answer that echoes a child uses its bytes), and
// of some kinds only what the decision reads (views).
var decodeOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.WithUnmarshalers(jsonv2.JoinUnmarshalers(
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, t *metav1.Time) error { return readTime(dec, time.RFC3339, &t.Time) }),
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, t *metav1.MicroTime) error {
		return readTime(dec, metav1.RFC3339Micro, &t.Time)
	}),
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, _ *[]metav1.ManagedFieldsEntry) error { return dec.SkipValue() }),
	jsonv2.UnmarshalFromFunc(readStringMap),
	views,
)))

// readStringMap decodes a map[string]string (labels, annotations, data) as encoding/json does (null
// clears it, an object adds to what is there, a later key wins, a null value stores "") without the
// library's reflection on each entry: a request holds several hundred, and they cost a 9-member sync
// more than a tenth of its CPU (docs/performance.md, the library wire).
func readStringMap(dec *jsontext.Decoder, m *map[string]string) error {
	switch dec.PeekKind() {
	case 'n':
		*m = nil
		_, err := dec.ReadToken()
		return err
	case '{':
	default:
		return errors.ErrUnsupported // the library words the type error
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	if *m == nil {
		*m = map[string]string{}
	}
	for dec.PeekKind() != '}' {
		k, err := dec.ReadToken()
		if err != nil {
			return err
		}
		key, val := k.String(), ""
		switch dec.PeekKind() {
		case 'n', '"':
			v, err := dec.ReadToken()
			if err != nil {
				return err
			}
			if v.Kind() == '"' {
				val = v.String()
			}
		default:
			return &jsonv2.SemanticError{JSONKind: dec.PeekKind(), GoType: reflect.TypeFor[string]()}
		}
		(*m)[key] = val
	}
	_, err := dec.ReadToken()
	return err
}

// readTime reads a string time in layout as metav1's UnmarshalJSON does (null is the zero time, the
// result is in local time); any other kind is left to that method, which words the error.
func readTime(dec *jsontext.Decoder, layout string, t *time.Time) error {
	switch dec.PeekKind() {
	case 'n':
		*t = time.Time{}
		_, err := dec.ReadToken()
		return err
	case '"':
	default:
		return errors.ErrUnsupported
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	pt, err := time.Parse(layout, tok.String())
	if err != nil {
		return err
	}
	*t = pt.Local()
	return nil
}

// within decodes v from the value dec is at, a part of a request whose decoding has already checked it
// whole. Under encoding/json's rules every UnmarshalDecode first checks that the value it is given is
// JSON (so that a syntax error is reported before a type error): called again for each group, object
// and view, that checked each object's bytes three more times, a fifth of a 9-member sync's CPU
// (docs/performance.md, the library wire). Inside a checked value the check cannot fail, so it is left
// out; a type error there still refuses the request (the first one is reported, where encoding/json
// reports the first after reading on).
func within(dec *jsontext.Decoder, v any) error { return jsonv2.UnmarshalDecode(dec, v, checked) }

var checked = jsonv1.ReportErrorsWithLegacySemantics(false)

// wholeOptions decode every field of every object: what the views must change no answer against.
var wholeOptions = jsonv1.DefaultOptionsV1()

// Unmarshal decodes b into v as encoding/json would (the options every read of this package uses).
func Unmarshal(b []byte, v any) error { return jsonv2.Unmarshal(b, v, decodeOptions) }

// Decode checks and types a request body in one pass of the library: a body that is not JSON is a
// *MalformedError, one the hook refuses (a value of the wrong type, a request a registration never
// sends) an *InputError. After the request's value only whitespace, or a stray ']' or '}' (where
// json.Decoder.More stopped, which the hook always accepted), may follow. body must stay unchanged while
// the Observed is in use (an answer that echoes children reads them from it).
func Decode(body []byte) (*Observed, error) { return decodeBody(body, decodeOptions) }

// DecodeRequest checks and types a request (a test's form of a body). Any error is an *InputError.
func DecodeRequest(req *Request) (*Observed, error) { return decodeWith(req, decodeOptions) }

// DecodeRequestWhole is DecodeRequest with every field of every object decoded, the views left out:
// what sync's TestViewsChangeNoAnswer holds the answers against.
func DecodeRequestWhole(req *Request) (*Observed, error) { return decodeWith(req, wholeOptions) }

func decodeWith(req *Request, opts jsonv2.Options) (*Observed, error) {
	body, err := Marshal(req)
	if err != nil {
		return nil, InputErrorf("%v", err)
	}
	o, err := decodeBody(body, opts)
	var bad *MalformedError
	if errors.As(err, &bad) {
		return nil, &InputError{Msg: bad.Msg}
	}
	return o, err
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

// request is a request body as the library decodes it: every group typed at once (group), objects of
// groups the registration does not declare kept as sent.
type request struct {
	Parent   jsontext.Value `json:"parent"`
	Children struct {
		StatefulSets    group[rawStatefulSet]                `json:"StatefulSet.apps/v1,case:strict"`
		Services        group[corev1.Service]                `json:"Service.v1,case:strict"`
		PDBs            group[policyv1.PodDisruptionBudget]  `json:"PodDisruptionBudget.policy/v1,case:strict"`
		ConfigMaps      group[corev1.ConfigMap]              `json:"ConfigMap.v1,case:strict"`
		Leases          group[coordv1.Lease]                 `json:"Lease.coordination.k8s.io/v1,case:strict"`
		Jobs            group[batchv1.Job]                   `json:"Job.batch/v1,case:strict"`
		ServiceAccounts group[corev1.ServiceAccount]         `json:"ServiceAccount.v1,case:strict"`
		Roles           group[rbacv1.Role]                   `json:"Role.rbac.authorization.k8s.io/v1,case:strict"`
		RoleBindings    group[rbacv1.RoleBinding]            `json:"RoleBinding.rbac.authorization.k8s.io/v1,case:strict"`
		CronJobs        group[batchv1.CronJob]               `json:"CronJob.batch/v1,case:strict"`
		NetworkPolicies group[networkingv1.NetworkPolicy]    `json:"NetworkPolicy.networking.k8s.io/v1,case:strict"`
		Undeclared      map[string]map[string]jsontext.Value `json:",embed"`
	} `json:"children"`
	Related struct {
		Pods    group[corev1.Pod]                   `json:"Pod.v1,case:strict"`
		PVCs    group[corev1.PersistentVolumeClaim] `json:"PersistentVolumeClaim.v1,case:strict"`
		Secrets group[corev1.Secret]                `json:"Secret.v1,case:strict"`
	} `json:"related"`
	Finalizing bool `json:"finalizing"`
}

// group is one group of a request: present or not (Metacontroller sends every declared group, even
// empty, so an absent one is not an empty one), and its objects by their request key.
type group[T any] struct {
	present bool
	objs    map[string]*T
}

// UnmarshalJSONFrom decodes a group as encoding/json decodes a map: null clears it, a group given twice
// adds the second's objects to the first's.
func (g *group[T]) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	g.present = true
	if dec.PeekKind() == 'n' {
		g.objs = nil
		_, err := dec.ReadToken()
		return err
	}
	if g.objs == nil {
		g.objs = map[string]*T{}
	}
	return within(dec, &g.objs)
}

// rawStatefulSet is an observed StatefulSet and where its bytes lie in the body: the members' claim
// templates are answered as the API server wrote them (ClaimTemplates). It is decoded once, in place;
// reading its bytes first and decoding them again cost a second pass over the largest object.
type rawStatefulSet struct {
	appsv1.StatefulSet
	start, end int64 // the decoder's offsets around it (the name's colon and any space before start)
}

func (s *rawStatefulSet) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	s.start = dec.InputOffset()
	if err := within(dec, &s.StatefulSet); err != nil {
		return err
	}
	s.end = dec.InputOffset()
	return nil
}

// rawIn is the StatefulSet's bytes in body, the body it was decoded from.
func (s *rawStatefulSet) rawIn(body []byte) []byte {
	return bytes.TrimLeft(body[s.start:s.end], " \t\r\n:")
}

func decodeBody(body []byte, opts jsonv2.Options) (*Observed, error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), opts) // a bytes.Buffer is parsed in place, not copied

	var req request
	if err := jsonv2.UnmarshalDecode(dec, &req, opts); err != nil {
		var semantic *jsonv2.SemanticError
		if errors.As(err, &semantic) {
			return nil, InputErrorf("%v", err)
		}
		return nil, &MalformedError{Msg: err.Error()}
	}
	if err := trailing(body[dec.InputOffset():]); err != nil {
		return nil, err
	}
	if len(req.Parent) == 0 || string(req.Parent) == "null" {
		return nil, InputErrorf("request has no parent")
	}
	o := &Observed{Finalizing: req.Finalizing, body: body[:dec.InputOffset()], raw: map[ChildID][]byte{}}
	if err := decodeParent(req.Parent, o, opts); err != nil {
		return nil, err
	}
	p := &o.Parent
	if err := checkParent(p, req.Finalizing); err != nil {
		return nil, err
	}
	c, r := &req.Children, &req.Related
	// An absent group is not an empty one: answering as if it were would delete every object of that
	// kind.
	for _, g := range []struct {
		key     string
		present bool
	}{{KeyStatefulSet, c.StatefulSets.present}, {KeyService, c.Services.present}, {KeyPDB, c.PDBs.present}, {KeyConfigMap, c.ConfigMaps.present},
		{KeyLease, c.Leases.present}, {KeyJob, c.Jobs.present}, {KeyServiceAccount, c.ServiceAccounts.present}, {KeyRole, c.Roles.present},
		{KeyRoleBinding, c.RoleBindings.present}} {
		if !g.present {
			return nil, InputErrorf("children group %s is absent (Metacontroller sends every declared group, even empty): refusing to answer, which would delete its objects", g.key)
		}
	}
	if err := undeclared(c.Undeclared); err != nil {
		return nil, err
	}
	if !r.Pods.present || !r.PVCs.present {
		key := KeyPod
		if r.Pods.present {
			key = KeyPVC
		}
		return nil, InputErrorf("related group %s is absent (the customize hook asks for it): refusing to decide without it", key)
	}
	ns := p.Namespace
	sets, err := objects(c.StatefulSets, KeyStatefulSet, "StatefulSet", ns)
	if err != nil {
		return nil, err
	}
	o.StatefulSets = map[string]*appsv1.StatefulSet{}
	for name, s := range sets {
		o.StatefulSets[name], o.raw[ChildID{KeyStatefulSet, name}] = &s.StatefulSet, s.rawIn(body)
	}
	if o.Services, err = objects(c.Services, KeyService, "Service", ns); err != nil {
		return nil, err
	}
	if o.PDBs, err = objects(c.PDBs, KeyPDB, "PodDisruptionBudget", ns); err != nil {
		return nil, err
	}
	if o.ConfigMaps, err = objects(c.ConfigMaps, KeyConfigMap, "ConfigMap", ns); err != nil {
		return nil, err
	}
	if o.Leases, err = objects(c.Leases, KeyLease, "Lease", ns); err != nil {
		return nil, err
	}
	if o.Jobs, err = objects(c.Jobs, KeyJob, "Job", ns); err != nil {
		return nil, err
	}
	if o.ServiceAccounts, err = objects(c.ServiceAccounts, KeyServiceAccount, "ServiceAccount", ns); err != nil {
		return nil, err
	}
	if o.Roles, err = objects(c.Roles, KeyRole, "Role", ns); err != nil {
		return nil, err
	}
	if o.RoleBindings, err = objects(c.RoleBindings, KeyRoleBinding, "RoleBinding", ns); err != nil {
		return nil, err
	}
	if o.CronJobsDeclared = c.CronJobs.present; o.CronJobsDeclared {
		if o.CronJobs, err = objects(c.CronJobs, KeyCronJob, "CronJob", ns); err != nil {
			return nil, err
		}
	}
	if o.NetworkPoliciesDeclared = c.NetworkPolicies.present; o.NetworkPoliciesDeclared {
		if o.NetworkPolicies, err = objects(c.NetworkPolicies, KeyNetworkPolicy, "NetworkPolicy", ns); err != nil {
			return nil, err
		}
	}
	if o.Pods, err = objects(r.Pods, KeyPod, "Pod", ns); err != nil {
		return nil, err
	}
	if o.PVCs, err = objects(r.PVCs, KeyPVC, "PersistentVolumeClaim", ns); err != nil {
		return nil, err
	}
	if r.Secrets.present {
		if o.Secrets, err = objects(r.Secrets, KeySecret, "Secret", ns); err != nil {
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
func decodeParent(b []byte, o *Observed, opts jsonv2.Options) error {
	var w struct {
		metav1.TypeMeta
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     jsontext.Value    `json:"spec"`
		Status   api.ClusterStatus `json:"status"`
	}
	if err := jsonv2.Unmarshal(b, &w, opts); err != nil {
		return InputErrorf("parent: %v", err)
	}
	o.Parent = api.EtcdCluster{TypeMeta: w.TypeMeta, ObjectMeta: w.Metadata, Status: w.Status}
	if len(w.Spec) > 0 && string(w.Spec) != "null" {
		if err := jsonv2.Unmarshal(w.Spec, &o.Parent.Spec, opts); err != nil {
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

// objects indexes a group's objects by their own name, never by the request's key, and checks their
// kind, name and namespace.
func objects[T any, PT kubeObject[T]](g group[T], key, kind, ns string) (map[string]*T, error) {
	out := make(map[string]*T, len(g.objs))
	keys := make([]string, 0, len(g.objs))
	for k := range g.objs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := PT(g.objs[k])
		if v == nil {
			return nil, InputErrorf("%s[%q] is null", key, k)
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
		out[name] = g.objs[k]
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
		{"StatefulSet", names(o.StatefulSets), []string{n.StatefulSet(), n.BackupWriter(), n.StandbyApplier()}},
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

// undeclared refuses child types the hook does not render: answering would delete all of them.
func undeclared(groups map[string]map[string]jsontext.Value) error {
	var bad []string
	for k, objs := range groups {
		if len(objs) > 0 {
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
