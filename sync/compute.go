package sync

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// Compute is the sync hook: a pure function of the request, the current time and the server's options.
// The same arguments give the same response, byte for byte once marshalled.
func Compute(req *Request, now time.Time, opts Options) (*Response, error) {
	o, err := Decode(req)
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
		// Nothing to render from, but children exist: answer them unchanged and say why in status.
		children, err := echoLastApplied(o)
		if err != nil {
			return nil, err
		}
		return &Response{Status: p.status(), Children: children, ResyncAfterSeconds: resyncBusySeconds}, nil
	}
	children, rendered, err := p.children()
	if err != nil {
		return nil, err
	}
	deleted, err := p.deletions(rendered)
	if err != nil {
		return nil, err
	}
	resync := float64(resyncIdleSeconds)
	if p.busy != "" || p.rolling || p.pendingSpec || p.quorumLost || p.cleanup || !f.bootstrapped || len(p.waiting) > 0 {
		resync = resyncBusySeconds
	}
	return &Response{Status: p.status(), Children: children, ResyncAfterSeconds: resync, Deleted: deleted}, nil
}

// children renders every child in a fixed order, and says which (group key/name) it rendered. Without a
// spec to render from it renders nothing: Compute calls it so only when no child exists (otherwise it
// answers with echoLastApplied).
func (p *plan) children() ([]any, map[string]bool, error) {
	out := []any{}
	rendered := map[string]bool{}
	if !p.hasSpec {
		return out, rendered, nil
	}
	objs := p.rbac()
	objs = append(objs, p.configMap())
	for _, s := range p.services() {
		objs = append(objs, s)
	}
	objs = append(objs, p.statefulSet(), p.pdb())
	for _, l := range p.leaseObjects() {
		objs = append(objs, l)
	}
	// Jobs by name, so that a carried Job and a new one list the same whichever sync made it.
	sort.SliceStable(p.jobs, func(a, b int) bool { return p.jobs[a].Name < p.jobs[b].Name })
	seen := map[string]bool{}
	for _, j := range p.jobs {
		if !seen[j.Name] {
			seen[j.Name] = true
			objs = append(objs, j)
		}
	}
	vctRaw := claimTemplates(p.f.obs.Raw[KeyStatefulSet+"/"+p.f.names.StatefulSet()])
	for _, obj := range objs {
		m, err := toChild(obj)
		if err != nil {
			return nil, nil, fmt.Errorf("rendering %T: %w", obj, err)
		}
		if _, ok := obj.(*appsv1.StatefulSet); ok && p.f.sts != nil && vctRaw != nil {
			// The observed templates, byte for byte (see claimTemplates).
			var vct any
			if err := json.Unmarshal(vctRaw, &vct); err != nil {
				return nil, nil, fmt.Errorf("observed volumeClaimTemplates: %w", err)
			}
			m["spec"].(map[string]any)["volumeClaimTemplates"] = vct
		}
		out = append(out, m)
		rendered[groupKeyOf(m)+"/"+m["metadata"].(map[string]any)["name"].(string)] = true
	}
	return out, rendered, nil
}

// groupKeyOf spells a rendered object's group key as requests do: Kind.group/version, or Kind.v1.
func groupKeyOf(m map[string]any) string {
	return m["kind"].(string) + "." + m["apiVersion"].(string)
}

// finalize answers a finalize call (registered only if the user adds the finalize hook): every child is
// released to deletion; volumes are not children and stay (Retain). Finalized once no member pod is left.
func finalize(o *Observed) *Response {
	st := o.Parent.Status
	st.ObservedGeneration = o.Parent.Generation
	left := len(o.StatefulSets) + len(o.Pods)
	st.Message = fmt.Sprintf("deleting: waiting for %d StatefulSet and %d member pods to go; volumes are kept", len(o.StatefulSets), len(o.Pods))
	resp := &Response{Status: &st, Children: []any{}, Finalized: left == 0}
	if !resp.Finalized {
		resp.ResyncAfterSeconds = resyncBusySeconds
	}
	return resp
}

// CustomizeRequest is Metacontroller's customize hook request.
type CustomizeRequest struct {
	Controller map[string]any  `json:"controller"`
	Parent     api.EtcdCluster `json:"parent"`
}

// RelatedRule is one relatedResources entry of the customize response.
type RelatedRule struct {
	APIVersion    string                `json:"apiVersion"`
	Resource      string                `json:"resource"`
	LabelSelector *metav1.LabelSelector `json:"labelSelector"`
}

// CustomizeResponse lists the related objects a sync needs.
type CustomizeResponse struct {
	RelatedResources []RelatedRule `json:"relatedResources"`
}

// Customize selects the cluster's member pods and claims by instance and component labels; they are
// related objects, never children (Metacontroller would adopt and delete the claims).
func Customize(req *CustomizeRequest) (*CustomizeResponse, error) {
	p := &req.Parent
	if p.APIVersion != api.APIVersion || p.Kind != api.Kind {
		return nil, inputErrorf("parent is %s %s, want %s %s", p.APIVersion, p.Kind, api.APIVersion, api.Kind)
	}
	if p.Name == "" {
		return nil, inputErrorf("parent has no metadata.name")
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{
		api.LabelInstance: p.Name, api.LabelComponent: api.ComponentEtcd,
	}}
	return &CustomizeResponse{RelatedResources: []RelatedRule{
		{APIVersion: "v1", Resource: "pods", LabelSelector: sel},
		{APIVersion: "v1", Resource: "persistentvolumeclaims", LabelSelector: sel},
	}}, nil
}
