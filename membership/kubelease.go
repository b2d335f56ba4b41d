package membership

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync/atomic"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/etcdhook/etcdhook/api"
)

// KubeLeases is the LeaseStore on the Kubernetes API (client-go). Renew times are on the API server's
// clock, learned from the Date header of its answers, because the hook judges freshness on that clock.
type KubeLeases struct {
	client     kubernetes.Interface
	namespace  string
	name       string
	cluster    string
	clusterUID string
	holder     string
	duration   int32
	offset     atomic.Int64 // server clock minus local clock, ns
	lastHold   string
}

// NewKubeLeases builds the store for Lease name of EtcdCluster cluster (UID clusterUID), held by holder.
func NewKubeLeases(cfg *rest.Config, namespace, cluster, name, clusterUID, holder string, duration time.Duration) (*KubeLeases, error) {
	k := &KubeLeases{namespace: namespace, name: name, cluster: cluster, clusterUID: clusterUID, holder: holder, duration: int32(duration / time.Second)}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &dateTracker{rt: rt, k: k} })
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	k.client = c
	return k, nil
}

type dateTracker struct {
	rt http.RoundTripper
	k  *KubeLeases
}

func (d *dateTracker) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := time.Now()
	resp, err := d.rt.RoundTrip(req)
	if err == nil {
		if t, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
			// The Date header has one-second resolution: take the midpoint of the exchange.
			local := sent.Add(time.Since(sent) / 2)
			d.k.offset.Store(int64(t.Add(500 * time.Millisecond).Sub(local)))
		}
	}
	return resp, err
}

// Now is the API server's clock.
func (k *KubeLeases) Now() time.Time { return time.Now().Add(time.Duration(k.offset.Load())) }

// Read gets the Lease live and checks that it belongs to this EtcdCluster.
func (k *KubeLeases) Read(ctx context.Context) (Intent, error) {
	l, err := k.client.CoordinationV1().Leases(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Intent{}, ErrNoLease
	}
	if err != nil {
		return Intent{}, err
	}
	owned := false
	for _, r := range l.OwnerReferences {
		owned = owned || string(r.UID) == k.clusterUID
	}
	if !owned {
		return Intent{}, fmt.Errorf("Lease %s/%s is not owned by EtcdCluster %s (UID %s)", k.namespace, k.name, k.cluster, k.clusterUID)
	}
	return intentFromAnnotations(l.Annotations), nil
}

// Write renews the Lease and writes the report with a merge patch of the agent-owned fields only.
func (k *KubeLeases) Write(ctx context.Context, r api.Report) error {
	now := metav1.NewMicroTime(k.Now())
	spec := map[string]any{
		"holderIdentity": k.holder,
		// Three renewal intervals of this report, so that the Lease object tells a reader the truth
		// (the hook judges freshness with its own bounds, never this field).
		"leaseDurationSeconds": int32(3 * api.RenewInterval(r, time.Duration(k.duration)*time.Second) / time.Second),
		"renewTime":            now,
	}
	if k.lastHold != k.holder {
		spec["acquireTime"] = now
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": r.Annotations()},
		"spec":     spec,
	})
	if err != nil {
		return err
	}
	_, err = k.client.CoordinationV1().Leases(k.namespace).Patch(ctx, k.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "etcdhook-agent"})
	if apierrors.IsNotFound(err) {
		return ErrNoLease
	}
	if err == nil {
		k.lastHold = k.holder
	}
	return err
}

// eachLease calls fn with every member Lease of the cluster that exists, by name (the RBAC Role names
// exactly these: no list).
func (k *KubeLeases) eachLease(ctx context.Context, fn func(*coordv1.Lease)) error {
	n := api.Names{Cluster: k.cluster, Namespace: k.namespace}
	for i := 0; i < api.MaxSize; i++ {
		l, err := k.client.CoordinationV1().Leases(k.namespace).Get(ctx, n.Lease(i), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		fn(l)
	}
	return nil
}

// Peers reads every member Lease of the cluster and returns the reports of this parent's fresh ones.
func (k *KubeLeases) Peers(ctx context.Context) ([]api.Report, error) {
	now := k.Now()
	var out []api.Report
	err := k.eachLease(ctx, func(l *coordv1.Lease) {
		if l.Annotations[api.AnnClusterUID] != k.clusterUID || l.Spec.RenewTime == nil {
			return
		}
		d := 30 * time.Second
		if l.Spec.LeaseDurationSeconds != nil {
			d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
		}
		if age := now.Sub(l.Spec.RenewTime.Time); age > d || age < -d {
			return
		}
		r, _ := api.ParseReport(l.Annotations)
		out = append(out, r)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ClusterIDs reads every member Lease of the cluster (the RBAC Role names exactly these).
func (k *KubeLeases) ClusterIDs(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	err := k.eachLease(ctx, func(l *coordv1.Lease) {
		if l.Annotations[api.AnnClusterUID] == k.clusterUID && l.Annotations[api.AnnClusterID] != "" {
			seen[l.Annotations[api.AnnClusterID]] = true
		}
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}
