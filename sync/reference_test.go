package sync

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/render"
)

// The reference: how the hook decoded and rendered before DecodeBody and the canonical encoder, kept
// to check that they change no answer. Every object is decoded whole into its type (encoding/json,
// from the json.RawMessage a Request holds), every child goes through map[string]any, and the response
// is json.Marshal'd.

// errTypedDecode marks a refusal the reference made because an object did not decode into its full
// type: DecodeBody reads only the fields the decision uses, so it refuses only when one of those is
// mistyped.
var errTypedDecode = errors.New("typed decoding")

// referenceBody answers a body as the hook did: HTTP code and body.
func referenceBody(body []byte, now time.Time, opts Options) (int, []byte, error) {
	var req Request
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return http.StatusBadRequest, nil, err
	}
	if dec.More() {
		return http.StatusBadRequest, nil, errors.New("data after the request object")
	}
	resp, err := referenceCompute(&req, now, opts)
	var in *InputError
	switch {
	case errors.As(err, &in):
		return http.StatusUnprocessableEntity, nil, err
	case err != nil:
		return http.StatusInternalServerError, nil, err
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return http.StatusInternalServerError, nil, err
	}
	return http.StatusOK, append(b, '\n'), nil
}

// currentBody answers a body as the hook does now.
func currentBody(body []byte, now time.Time, opts Options) (int, []byte, error) {
	resp, err := ComputeBody(body, now, opts)
	var in *InputError
	var bad *MalformedError
	switch {
	case errors.As(err, &bad):
		return http.StatusBadRequest, nil, err
	case errors.As(err, &in):
		return http.StatusUnprocessableEntity, nil, err
	case err != nil:
		return http.StatusInternalServerError, nil, err
	}
	b, err := resp.AppendJSON(nil)
	if err != nil {
		return http.StatusInternalServerError, nil, err
	}
	return http.StatusOK, append(b, '\n'), nil
}

func referenceCompute(req *Request, now time.Time, opts Options) (*Response, error) {
	o, err := referenceDecode(req)
	if err != nil {
		return nil, err
	}
	if o.Finalizing {
		return finalize(o), nil
	}
	f := newFacts(o, now)
	p, err := decide(f, opts)
	if err != nil {
		return nil, err
	}
	if !p.hasSpec && len(o.childRefs()) > 0 {
		children, err := echoLastApplied(o)
		if err != nil {
			return nil, err
		}
		return &Response{Status: p.status(), Children: children, ResyncAfterSeconds: resyncBusySeconds}, nil
	}
	children, rendered, err := referenceChildren(p)
	if err != nil {
		return nil, err
	}
	deleted, err := p.deletions(rendered)
	if err != nil {
		return nil, err
	}
	return &Response{Status: p.status(), Children: children, ResyncAfterSeconds: p.resyncAfter(), Deleted: deleted}, nil
}

func referenceDecode(req *Request) (*Observed, error) {
	if len(req.Parent) == 0 || string(req.Parent) == "null" {
		return nil, inputErrorf("request has no parent")
	}
	o := &Observed{Finalizing: req.Finalizing}
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
	if err := checkParent(p, req.Finalizing); err != nil {
		return nil, err
	}
	ns := p.Namespace
	known := []string{KeyStatefulSet, KeyService, KeyPDB, KeyConfigMap, KeyLease, KeyJob, KeyServiceAccount, KeyRole, KeyRoleBinding}
	for _, k := range known {
		if _, ok := req.Children[k]; !ok {
			return nil, inputErrorf("children group %s is absent (Metacontroller sends every declared group, even empty): refusing to answer, which would delete its objects", k)
		}
	}
	if err := unknownGroups(groupsOf(req.Children), append(known, KeyCronJob, KeyNetworkPolicy), "children"); err != nil {
		return nil, err
	}
	for _, k := range []string{KeyPod, KeyPVC} {
		if _, ok := req.Related[k]; !ok {
			return nil, inputErrorf("related group %s is absent (the customize hook asks for it): refusing to decide without it", k)
		}
	}
	var err error
	c, r := req.Children, req.Related
	o.raw = map[childID][]byte{}
	if o.StatefulSets, err = refDecodeGroup[appsv1.StatefulSet](c[KeyStatefulSet], KeyStatefulSet, "StatefulSet", ns, o.raw); err != nil {
		return nil, err
	}
	if o.Services, err = refDecodeGroup[corev1.Service](c[KeyService], KeyService, "Service", ns, o.raw); err != nil {
		return nil, err
	}
	if o.PDBs, err = refDecodeGroup[policyv1.PodDisruptionBudget](c[KeyPDB], KeyPDB, "PodDisruptionBudget", ns, o.raw); err != nil {
		return nil, err
	}
	if o.ConfigMaps, err = refDecodeGroup[corev1.ConfigMap](c[KeyConfigMap], KeyConfigMap, "ConfigMap", ns, o.raw); err != nil {
		return nil, err
	}
	if o.Leases, err = refDecodeGroup[coordv1.Lease](c[KeyLease], KeyLease, "Lease", ns, o.raw); err != nil {
		return nil, err
	}
	if o.Jobs, err = refDecodeGroup[batchv1.Job](c[KeyJob], KeyJob, "Job", ns, o.raw); err != nil {
		return nil, err
	}
	if o.ServiceAccounts, err = refDecodeGroup[corev1.ServiceAccount](c[KeyServiceAccount], KeyServiceAccount, "ServiceAccount", ns, o.raw); err != nil {
		return nil, err
	}
	if o.Roles, err = refDecodeGroup[rbacv1.Role](c[KeyRole], KeyRole, "Role", ns, o.raw); err != nil {
		return nil, err
	}
	if o.RoleBindings, err = refDecodeGroup[rbacv1.RoleBinding](c[KeyRoleBinding], KeyRoleBinding, "RoleBinding", ns, o.raw); err != nil {
		return nil, err
	}
	if g, ok := c[KeyCronJob]; ok {
		o.CronJobsDeclared = true
		if o.CronJobs, err = refDecodeGroup[batchv1.CronJob](g, KeyCronJob, "CronJob", ns, o.raw); err != nil {
			return nil, err
		}
	}
	if g, ok := c[KeyNetworkPolicy]; ok {
		o.NetworkPoliciesDeclared = true
		if o.NetworkPolicies, err = refDecodeGroup[networkingv1.NetworkPolicy](g, KeyNetworkPolicy, "NetworkPolicy", ns, o.raw); err != nil {
			return nil, err
		}
	}
	if o.Pods, err = refDecodeGroup[corev1.Pod](r[KeyPod], KeyPod, "Pod", ns, nil); err != nil {
		return nil, err
	}
	if o.PVCs, err = refDecodeGroup[corev1.PersistentVolumeClaim](r[KeyPVC], KeyPVC, "PersistentVolumeClaim", ns, nil); err != nil {
		return nil, err
	}
	if g, ok := r[KeySecret]; ok {
		if o.Secrets, err = refDecodeGroup[corev1.Secret](g, KeySecret, "Secret", ns, nil); err != nil {
			return nil, err
		}
	}
	if err := unexpectedCore(o); err != nil {
		return nil, err
	}
	return o, nil
}

func refDecodeGroup[T any, PT kubeObject[T]](objs map[string]json.RawMessage, key, kind, ns string, raw map[childID][]byte) (map[string]*T, error) {
	out := make(map[string]*T, len(objs))
	for _, k := range sortedKeys(objs) {
		v := PT(new(T))
		if err := json.Unmarshal(objs[k], v); err != nil {
			return nil, &refTypedError{&InputError{Msg: fmt.Sprintf("%s[%q]: %v", key, k, err)}}
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
			raw[childID{key, name}] = objs[k]
		}
	}
	return out, nil
}

// refTypedError is an InputError from typed decoding.
type refTypedError struct{ *InputError }

func (e *refTypedError) Unwrap() []error { return []error{e.InputError, errTypedDecode} }

func referenceChildren(p *plan) ([]any, map[childID]bool, error) {
	out := []any{}
	rendered := map[childID]bool{}
	if !p.hasSpec {
		return out, rendered, nil
	}
	objs := render.Objects(p.desired())
	var vctRaw json.RawMessage
	if raw := p.f.obs.raw[childID{KeyStatefulSet, p.f.names.StatefulSet()}]; raw != nil {
		var sts struct {
			Spec struct {
				VolumeClaimTemplates json.RawMessage `json:"volumeClaimTemplates"`
			} `json:"spec"`
		}
		if json.Unmarshal(raw, &sts) == nil && string(sts.Spec.VolumeClaimTemplates) != "null" {
			vctRaw = sts.Spec.VolumeClaimTemplates
		}
	}
	for _, obj := range objs {
		m, err := referenceToChild(obj)
		if err != nil {
			return nil, nil, fmt.Errorf("rendering %T: %w", obj, err)
		}
		if sts, ok := obj.(*appsv1.StatefulSet); ok && sts.Name == p.f.names.StatefulSet() && p.f.sts != nil && vctRaw != nil {
			var vct any
			if err := json.Unmarshal(vctRaw, &vct); err != nil {
				return nil, nil, fmt.Errorf("observed volumeClaimTemplates: %w", err)
			}
			m["spec"].(map[string]any)["volumeClaimTemplates"] = vct
		}
		out = append(out, m)
		rendered[childID{m["kind"].(string) + "." + m["apiVersion"].(string), m["metadata"].(map[string]any)["name"].(string)}] = true
	}
	return out, rendered, nil
}

func referenceToChild(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	referenceDropNulls(m)
	delete(m, "status")
	if s, ok := m["spec"].(map[string]any); ok && len(s) == 0 {
		delete(m, "spec")
	}
	return m, nil
}

func referenceDropNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if x == nil {
				delete(t, k)
				continue
			}
			referenceDropNulls(x)
		}
	case []any:
		for _, x := range t {
			referenceDropNulls(x)
		}
	}
}
