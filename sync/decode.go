package sync

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	gosync "sync"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdhook/etcdhook/api"
)

// The observed objects are decoded by go-json-experiment with encoding/json's rules (keys match
// case-insensitively, a later key wins and an object decodes into what an earlier one left, null clears
// a pointer, map or slice) into small structs holding only the fields the decision reads, then copied
// into their k8s.io/api types; everything else is passed over unread and unallocated (a 9-member
// request is 88 KB, of which the decision reads a few KB). What is read, per kind:
//
//	every kind     kind, apiVersion; metadata name, namespace, uid, generation, creationTimestamp,
//	               deletionTimestamp
//	the parent     metadata.annotations; status (all of it); the spec is decoded whole, on its own,
//	               with encoding/json
//	StatefulSet    metadata.annotations; spec.replicas, selector, serviceName, podManagementPolicy,
//	               updateStrategy, volumeClaimTemplates; status
//	ConfigMap      data
//	Lease          metadata.annotations; spec.holderIdentity, spec.renewTime
//	Pod            metadata.labels, ownerReferences; status.conditions, containerStatuses
//	PVC            metadata.labels; spec; status
//	Secret         data
//	Job            everything (a carried Job answers an observed Job's whole spec; Jobs are rare)
//
// (The last-applied annotation of any child is read from its bytes when the answer needs it, see
// echoLastApplied.) A field read anywhere else must be added here: TestDecodeMatchesTypedDecoding
// compares every fixture's answer with the one from a full typed decoding and fails when a field the
// answer depends on is missing.

// readOptions decode as encoding/json does.
var readOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(),
	jsonv2.WithUnmarshalers(jsonv2.JoinUnmarshalers(jsonv2.UnmarshalFromFunc(readTime),
		jsonv2.UnmarshalFromFunc(readStringMap), jsonv2.UnmarshalFromFunc(readStringField),
		jsonv2.UnmarshalFromFunc(skipNone))))

// readStringField decodes a string as encoding/json does (null leaves it as it was), interned when short.
func readStringField(dec *jsontext.Decoder, s *string) error {
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		return err
	case '"':
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		*s, err = readString(v)
		return err
	}
	return errors.ErrUnsupported // the library reports the type error
}

// readStringMap decodes a map[string]string (labels, annotations, ConfigMap data) as encoding/json does
// (null clears it, an object adds to what is there, a later key wins, null stores ""), without the
// library's reflection on each entry (three allocations an entry, a third of a request's); short
// strings are interned (strings.Clone of what repeats in every object: label keys and values,
// annotation keys).
func readStringMap(dec *jsontext.Decoder, m *map[string]string) error {
	switch dec.PeekKind() {
	case 'n':
		*m = nil
		_, err := dec.ReadToken()
		return err
	case '{':
	default:
		return errors.ErrUnsupported // the library reports the type error
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	if *m == nil {
		*m = map[string]string{}
	}
	for dec.PeekKind() != '}' {
		key, err := readName(dec)
		if err != nil {
			return err
		}
		var val string
		switch dec.PeekKind() {
		case 'n':
			_, err = dec.ReadToken()
		case '"':
			var v jsontext.Value
			if v, err = dec.ReadValue(); err == nil {
				val, err = readString(v)
			}
		default:
			err = &jsonv2.SemanticError{JSONKind: dec.PeekKind(), GoType: reflect.TypeFor[string]()}
		}
		if err != nil {
			return err
		}
		(*m)[key] = val
	}
	_, err := dec.ReadToken()
	return err
}

// readName reads an object member's name.
func readName(dec *jsontext.Decoder) (string, error) {
	k, err := dec.ReadValue()
	if err != nil {
		return "", err
	}
	return readString(k)
}

// readString is a JSON string's value: as written when it needs no unescaping, interned when short.
func readString(v jsontext.Value) (string, error) {
	raw := v[1 : len(v)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return interned(raw), nil
	}
	var s string
	err := jsonv2.Unmarshal(v, &s, jsonv1.DefaultOptionsV1()) // escapes and invalid UTF-8 as encoding/json reads them
	return s, err
}

// readTime decodes a metav1.Time as its UnmarshalJSON does (null makes it zero), without the
// json.Unmarshal of a string it calls (three allocations a time, and a request holds a hundred).
func readTime(dec *jsontext.Decoder, t *metav1.Time) error {
	if dec.PeekKind() != '"' {
		return errors.ErrUnsupported
	}
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	var buf [64]byte
	s, err := jsontext.AppendUnquote(buf[:0], v)
	if err != nil {
		return err
	}
	pt, err := time.Parse(time.RFC3339, string(s))
	if err != nil {
		return err
	}
	t.Time = pt.Local()
	return nil
}

type objectMeta struct {
	Name              string       `json:"name"`
	Namespace         string       `json:"namespace"`
	UID               types.UID    `json:"uid"`
	Generation        int64        `json:"generation"`
	CreationTimestamp metav1.Time  `json:"creationTimestamp"`
	DeletionTimestamp *metav1.Time `json:"deletionTimestamp"`
}

func (m *objectMeta) into(om *metav1.ObjectMeta) {
	om.Name, om.Namespace, om.UID, om.Generation = m.Name, m.Namespace, m.UID, m.Generation
	om.CreationTimestamp, om.DeletionTimestamp = m.CreationTimestamp, m.DeletionTimestamp
}

// object is what every kind shares: M is its metadata, S and St its spec and status (struct{} when
// not read).
type object[M, S, St any] struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Metadata   M      `json:"metadata"`
	Spec       S      `json:"spec"`
	Status     St     `json:"status"`
}

func (o *object[M, S, St]) typeMeta() metav1.TypeMeta {
	return metav1.TypeMeta{Kind: o.Kind, APIVersion: o.APIVersion}
}

// none is a member the decision does not read: passed over whatever it holds (the full types the
// reference decodes into have no such field for these kinds, or one never read).
type none struct{}

func skipNone(dec *jsontext.Decoder, _ *none) error { return dec.SkipValue() }

type (
	plainMeta struct {
		objectMeta `json:",inline"`
	}
	annMeta struct {
		objectMeta  `json:",inline"`
		Annotations map[string]string `json:"annotations"`
	}
	labelMeta struct {
		objectMeta `json:",inline"`
		Labels     map[string]string `json:"labels"`
	}
	podMeta struct {
		objectMeta      `json:",inline"`
		Labels          map[string]string       `json:"labels"`
		OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
	}
)

// ---- one reader per kind: decode into the small form, copy into the typed object ----

func readStatefulSet(r *objReader, b []byte, s *appsv1.StatefulSet) error {
	var w object[annMeta, struct {
		Replicas             *int32                           `json:"replicas"`
		Selector             *metav1.LabelSelector            `json:"selector"`
		ServiceName          string                           `json:"serviceName"`
		PodManagementPolicy  appsv1.PodManagementPolicyType   `json:"podManagementPolicy"`
		UpdateStrategy       appsv1.StatefulSetUpdateStrategy `json:"updateStrategy"`
		VolumeClaimTemplates []corev1.PersistentVolumeClaim   `json:"volumeClaimTemplates"`
	}, appsv1.StatefulSetStatus]
	if err := r.unmarshal(b, &w); err != nil {
		return err
	}
	s.TypeMeta = w.typeMeta()
	w.Metadata.into(&s.ObjectMeta)
	s.Annotations = w.Metadata.Annotations
	sp := &w.Spec
	s.Spec = appsv1.StatefulSetSpec{Replicas: sp.Replicas, Selector: sp.Selector, ServiceName: sp.ServiceName,
		PodManagementPolicy: sp.PodManagementPolicy, UpdateStrategy: sp.UpdateStrategy, VolumeClaimTemplates: sp.VolumeClaimTemplates}
	s.Status = w.Status
	return nil
}

func readConfigMap(r *objReader, b []byte, c *corev1.ConfigMap) error {
	var w struct {
		object[plainMeta, none, none] `json:",inline"`
		Data                          map[string]string `json:"data"`
	}
	if err := r.unmarshal(b, &w); err != nil {
		return err
	}
	c.TypeMeta = w.typeMeta()
	w.Metadata.into(&c.ObjectMeta)
	c.Data = w.Data
	return nil
}

func readLease(r *objReader, b []byte, l *coordv1.Lease) error {
	var w object[annMeta, struct {
		HolderIdentity *string           `json:"holderIdentity"`
		RenewTime      *metav1.MicroTime `json:"renewTime"`
	}, none]
	if err := r.unmarshal(b, &w); err != nil {
		return err
	}
	l.TypeMeta = w.typeMeta()
	w.Metadata.into(&l.ObjectMeta)
	l.Annotations = w.Metadata.Annotations
	l.Spec.HolderIdentity, l.Spec.RenewTime = w.Spec.HolderIdentity, w.Spec.RenewTime
	return nil
}

func readPod(r *objReader, b []byte, p *corev1.Pod) error {
	var w object[podMeta, none, struct {
		Conditions        []corev1.PodCondition    `json:"conditions"`
		ContainerStatuses []corev1.ContainerStatus `json:"containerStatuses"`
	}]
	if err := r.unmarshal(b, &w); err != nil {
		return err
	}
	p.TypeMeta = w.typeMeta()
	w.Metadata.into(&p.ObjectMeta)
	p.Labels, p.OwnerReferences = w.Metadata.Labels, w.Metadata.OwnerReferences
	p.Status.Conditions, p.Status.ContainerStatuses = w.Status.Conditions, w.Status.ContainerStatuses
	return nil
}

// readJob reads everything: a carried Job answers its whole spec.
func readJob(r *objReader, b []byte, j *batchv1.Job) error { return r.unmarshal(b, j) }

// readPVC: identity and labels, and the size asked and had (volume growth, docs/design/17-growing-volumes.md §17).
func readPVC(r *objReader, b []byte, c *corev1.PersistentVolumeClaim) error {
	var w object[labelMeta, corev1.PersistentVolumeClaimSpec, corev1.PersistentVolumeClaimStatus]
	if err := r.unmarshal(b, &w); err != nil {
		return err
	}
	c.TypeMeta = w.typeMeta()
	w.Metadata.into(&c.ObjectMeta)
	c.Labels, c.Spec, c.Status = w.Metadata.Labels, w.Spec, w.Status
	return nil
}

// readSecret reads a user's TLS Secret: its data (base64 in JSON, as encoding/json reads []byte).
func readSecret(r *objReader, b []byte, s *corev1.Secret) error {
	var w struct {
		object[plainMeta, none, none] `json:",inline"`
		Data                          map[string][]byte `json:"data"`
	}
	if err := r.unmarshal(b, &w); err != nil {
		return err
	}
	s.TypeMeta = w.typeMeta()
	w.Metadata.into(&s.ObjectMeta)
	s.Data = w.Data
	return nil
}

// readIdentity reads what every kind has, for the children whose other fields the decision never reads
// (Services, PDBs, accounts, roles, bindings; CronJobs: the backup status comes from the backup Lease
// and Jobs; NetworkPolicies).
func readIdentity[T any, PT kubeObject[T]](r *objReader, b []byte, o *T) error {
	var w object[plainMeta, none, none]
	if err := r.unmarshal(b, &w); err != nil {
		return err
	}
	v, m := PT(o), &w.Metadata
	*v.GetObjectKind().(*metav1.TypeMeta) = w.typeMeta()
	v.SetName(m.Name)
	v.SetNamespace(m.Namespace)
	v.SetUID(m.UID)
	v.SetGeneration(m.Generation)
	v.SetCreationTimestamp(m.CreationTimestamp)
	v.SetDeletionTimestamp(m.DeletionTimestamp)
	return nil
}

// readParent reads the parent's identity, annotations and status, and returns its spec as sent: the
// spec is decoded on its own (decodeRequest), so that one that does not fit is an invalid spec, not a
// 4xx.
func readParent(r *objReader, b []byte, p *api.EtcdCluster) (spec []byte, err error) {
	var w object[annMeta, jsontext.Value, api.ClusterStatus]
	if err := r.unmarshal(b, &w); err != nil {
		return nil, err
	}
	p.TypeMeta = w.typeMeta()
	w.Metadata.into(&p.ObjectMeta)
	p.Annotations = w.Metadata.Annotations
	p.Status = w.Status
	return w.Spec, nil
}

// objReader decodes every object of one request with one decoder: the strings it makes are interned
// across objects (the same label keys and values, annotation keys and names recur in every object).
type objReader struct {
	dec *jsontext.Decoder
	buf bytes.Buffer
}

var objReaders = gosync.Pool{New: func() any {
	r := &objReader{}
	r.dec = jsontext.NewDecoder(&r.buf)
	return r
}}

// unmarshal decodes one value, b, into v; b is read in place (a bytes.Buffer is parsed without a copy).
func (r *objReader) unmarshal(b []byte, v any) error {
	r.buf = *bytes.NewBuffer(b)
	r.dec.Reset(&r.buf, readOptions)
	return jsonv2.UnmarshalDecode(r.dec, v)
}

// kubeObject is a typed Kubernetes object: its kind and metadata are read after decoding.
type kubeObject[T any] interface {
	*T
	metav1.Object
	GetObjectKind() schema.ObjectKind
}

// decodeGroup decodes one group, each object once, and checks its kind, name and namespace; objects
// are indexed by their own name, never by the request's key. raw, when given, receives each object's
// bytes.
func decodeGroup[T any, PT kubeObject[T]](r *objReader, g *group, kind, ns string, raw map[childID][]byte, read func(*objReader, []byte, *T) error) (map[string]*T, error) {
	out := make(map[string]*T, len(g.objs))
	objs := make([]T, len(g.objs)) // one allocation for the group
	for i, obj := range g.objs {
		v := PT(&objs[i])
		if err := read(r, obj.raw, &objs[i]); err != nil {
			// Worded as the full typed decoding words it (the object holds at least this error).
			if werr := json.Unmarshal(obj.raw, new(T)); werr != nil {
				err = werr
			}
			return nil, inputErrorf("%s[%q]: %v", g.key, obj.key, err)
		}
		if got := v.GetObjectKind().GroupVersionKind().Kind; got != "" && got != kind {
			return nil, inputErrorf("%s[%q] has kind %q", g.key, obj.key, got)
		}
		name := v.GetName()
		if name == "" {
			return nil, inputErrorf("%s[%q] has no metadata.name", g.key, obj.key)
		}
		if v.GetNamespace() != "" && v.GetNamespace() != ns {
			return nil, inputErrorf("%s[%q] is in namespace %q, the parent in %q", g.key, obj.key, v.GetNamespace(), ns)
		}
		if _, dup := out[name]; dup {
			return nil, inputErrorf("%s has two objects named %q", g.key, name)
		}
		out[name] = v
		if raw != nil {
			raw[childID{g.key, name}] = obj.raw
		}
	}
	return out, nil
}
