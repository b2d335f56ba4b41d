// Package driver is a minimal, test-only implementation of Metacontroller's CompositeController contract
// (../shared/reference/metacontroller-contract.md), for the e2e suite on a cluster where Metacontroller
// cannot be installed. It reads the shipped registration (metacontroller/compositecontroller.yaml), so
// the registration under test is the one users get. Production uses the real Metacontroller.
//
// What it does, as Metacontroller v4.17.2 does with --apply-strategy=server-side-apply: watch parents,
// their owned children and the related objects the customize hook selects; call customize and sync (hook
// v1 keys) at the registered Service URL, one sync at a time per parent; apply desired children with
// server-side apply (field manager "metacontroller", force), honouring InPlace and OnDelete; delete owned
// children the answer omits; write the status subresource with observedGeneration; requeue after
// resyncAfterSeconds and every resyncPeriodSeconds; back off on errors. Not implemented: finalize
// hooks, Rolling* strategies, adoption of orphans, ETags, webhook auth.
package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/yaml"
)

// CompositeController is the part of the registration the driver uses.
type CompositeController struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		GenerateSelector    bool `json:"generateSelector"`
		ResyncPeriodSeconds int  `json:"resyncPeriodSeconds"`
		ParentResource      struct {
			APIVersion string `json:"apiVersion"`
			Resource   string `json:"resource"`
		} `json:"parentResource"`
		ChildResources []struct {
			APIVersion     string `json:"apiVersion"`
			Resource       string `json:"resource"`
			UpdateStrategy struct {
				Method string `json:"method"`
			} `json:"updateStrategy"`
		} `json:"childResources"`
		Hooks map[string]Hook `json:"hooks"`
	} `json:"spec"`
	raw map[string]any
}

// Hook is one webhook of the registration.
type Hook struct {
	Version string `json:"version"`
	Webhook struct {
		URL     string `json:"url"`
		Path    string `json:"path"`
		Timeout string `json:"timeout"`
		Service *struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
			Port      int    `json:"port"`
			Protocol  string `json:"protocol"`
		} `json:"service"`
	} `json:"webhook"`
}

// URL is built as Metacontroller builds it: <protocol>://<name>.<namespace>:<port><path>.
func (h Hook) URL() string {
	if h.Webhook.URL != "" {
		return h.Webhook.URL
	}
	s := h.Webhook.Service
	proto, port := s.Protocol, s.Port
	if proto == "" {
		proto = "http"
	}
	if port == 0 {
		port = 80
	}
	return fmt.Sprintf("%s://%s.%s:%d%s", proto, s.Name, s.Namespace, port, h.Webhook.Path)
}

func (h Hook) timeout() time.Duration {
	d, err := time.ParseDuration(h.Webhook.Timeout)
	if err != nil || d <= 0 {
		return 10 * time.Second
	}
	return d
}

// Load reads a CompositeController manifest.
func Load(path string) (*CompositeController, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cc := &CompositeController{}
	if err := yaml.Unmarshal(b, cc); err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(b, &cc.raw); err != nil {
		return nil, err
	}
	if cc.Spec.Hooks["sync"].Webhook.Path == "" && cc.Spec.Hooks["sync"].Webhook.URL == "" {
		return nil, errors.New("registration has no sync hook")
	}
	return cc, nil
}

type child struct {
	gvr      schema.GroupVersionResource
	gvk      schema.GroupVersionKind
	key      string // "Kind.group/version" as Metacontroller keys children
	strategy string
	informer cache.SharedIndexInformer
}

// Driver runs the contract.
type Driver struct {
	CC   *CompositeController
	Dyn  dynamic.Interface
	HTTP *http.Client
	Log  *slog.Logger
	// ResolveURL may rewrite hook URLs (the suite points them at a port-forward on Kind).
	ResolveURL func(string) string

	mapper   meta.RESTMapper
	parent   child
	children []*child
	related  map[string]*child // by resource plural in core v1: pods, persistentvolumeclaims
	queue    workqueue.TypedRateLimitingInterface[string]
	rulesMu  sync.Mutex
	rules    map[string][]relatedRule // by parent UID/generation
	// Syncs counts hook calls (for the suite's checks), Errors failed syncs.
	Syncs, Errors int64
	statsMu       sync.Mutex
}

type relatedRule struct {
	APIVersion    string                `json:"apiVersion"`
	Resource      string                `json:"resource"`
	LabelSelector *metav1.LabelSelector `json:"labelSelector"`
}

// New prepares a driver for the registration on the cluster at cfg.
func New(cfg *rest.Config, cc *CompositeController, log *slog.Logger) (*Driver, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return nil, err
	}
	d := &Driver{CC: cc, Dyn: dyn, HTTP: &http.Client{}, Log: log, mapper: restmapper.NewDiscoveryRESTMapper(groups),
		related: map[string]*child{}, rules: map[string][]relatedRule{}}
	d.queue = workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 30*time.Second))
	mk := func(apiVersion, resource, strategy string) (*child, error) {
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			return nil, err
		}
		gvr := gv.WithResource(resource)
		gvk, err := d.mapper.KindFor(gvr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", gvr, err)
		}
		key := gvk.Kind + "." + apiVersion
		return &child{gvr: gvr, gvk: gvk, key: key, strategy: strategy}, nil
	}
	p, err := mk(cc.Spec.ParentResource.APIVersion, cc.Spec.ParentResource.Resource, "")
	if err != nil {
		return nil, err
	}
	d.parent = *p
	for _, cr := range cc.Spec.ChildResources {
		c, err := mk(cr.APIVersion, cr.Resource, cr.UpdateStrategy.Method)
		if err != nil {
			return nil, err
		}
		if c.strategy == "" {
			c.strategy = "OnDelete"
		}
		d.children = append(d.children, c)
	}
	for _, res := range []string{"pods", "persistentvolumeclaims"} {
		c, err := mk("v1", res, "")
		if err != nil {
			return nil, err
		}
		d.related[res] = c
	}
	return d, nil
}

// Run watches and syncs until ctx ends.
func (d *Driver) Run(ctx context.Context) error {
	f := dynamicinformer.NewDynamicSharedInformerFactory(d.Dyn, 0)
	d.parent.informer = f.ForResource(d.parent.gvr).Informer()
	_, _ = d.parent.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { d.enqueueObj(o) },
		UpdateFunc: func(_, o any) { d.enqueueObj(o) },
		DeleteFunc: func(o any) { d.enqueueObj(o) },
	})
	for _, c := range d.children {
		c.informer = f.ForResource(c.gvr).Informer()
		_, _ = c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { d.enqueueOwner(o) },
			UpdateFunc: func(old, o any) { d.enqueueOwnerIfChanged(old, o) },
			DeleteFunc: func(o any) { d.enqueueOwner(o) },
		})
	}
	for _, c := range d.related {
		c.informer = f.ForResource(c.gvr).Informer()
		res := c.gvr.Resource
		_, _ = c.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { d.enqueueRelated(res, o) },
			UpdateFunc: func(old, o any) { d.enqueueRelatedIfChanged(res, old, o) },
			DeleteFunc: func(o any) { d.enqueueRelated(res, o) },
		})
	}
	f.Start(ctx.Done())
	for gvr, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache of %s did not sync", gvr)
		}
	}
	d.Log.Info("driver running", "controller", d.CC.Metadata.Name, "parent", d.parent.gvr.String())
	if p := d.CC.Spec.ResyncPeriodSeconds; p > 0 {
		go func() {
			t := time.NewTicker(time.Duration(p) * time.Second)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					for _, o := range d.parent.informer.GetStore().List() {
						d.enqueueObj(o)
					}
				}
			}
		}()
	}
	go func() { <-ctx.Done(); d.queue.ShutDown() }()
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ { // the workqueue never hands one key to two workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d.work(ctx) {
			}
		}()
	}
	wg.Wait()
	return nil
}

func keyOf(o any) (string, bool) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return "", false
	}
	return u.GetNamespace() + "/" + u.GetName(), true
}

func (d *Driver) enqueueObj(o any) {
	if k, ok := keyOf(o); ok {
		d.queue.Add(k)
	}
}

func (d *Driver) enqueueOwner(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	if r := metav1.GetControllerOf(u); r != nil && r.Kind == d.parent.gvk.Kind {
		d.queue.Add(u.GetNamespace() + "/" + r.Name)
	}
}

func (d *Driver) enqueueOwnerIfChanged(old, o any) {
	if a, b := old.(*unstructured.Unstructured), o.(*unstructured.Unstructured); a.GetResourceVersion() == b.GetResourceVersion() {
		return
	}
	d.enqueueOwner(o)
}

func (d *Driver) enqueueRelated(res string, o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	for _, po := range d.parent.informer.GetStore().List() {
		p := po.(*unstructured.Unstructured)
		if p.GetNamespace() != u.GetNamespace() {
			continue
		}
		for _, r := range d.cachedRules(p) {
			if r.Resource == res && matches(r.LabelSelector, u.GetLabels()) {
				d.queue.Add(p.GetNamespace() + "/" + p.GetName())
			}
		}
	}
}

func (d *Driver) enqueueRelatedIfChanged(res string, old, o any) {
	if a, b := old.(*unstructured.Unstructured), o.(*unstructured.Unstructured); a.GetResourceVersion() == b.GetResourceVersion() {
		return
	}
	d.enqueueRelated(res, o)
}

func matches(sel *metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(l))
}

func (d *Driver) cachedRules(p *unstructured.Unstructured) []relatedRule {
	d.rulesMu.Lock()
	defer d.rulesMu.Unlock()
	return d.rules[fmt.Sprintf("%s/%d", p.GetUID(), p.GetGeneration())]
}

func (d *Driver) work(ctx context.Context) bool {
	key, quit := d.queue.Get()
	if quit {
		return false
	}
	defer d.queue.Done(key)
	resync, err := d.sync(ctx, key)
	d.statsMu.Lock()
	d.Syncs++
	if err != nil {
		d.Errors++
	}
	d.statsMu.Unlock()
	if err != nil {
		d.Log.Warn("sync error", "parent", key, "error", err)
		d.queue.AddRateLimited(key)
		return true
	}
	d.queue.Forget(key)
	if resync > 0 {
		d.queue.AddAfter(key, resync)
	}
	return true
}

// Stats returns how many syncs ran and how many failed.
func (d *Driver) Stats() (syncs, errs int64) {
	d.statsMu.Lock()
	defer d.statsMu.Unlock()
	return d.Syncs, d.Errors
}

func (d *Driver) url(h Hook) string {
	u := h.URL()
	if d.ResolveURL != nil {
		u = d.ResolveURL(u)
	}
	return u
}

func (d *Driver) post(ctx context.Context, h Hook, body any, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, h.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, d.url(h), bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("hook: %w", err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("hook %s: unsupported status code: %d body: %s", d.url(h), resp.StatusCode, rb)
	}
	return json.Unmarshal(rb, out)
}

type syncResponse struct {
	Status             map[string]any               `json:"status"`
	Children           []*unstructured.Unstructured `json:"children"`
	ResyncAfterSeconds float64                      `json:"resyncAfterSeconds"`
}

// sync is one CompositeController sync of the parent at key.
func (d *Driver) sync(ctx context.Context, key string) (time.Duration, error) {
	o, exists, err := d.parent.informer.GetStore().GetByKey(key)
	if err != nil || !exists {
		return 0, err
	}
	parent := o.(*unstructured.Unstructured).DeepCopy()
	if parent.GetDeletionTimestamp() != nil {
		return 0, nil // no finalize hook: the garbage collector removes the children
	}
	// Customize: related rules, cached per parent UID and generation.
	if h, ok := d.CC.Spec.Hooks["customize"]; ok {
		var cr struct {
			RelatedResources []relatedRule `json:"relatedResources"`
		}
		if err := d.post(ctx, h, map[string]any{"controller": d.CC.raw, "parent": parent.Object}, &cr); err != nil {
			return 0, err
		}
		d.rulesMu.Lock()
		d.rules[fmt.Sprintf("%s/%d", parent.GetUID(), parent.GetGeneration())] = cr.RelatedResources
		d.rulesMu.Unlock()
	}
	observed := map[string]map[string]*unstructured.Unstructured{}
	children := map[string]map[string]any{}
	for _, c := range d.children {
		observed[c.key] = map[string]*unstructured.Unstructured{}
		children[c.key] = map[string]any{}
		for _, co := range c.informer.GetStore().List() {
			u := co.(*unstructured.Unstructured)
			if r := metav1.GetControllerOf(u); u.GetNamespace() == parent.GetNamespace() && r != nil && r.UID == parent.GetUID() {
				observed[c.key][u.GetName()] = u
				children[c.key][u.GetName()] = u.Object
			}
		}
	}
	related := map[string]map[string]any{}
	for _, r := range d.cachedRules(parent) {
		c := d.related[r.Resource]
		if c == nil || r.APIVersion != "v1" {
			continue
		}
		group := related[c.key]
		if group == nil {
			group = map[string]any{}
			related[c.key] = group
		}
		for _, ro := range c.informer.GetStore().List() {
			u := ro.(*unstructured.Unstructured)
			if u.GetNamespace() == parent.GetNamespace() && matches(r.LabelSelector, u.GetLabels()) {
				group[u.GetName()] = u.Object
			}
		}
	}
	var resp syncResponse
	req := map[string]any{"controller": d.CC.raw, "parent": parent.Object, "children": children, "related": related, "finalizing": false}
	if err := d.post(ctx, d.CC.Spec.Hooks["sync"], req, &resp); err != nil {
		return 0, err
	}
	if err := d.manage(ctx, parent, observed, resp.Children); err != nil {
		_ = d.writeStatus(ctx, parent, resp.Status) // written even when some child operations failed
		return 0, err
	}
	if err := d.writeStatus(ctx, parent, resp.Status); err != nil {
		return 0, err
	}
	return time.Duration(resp.ResyncAfterSeconds * float64(time.Second)), nil
}

func (d *Driver) childFor(u *unstructured.Unstructured) *child {
	for _, c := range d.children {
		if c.gvk.Kind == u.GetKind() && c.gvr.GroupVersion().String() == u.GetAPIVersion() {
			return c
		}
	}
	return nil
}

// manage deletes omitted children, then creates or updates the desired ones.
func (d *Driver) manage(ctx context.Context, parent *unstructured.Unstructured, observed map[string]map[string]*unstructured.Unstructured, desired []*unstructured.Unstructured) error {
	want := map[string]bool{}
	for _, u := range desired {
		if u == nil {
			return errors.New("null child in the answer")
		}
		c := d.childFor(u)
		if c == nil {
			return fmt.Errorf("child %s %s is not declared in the registration", u.GetAPIVersion(), u.GetKind())
		}
		want[c.key+"/"+u.GetName()] = true
	}
	var errs []string
	keys := make([]string, 0, len(observed))
	for k := range observed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for name, u := range observed[k] {
			if want[k+"/"+name] || u.GetDeletionTimestamp() != nil {
				continue
			}
			c := d.childByKey(k)
			uid := u.GetUID()
			bg := metav1.DeletePropagationBackground
			err := d.Dyn.Resource(c.gvr).Namespace(u.GetNamespace()).Delete(ctx, name, metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &bg})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				errs = append(errs, err.Error())
			}
		}
	}
	ref := metav1.OwnerReference{APIVersion: parent.GetAPIVersion(), Kind: parent.GetKind(), Name: parent.GetName(),
		UID: parent.GetUID(), Controller: ptr(true), BlockOwnerDeletion: ptr(true)}
	for _, u := range desired {
		c := d.childFor(u)
		u = u.DeepCopy()
		u.SetNamespace(parent.GetNamespace())
		if d.CC.Spec.GenerateSelector {
			l := u.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			if _, ok := l["controller-uid"]; !ok {
				l["controller-uid"] = string(parent.GetUID())
			}
			u.SetLabels(l)
		}
		u.SetOwnerReferences([]metav1.OwnerReference{ref})
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		if _, exists := observed[c.key][u.GetName()]; exists && c.strategy == "OnDelete" {
			continue
		}
		if c.strategy != "InPlace" && c.strategy != "OnDelete" {
			errs = append(errs, fmt.Sprintf("update strategy %s is not implemented by the test driver", c.strategy))
			continue
		}
		body, err := json.Marshal(u.Object)
		if err != nil {
			return err
		}
		force := true
		_, err = d.Dyn.Resource(c.gvr).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "metacontroller", Force: &force})
		if err != nil && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Sprintf("apply %s %s: %v", u.GetKind(), u.GetName(), err))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func (d *Driver) childByKey(k string) *child {
	for _, c := range d.children {
		if c.key == k {
			return c
		}
	}
	return nil
}

// writeStatus replaces the parent's status (with observedGeneration) when it differs from the live one.
func (d *Driver) writeStatus(ctx context.Context, parent *unstructured.Unstructured, status map[string]any) error {
	if status == nil {
		status = map[string]any{}
	}
	status["observedGeneration"] = parent.GetGeneration()
	for attempt := 0; attempt < 5; attempt++ {
		live, err := d.Dyn.Resource(d.parent.gvr).Namespace(parent.GetNamespace()).Get(ctx, parent.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if live.GetUID() != parent.GetUID() {
			return nil
		}
		var want map[string]any
		b, _ := json.Marshal(status)
		_ = utiljson.Unmarshal(b, &want) // integers as int64, as the API's objects have them
		if reflect.DeepEqual(live.Object["status"], want) {
			return nil
		}
		live.Object["status"] = want
		_, err = d.Dyn.Resource(d.parent.gvr).Namespace(parent.GetNamespace()).UpdateStatus(ctx, live, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
