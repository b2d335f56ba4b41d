package sync

import (
	"context"
	"fmt"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/render"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// Compute is the sync hook: a pure function of the request, the current time and the server's options.
// The same arguments give the same response, byte for byte once marshalled (AppendJSON).
// Its children are maps (map[string]any), the form tests inspect; the server's answer (Answer) leaves
// each as its JSON.
func Compute(req *Request, now time.Time, opts Options) (*Response, error) {
	o, err := wire.DecodeRequest(req)
	if err != nil {
		return nil, err
	}
	resp, err := Answer(context.Background(), o, now, opts)
	if err != nil {
		return nil, err
	}
	for i, c := range resp.Children {
		if v, ok := c.(jsontext.Value); ok {
			var m map[string]any
			if err := wire.Unmarshal(v, &m); err != nil {
				return nil, err
			}
			resp.Children[i] = m
		}
	}
	return resp, nil
}

// ComputeBody is Compute on a request body as it arrived. Errors are a *MalformedError (not a request),
// an *InputError (refused) or a bug.
func ComputeBody(body []byte, now time.Time, opts Options) (*Response, error) {
	o, err := wire.Decode(body)
	if err != nil {
		return nil, err
	}
	return Answer(context.Background(), o, now, opts)
}

// Answer decides and renders the answer to a decoded request; the response names the parent for the
// log. It gives up with ctx's error, and no answer, once ctx is done (the client went away or its
// deadline passed): between its phases and between children, so a request nobody waits for stops
// holding its slot.
func Answer(ctx context.Context, o *Observed, now time.Time, opts Options) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	resp, err := decideAnswer(ctx, o, now, opts)
	if resp != nil {
		resp.Parent, resp.Finalizing = o.ParentKey(), o.Finalizing
		if resp.Status != nil {
			resp.Changes = Changes(o.Parent.Status.Conditions, resp.Status.Conditions)
		}
	}
	return resp, err
}

func decideAnswer(ctx context.Context, o *Observed, now time.Time, opts Options) (*Response, error) {
	if o.Finalizing {
		return finalize(o), nil
	}
	f := facts.Read(o, now)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := decide(f, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.Echo {
		// Nothing to render from, but children exist: answer them unchanged and say why in status.
		children, err := echoLastApplied(o)
		if err != nil {
			return nil, err
		}
		return &Response{Status: render.Status(p.f, &p.Decision), Children: children, ResyncAfterSeconds: resyncBusySeconds}, nil
	}
	children, rendered, err := p.children(ctx)
	if err != nil {
		return nil, err
	}
	deleted, err := deletions(p.f, rendered, deletionInput{released: p.released, policyOn: p.Spec.Network.PolicyOn(), writerOff: p.writerWanted(), applierOff: p.Standby.ApplierOff})
	if err != nil {
		return nil, err
	}
	return &Response{Status: render.Status(p.f, &p.Decision), Children: children, ResyncAfterSeconds: p.resyncAfter(), Deleted: deleted}, nil
}

// children renders every child in a fixed order (render.Objects), each as its JSON (wire.Child), and says
// which it rendered. Without a spec to render from it renders nothing: answer
// calls it so only when no child exists (otherwise it answers with echoLastApplied).
func (p *plan) children(ctx context.Context) ([]any, map[wire.ChildID]bool, error) {
	out := []any{}
	rendered := map[wire.ChildID]bool{}
	if !p.HasSpec {
		return out, rendered, nil
	}
	for _, obj := range render.Objects(p.desired()) {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		k, ok := obj.(kubeChild)
		if !ok {
			return nil, nil, fmt.Errorf("rendering %T: not a Kubernetes object", obj)
		}
		var vct jsontext.Value
		if sts, isSTS := obj.(*appsv1.StatefulSet); isSTS && sts.Name == p.f.Names.StatefulSet() {
			// The members' claim templates, not the backup writer's (it has none).
			vct = wire.ClaimTemplates(p.f.Observed.Raw(wire.ChildID{Key: wire.KeyStatefulSet, Name: sts.Name}))
		}
		b, err := wire.Child(obj, vct)
		if err != nil {
			return nil, nil, fmt.Errorf("rendering %T: %w", obj, err)
		}
		out = append(out, b)
		tm := k.GetObjectKind().(*metav1.TypeMeta)
		rendered[wire.ChildID{Key: tm.Kind + "." + tm.APIVersion, Name: k.GetName()}] = true
	}
	return out, rendered, nil
}

// kubeChild is what every rendered child is.
type kubeChild interface {
	GetObjectKind() schema.ObjectKind
	GetName() string
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
	APIVersion string `json:"apiVersion"`
	Resource   string `json:"resource"`
	// LabelSelector or Names, never both (Metacontroller's rule).
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	Names         []string              `json:"names,omitempty"`
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
		return nil, wire.InputErrorf("parent is %s %s, want %s %s", p.APIVersion, p.Kind, api.APIVersion, api.Kind)
	}
	if p.Name == "" {
		return nil, wire.InputErrorf("parent has no metadata.name")
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{
		api.LabelInstance: p.Name, api.LabelComponent: api.ComponentEtcd,
	}}
	rules := []RelatedRule{
		{APIVersion: "v1", Resource: "pods", LabelSelector: sel},
		{APIVersion: "v1", Resource: "persistentvolumeclaims", LabelSelector: sel},
	}
	// The user's TLS Secrets, by name, so that /sync can check them before rendering a pod that mounts
	// them (docs/design/14-tls.md §14.5). Only named ones: the hook never sees any other Secret.
	if names := tlsSecretNames(p); len(names) > 0 {
		rules = append(rules, RelatedRule{APIVersion: "v1", Resource: "secrets", Names: names})
	}
	return &CustomizeResponse{RelatedResources: rules}, nil
}

// resyncAfter is how soon Metacontroller asks again: soon while anything is under way or awaited, else
// at the idle pace.
func (p *plan) resyncAfter() float64 {
	waits := len(p.Waiting)
	if p.pauseWaited {
		// A paused cluster waits for a human, not for time: its fleet measurement (e2e/RESULTS-fleet.md)
		// had 25 paused clusters asking every 5 s, more syncs than 75 running ones.
		waits--
	}
	if p.Busy != "" || p.Rolling || p.PendingSpec || p.QuorumLost || p.cleanup || !p.f.Bootstrapped || waits > 0 {
		return resyncBusySeconds
	}
	return resyncIdleSeconds
}
