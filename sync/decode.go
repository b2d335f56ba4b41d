package sync

import (
	"encoding/json"
	"time"

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

// The observed objects are decoded into their k8s.io/api types, but only the fields the decision reads
// are filled; everything else is passed over unread, unchecked and unallocated (a 9-member request is
// 88 KB, of which the decision reads a few KB). What is read, per kind:
//
//	every kind     kind, apiVersion; metadata name, namespace, uid, generation, creationTimestamp,
//	               deletionTimestamp
//	the parent     status (all of it); the spec is decoded whole, on its own, with encoding/json
//	StatefulSet    metadata.annotations; spec.replicas, selector, serviceName, podManagementPolicy,
//	               updateStrategy; status
//	ConfigMap      data
//	Lease          metadata.annotations; spec.holderIdentity, spec.renewTime
//	Pod            metadata.labels, ownerReferences (apiVersion, kind, name, uid, controller);
//	               status.conditions
//	PVC            metadata.labels
//	Job            everything (carryJob answers an observed Job's whole spec; Jobs are rare)
//
// (The last-applied annotation of any child is read from its bytes when the answer needs it, see
// echoLastApplied.) A field read anywhere else must be added here: TestDecodeMatchesTypedDecoding
// compares every fixture's answer with the one from a full typed decoding and fails when a field the
// answer depends on is missing.

// kubeObject is a typed Kubernetes object: its kind and metadata are read after decoding.
type kubeObject[T any] interface {
	*T
	metav1.Object
	GetObjectKind() schema.ObjectKind
}

// decodeGroup decodes one group with r, each object once, straight into its type, and checks its kind,
// name and namespace; objects are indexed by their own name, never by the request's key. raw, when
// given, receives each object's bytes.
func decodeGroup[T any, PT kubeObject[T]](r *reader, g *group, kind, ns string, raw map[childID][]byte, read func(*reader, *T)) (map[string]*T, error) {
	out := make(map[string]*T, len(g.objs))
	objs := make([]T, len(g.objs)) // one allocation for the group
	for i, obj := range g.objs {
		v := PT(&objs[i])
		r.b, r.i, r.err = obj.raw, 0, nil
		read(r, &objs[i])
		if r.err != nil {
			// Worded as the full typed decoding words it (the object holds at least this error).
			err := json.Unmarshal(obj.raw, new(T))
			if err == nil {
				err = r.err
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

// Metadata fields read besides the scalar ones (name, namespace, uid, generation, creation and deletion
// timestamps, read for every kind: they cost no allocation).
type metaFields uint8

const (
	metaLabels metaFields = 1 << iota
	metaAnnotations
	metaOwners
)

// readObject reads the members every kind shares and hands the others to more, which reports whether
// it took the member (and read its value).
func (r *reader) readObject(tm *metav1.TypeMeta, om *metav1.ObjectMeta, want metaFields, more func(k key) bool) {
	if !r.object() {
		return
	}
	for k, ok := r.nextKey(); ok; k, ok = r.nextKey() {
		switch {
		case k.is("kind"):
			r.stringInto(&tm.Kind)
		case k.is("apiVersion"):
			r.stringInto(&tm.APIVersion)
		case k.is("metadata"):
			r.readMeta(om, want)
		case more == nil || !more(k):
			r.skip()
		}
	}
}

func (r *reader) readMeta(m *metav1.ObjectMeta, want metaFields) {
	if !r.object() {
		return
	}
	for k, ok := r.nextKey(); ok; k, ok = r.nextKey() {
		switch {
		case k.is("name"):
			r.stringInto(&m.Name)
		case k.is("namespace"):
			r.stringInto(&m.Namespace)
		case k.is("uid"):
			r.stringInto((*string)(&m.UID))
		case k.is("generation"):
			r.int64Into(&m.Generation)
		case k.is("creationTimestamp"):
			r.timeInto(&m.CreationTimestamp)
		case k.is("deletionTimestamp"):
			r.timePtrInto(&m.DeletionTimestamp)
		case want&metaLabels != 0 && k.is("labels"):
			r.stringMapInto(&m.Labels)
		case want&metaAnnotations != 0 && k.is("annotations"):
			r.stringMapInto(&m.Annotations)
		case want&metaOwners != 0 && k.is("ownerReferences"):
			readSlice(r, &m.OwnerReferences, (*reader).readOwner)
		default:
			r.skip()
		}
	}
}

func (r *reader) readOwner(o *metav1.OwnerReference) {
	if !r.object() {
		return
	}
	for k, ok := r.nextKey(); ok; k, ok = r.nextKey() {
		switch {
		case k.is("apiVersion"):
			r.stringInto(&o.APIVersion)
		case k.is("kind"):
			r.stringInto(&o.Kind)
		case k.is("name"):
			r.stringInto(&o.Name)
		case k.is("uid"):
			r.stringInto((*string)(&o.UID))
		case k.is("controller"):
			r.boolPtrInto(&o.Controller)
		default:
			r.skip()
		}
	}
}

// readSlice decodes an array into *dst as encoding/json does: null clears it, [] makes it empty, and
// elements are decoded into those already there (up to the slice's capacity) before new ones are added.
func readSlice[T any](r *reader, dst *[]T, elem func(*reader, *T)) {
	if r.null() {
		*dst = nil
		return
	}
	if !r.array() {
		return
	}
	s := *dst
	n := 0
	for r.nextElem(n == 0) {
		if n < cap(s) {
			s = s[:n+1]
		} else {
			s = append(s[:n], *new(T))
		}
		elem(r, &s[n])
		n++
	}
	if n == 0 {
		s = []T{}
	}
	*dst = s[:n]
}

// jsonInto decodes the value at the cursor with encoding/json (for small, rarely changing parts whose
// every field is read).
func (r *reader) jsonInto(v any) {
	if err := json.Unmarshal(r.span(), v); err != nil {
		r.fail(err)
	}
}

func (r *reader) boolPtrInto(dst **bool) {
	if r.null() {
		*dst = nil
		return
	}
	if *dst == nil {
		*dst = new(bool)
	}
	r.boolInto(*dst)
}

// timeInto decodes a metav1.Time as its UnmarshalJSON does (null makes it zero), without the
// allocations of the json.Unmarshal it calls for a plain string.
func (r *reader) timeInto(t *metav1.Time) {
	span := r.span()
	if s, ok := plainString(span); ok {
		pt, err := time.Parse(time.RFC3339, s)
		if err != nil {
			r.fail(err)
			return
		}
		t.Time = pt.Local()
		return
	}
	if err := t.UnmarshalJSON(span); err != nil {
		r.fail(err)
	}
}

func (r *reader) timePtrInto(dst **metav1.Time) {
	if r.null() {
		*dst = nil
		return
	}
	if *dst == nil {
		*dst = new(metav1.Time)
	}
	r.timeInto(*dst)
}

func (r *reader) microTimePtrInto(dst **metav1.MicroTime) {
	if r.null() {
		*dst = nil
		return
	}
	if *dst == nil {
		*dst = new(metav1.MicroTime)
	}
	span := r.span()
	if s, ok := plainString(span); ok {
		pt, err := time.Parse(metav1.RFC3339Micro, s)
		if err != nil {
			r.fail(err)
			return
		}
		(*dst).Time = pt.Local()
		return
	}
	if err := (*dst).UnmarshalJSON(span); err != nil {
		r.fail(err)
	}
}

// plainString is the contents of a JSON string that needs no decoding (no escape, ASCII).
func plainString(span []byte) (string, bool) {
	if len(span) < 2 || span[0] != '"' {
		return "", false
	}
	for _, c := range span[1 : len(span)-1] {
		if c == '\\' || c >= 0x80 {
			return "", false
		}
	}
	return bytesString(span[1 : len(span)-1]), true
}

// ---- one reader per kind ----

func readStatefulSet(r *reader, s *appsv1.StatefulSet) {
	r.readObject(&s.TypeMeta, &s.ObjectMeta, metaAnnotations, func(k key) bool {
		switch {
		case k.is("spec"):
			if !r.object() {
				return true
			}
			for k, ok := r.nextKey(); ok; k, ok = r.nextKey() {
				switch {
				case k.is("replicas"):
					r.int32PtrInto(&s.Spec.Replicas)
				case k.is("selector"):
					r.jsonInto(&s.Spec.Selector)
				case k.is("serviceName"):
					r.stringInto(&s.Spec.ServiceName)
				case k.is("podManagementPolicy"):
					r.stringInto((*string)(&s.Spec.PodManagementPolicy))
				case k.is("updateStrategy"):
					r.jsonInto(&s.Spec.UpdateStrategy)
				case k.is("volumeClaimTemplates"):
					// Read for their size (volume growth); they are answered from the raw bytes (claimTemplates).
					r.jsonInto(&s.Spec.VolumeClaimTemplates)
				default:
					r.skip()
				}
			}
		case k.is("status"):
			r.jsonInto(&s.Status)
		default:
			return false
		}
		return true
	})
}

func readConfigMap(r *reader, c *corev1.ConfigMap) {
	r.readObject(&c.TypeMeta, &c.ObjectMeta, 0, func(k key) bool {
		if !k.is("data") {
			return false
		}
		r.stringMapInto(&c.Data)
		return true
	})
}

func readLease(r *reader, l *coordv1.Lease) {
	r.readObject(&l.TypeMeta, &l.ObjectMeta, metaAnnotations, func(k key) bool {
		if !k.is("spec") {
			return false
		}
		if !r.object() {
			return true
		}
		for k, ok := r.nextKey(); ok; k, ok = r.nextKey() {
			switch {
			case k.is("holderIdentity"):
				r.stringPtrInto(&l.Spec.HolderIdentity)
			case k.is("renewTime"):
				r.microTimePtrInto(&l.Spec.RenewTime)
			default:
				r.skip()
			}
		}
		return true
	})
}

func readPod(r *reader, p *corev1.Pod) {
	if !r.object() {
		return
	}
	for k, ok := r.nextKey(); ok; k, ok = r.nextKey() {
		switch {
		case k.is("kind"):
			r.stringInto(&p.Kind)
		case k.is("apiVersion"):
			r.stringInto(&p.APIVersion)
		case k.is("metadata"):
			r.readMeta(&p.ObjectMeta, metaLabels|metaOwners)
		case k.is("status"):
			if !r.object() {
				continue
			}
			for k, ok := r.nextKey(); ok; k, ok = r.nextKey() {
				switch {
				case k.is("conditions"):
					readSlice(r, &p.Status.Conditions, (*reader).readPodCondition)
				case k.is("containerStatuses"):
					// Read for the image each container ran (imageVersions).
					r.jsonInto(&p.Status.ContainerStatuses)
				default:
					r.skip()
				}
			}
		default:
			r.skip()
		}
	}
}

func (r *reader) readPodCondition(c *corev1.PodCondition) {
	if !r.object() {
		return
	}
	for k, ok := r.nextKey(); ok; k, ok = r.nextKey() {
		switch {
		case k.is("type"):
			r.stringInto((*string)(&c.Type))
		case k.is("status"):
			r.stringInto((*string)(&c.Status))
		case k.is("observedGeneration"):
			r.int64Into(&c.ObservedGeneration)
		case k.is("lastProbeTime"):
			r.timeInto(&c.LastProbeTime)
		case k.is("lastTransitionTime"):
			r.timeInto(&c.LastTransitionTime)
		case k.is("reason"):
			r.stringInto(&c.Reason)
		case k.is("message"):
			r.stringInto(&c.Message)
		default:
			r.skip()
		}
	}
}

func readJob(r *reader, j *batchv1.Job) { r.jsonInto(j) }

// readCronJob: identity only (the backup status comes from the backup Lease and Jobs).
func readCronJob(r *reader, c *batchv1.CronJob) { r.readObject(&c.TypeMeta, &c.ObjectMeta, 0, nil) }

func readNetworkPolicy(r *reader, n *networkingv1.NetworkPolicy) {
	r.readObject(&n.TypeMeta, &n.ObjectMeta, 0, nil)
}

// readPVC: identity and labels, and the size asked and had (volume growth, docs/design/17-growing-volumes.md §17).
func readPVC(r *reader, c *corev1.PersistentVolumeClaim) {
	r.readObject(&c.TypeMeta, &c.ObjectMeta, metaLabels, func(k key) bool {
		switch {
		case k.is("spec"):
			r.jsonInto(&c.Spec)
		case k.is("status"):
			r.jsonInto(&c.Status)
		default:
			return false
		}
		return true
	})
}

// readSecret reads a user's TLS Secret: its data (base64 in JSON, as encoding/json reads []byte).
func readSecret(r *reader, s *corev1.Secret) {
	r.readObject(&s.TypeMeta, &s.ObjectMeta, 0, func(k key) bool {
		if !k.is("data") {
			return false
		}
		r.jsonInto(&s.Data)
		return true
	})
}

func readService(r *reader, s *corev1.Service) { r.readObject(&s.TypeMeta, &s.ObjectMeta, 0, nil) }

func readPDB(r *reader, p *policyv1.PodDisruptionBudget) {
	r.readObject(&p.TypeMeta, &p.ObjectMeta, 0, nil)
}

func readServiceAccount(r *reader, s *corev1.ServiceAccount) {
	r.readObject(&s.TypeMeta, &s.ObjectMeta, 0, nil)
}

func readRole(r *reader, o *rbacv1.Role) { r.readObject(&o.TypeMeta, &o.ObjectMeta, 0, nil) }

func readRoleBinding(r *reader, o *rbacv1.RoleBinding) {
	r.readObject(&o.TypeMeta, &o.ObjectMeta, 0, nil)
}

// ---- the parent ----

// readParent reads the parent's identity, metadata and status, and returns its spec as sent: the spec
// is decoded on its own (decodeRequest), so that one that does not fit is an invalid spec, not a 4xx.
func readParent(r *reader, p *api.EtcdCluster) (spec []byte) {
	// Annotations: etcd.io/backup-now.
	r.readObject(&p.TypeMeta, &p.ObjectMeta, metaAnnotations, func(k key) bool {
		switch {
		case k.is("spec"):
			spec = r.span()
		case k.is("status"):
			r.readClusterStatus(&p.Status)
		default:
			return false
		}
		return true
	})
	return spec
}

// readClusterStatus reads every field of the status (the hook carries it over): a field added to
// api.ClusterStatus must be added here, which TestStatusReaderReadsEveryField checks.
func (r *reader) readClusterStatus(st *api.ClusterStatus) {
	if !r.object() {
		return
	}
	for k, ok := r.nextKey(); ok; k, ok = r.nextKey() {
		switch {
		case k.is("phase"):
			r.stringInto(&st.Phase)
		case k.is("message"):
			r.stringInto(&st.Message)
		case k.is("observedGeneration"):
			r.int64Into(&st.ObservedGeneration)
		case k.is("bootstrapped"):
			r.boolInto(&st.Bootstrapped)
		case k.is("clusterID"):
			r.stringInto(&st.ClusterID)
		case k.is("leader"):
			r.stringInto(&st.Leader)
		case k.is("currentVersion"):
			r.stringInto(&st.CurrentVersion)
		case k.is("readyReplicas"):
			r.int32Into(&st.ReadyReplicas)
		case k.is("replicas"):
			r.int32Into(&st.Replicas)
		case k.is("target"):
			if r.null() {
				st.Target = nil
				continue
			}
			if !r.object() {
				continue
			}
			if st.Target == nil {
				st.Target = new(api.Target)
			}
			for k, ok := r.nextKey(); ok; k, ok = r.nextKey() {
				switch {
				case k.is("size"):
					r.int32Into(&st.Target.Size)
				case k.is("version"):
					r.stringInto(&st.Target.Version)
				default:
					r.skip()
				}
			}
		case k.is("members"):
			readSlice(r, &st.Members, (*reader).readMemberStatus)
		case k.is("tls"):
			// Rare and small: encoding/json's reading.
			st.TLS = nil
			r.jsonInto(&st.TLS)
		case k.is("backup"):
			st.Backup = nil
			r.jsonInto(&st.Backup)
		case k.is("restore"):
			st.Restore = nil
			r.jsonInto(&st.Restore)
		case k.is("storage"):
			st.Storage = nil
			r.jsonInto(&st.Storage)
		case k.is("conditions"):
			readSlice(r, &st.Conditions, (*reader).readCondition)
		default:
			r.skip()
		}
	}
}

func (r *reader) readMemberStatus(m *api.MemberStatus) {
	if !r.object() {
		return
	}
	for k, ok := r.nextKey(); ok; k, ok = r.nextKey() {
		switch {
		case k.is("name"):
			r.stringInto(&m.Name)
		case k.is("id"):
			r.stringInto(&m.ID)
		case k.is("peerURL"):
			r.stringInto(&m.PeerURL)
		case k.is("clientURL"):
			r.stringInto(&m.ClientURL)
		case k.is("role"):
			r.stringInto(&m.Role)
		case k.is("healthy"):
			r.boolInto(&m.Healthy)
		case k.is("version"):
			r.stringInto(&m.Version)
		case k.is("dbSize"):
			r.int64Into(&m.DBSize)
		case k.is("dbSizeInUse"):
			r.int64Into(&m.DBSizeInUse)
		case k.is("lastDefragTime"):
			m.LastDefragTime = nil
			r.jsonInto(&m.LastDefragTime)
		default:
			r.skip()
		}
	}
}

func (r *reader) readCondition(c *metav1.Condition) {
	if !r.object() {
		return
	}
	for k, ok := r.nextKey(); ok; k, ok = r.nextKey() {
		switch {
		case k.is("type"):
			r.stringInto(&c.Type)
		case k.is("status"):
			r.stringInto((*string)(&c.Status))
		case k.is("observedGeneration"):
			r.int64Into(&c.ObservedGeneration)
		case k.is("lastTransitionTime"):
			r.timeInto(&c.LastTransitionTime)
		case k.is("reason"):
			r.stringInto(&c.Reason)
		case k.is("message"):
			r.stringInto(&c.Message)
		default:
			r.skip()
		}
	}
}
