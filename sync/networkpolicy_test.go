package sync

import (
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// source is a client of the members: a pod (namespace and its labels, pod labels) or an address.
type source struct {
	ns        string
	nsLabels  map[string]string
	podLabels map[string]string
	ip        string
}

// admits evaluates a NetworkPolicy as the API documents it (networking.k8s.io/v1 NetworkPolicySpec), for
// ingress to a pod it selects: some rule whose peers match the source and whose ports match the port.
// The local cluster's network plugin enforces nothing, so this is how the rendered policy is proven.
func admits(t *testing.T, np *networkingv1.NetworkPolicy, target map[string]string, from source, port int32) bool {
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	require.NoError(t, err)
	if !sel.Matches(labels.Set(target)) {
		t.Fatalf("the policy does not select the member %v", target)
	}
	matches := func(s *metav1.LabelSelector, l map[string]string) bool {
		if s == nil {
			return true
		}
		sel, err := metav1.LabelSelectorAsSelector(s)
		require.NoError(t, err)
		return sel.Matches(labels.Set(l))
	}
	peerMatches := func(p networkingv1.NetworkPolicyPeer) bool {
		if p.IPBlock != nil {
			if from.ip == "" {
				return false
			}
			a := netip.MustParseAddr(from.ip)
			if !netip.MustParsePrefix(p.IPBlock.CIDR).Contains(a) {
				return false
			}
			for _, ex := range p.IPBlock.Except {
				if netip.MustParsePrefix(ex).Contains(a) {
					return false
				}
			}
			return true
		}
		if from.podLabels == nil {
			return false // an address outside the cluster matches only ipBlocks
		}
		if p.NamespaceSelector == nil && from.ns != np.Namespace {
			return false // a podSelector alone means the policy's namespace
		}
		return matches(p.NamespaceSelector, from.nsLabels) && matches(p.PodSelector, from.podLabels)
	}
	for _, rule := range np.Spec.Ingress {
		portOK := len(rule.Ports) == 0
		for _, p := range rule.Ports {
			proto := corev1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			if proto == corev1.ProtocolTCP && (p.Port == nil || p.Port.IntValue() == int(port)) {
				portOK = true
			}
		}
		if !portOK {
			continue
		}
		if len(rule.From) == 0 {
			return true
		}
		for _, peer := range rule.From {
			if peerMatches(peer) {
				return true
			}
		}
	}
	return false
}

func policyOf(t *testing.T, w *world) *networkingv1.NetworkPolicy {
	t.Helper()
	obj, ok := w.desired[wire.KeyNetworkPolicy][w.names().NetworkPolicy()]
	if !ok {
		return nil
	}
	var np networkingv1.NetworkPolicy
	require.NoError(t, json.Unmarshal(mustJSON(obj), &np))
	return &np
}

func TestNetworkPolicyAdmits(t *testing.T) {
	ns := func(name string, l map[string]string) map[string]string {
		out := map[string]string{corev1.LabelMetadataName: name}
		for k, v := range l {
			out[k] = v
		}
		return out
	}
	member := map[string]string{api.LabelName: "etcd", api.LabelInstance: "demo", api.LabelComponent: api.ComponentEtcd, "apps.kubernetes.io/pod-index": "1"}
	otherMember := map[string]string{api.LabelName: "etcd", api.LabelInstance: "other", api.LabelComponent: api.ComponentEtcd}
	job := func(cluster, component string) map[string]string {
		return map[string]string{api.LabelName: "etcd", api.LabelInstance: cluster, api.LabelComponent: component, api.LabelManagedBy: api.ManagedBy}
	}
	prod := ns("prod", nil)
	var (
		fromMember      = source{ns: "prod", nsLabels: prod, podLabels: member}
		fromBackupJob   = source{ns: "prod", nsLabels: prod, podLabels: job("demo", api.ComponentBackup)}
		fromOpsJob      = source{ns: "prod", nsLabels: prod, podLabels: job("demo", api.ComponentOps)}
		fromOtherJob    = source{ns: "prod", nsLabels: prod, podLabels: job("other", api.ComponentBackup)}
		fromOtherMember = source{ns: "prod", nsLabels: prod, podLabels: otherMember}
		fromApp         = source{ns: "prod", nsLabels: prod, podLabels: map[string]string{"app": "api"}}
		fromWeb         = source{ns: "prod", nsLabels: prod, podLabels: map[string]string{"app": "web"}}
		fromTeamA       = source{ns: "team-a", nsLabels: ns("team-a", map[string]string{"etcd-client": "true"}), podLabels: map[string]string{"app": "x"}}
		fromElsewhere   = source{ns: "default", nsLabels: ns("default", nil), podLabels: map[string]string{"app": "x"}}
		fromPrometheus  = source{ns: "monitoring", nsLabels: ns("monitoring", nil), podLabels: map[string]string{"app": "prometheus"}}
		fromVM          = source{ip: "10.20.0.5"}
		fromVMExcepted  = source{ip: "10.20.9.5"}
	)
	type row struct {
		name string
		from source
		port int32
		want bool
	}
	peer, client, metrics := int32(api.PeerPort), int32(api.ClientPort), int32(api.ProbePort)
	for _, tc := range []struct {
		name string
		edit func(*api.ClusterSpec)
		rows []row
	}{
		{"default", nil, []row{
			{"member to peer", fromMember, peer, true},
			{"member to client", fromMember, client, true},
			{"member to metrics", fromMember, metrics, false},
			{"backup Job to client", fromBackupJob, client, true},
			{"backup Job to peer", fromBackupJob, peer, false},
			{"ops Job to client", fromOpsJob, client, true},
			{"another cluster's member to peer", fromOtherMember, peer, false},
			{"a pod of the namespace to client", fromApp, client, true},
			{"a pod of the namespace to peer", fromApp, peer, false},
			{"another namespace to client", fromElsewhere, client, false},
			{"Prometheus to metrics", fromPrometheus, metrics, true},
			{"Prometheus to client", fromPrometheus, client, false},
			{"an address outside to client", fromVM, client, false},
		}},
		{"clientFrom", func(s *api.ClusterSpec) {
			s.Network.ClientFrom = []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}},
				{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"etcd-client": "true"}}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.20.0.0/16", Except: []string{"10.20.9.0/24"}}},
			}
			s.Network.MetricsNamespace = "observability"
		}, []row{
			{"the listed app", fromApp, client, true},
			{"another app of the namespace", fromWeb, client, false},
			{"the listed namespace", fromTeamA, client, true},
			{"the listed namespace to peer", fromTeamA, peer, false},
			{"another namespace", fromElsewhere, client, false},
			{"the listed addresses", fromVM, client, true},
			{"an excepted address", fromVMExcepted, client, false},
			{"this cluster's backup Jobs stay admitted", fromBackupJob, client, true},
			{"this cluster's remove and pvc Jobs stay admitted", fromOpsJob, client, true},
			{"another cluster's Job is not this cluster's", fromOtherJob, client, false},
			{"members stay admitted", fromMember, peer, true},
			{"Prometheus outside the metrics namespace", fromPrometheus, metrics, false},
			{"the metrics namespace", source{ns: "observability", nsLabels: ns("observability", nil), podLabels: map[string]string{"app": "p"}}, metrics, true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 3)
			if tc.edit != nil {
				tc.edit(&w.spec)
			}
			w.converge(80)
			np := policyOf(t, w)
			require.NotNil(t, np, "a new cluster gets its NetworkPolicy by default")
			for _, r := range tc.rows {
				require.Equal(t, r.want, admits(t, np, member, r.from, r.port), r.name)
			}
		})
	}
}

// A cluster whose recorded spec predates spec.network keeps running without a policy (its clients may
// come from anywhere); the user turns it on by setting spec.network.policy.
func TestNetworkPolicyNotImposedOnRunningClusters(t *testing.T) {
	w := newWorld(t, 3)
	w.noNetworkPolicies = true
	w.converge(80)
	// The record as an earlier release wrote it: no network field.
	cm := w.desired[wire.KeyConfigMap][w.names().ConfigMap()]
	data := cm["data"].(map[string]any)
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(data[api.ConfigKeySpec].(string)), &rec))
	delete(rec, "network")
	data[api.ConfigKeySpec] = string(mustJSON(rec))
	w.noNetworkPolicies = false // the hook and its registration are upgraded
	w.step(5 * time.Second)
	w.step(5 * time.Second)
	require.Nil(t, policyOf(t, w), "no policy imposed on a running cluster")
	require.Nil(t, meta.FindStatusCondition(w.status.Conditions, api.CondNetworkPolicyMissing))

	w.setSpec(func(s *api.ClusterSpec) { s.Network.Policy = ptr(true) })
	w.converge(80)
	require.NotNil(t, policyOf(t, w), "set explicitly, it is rendered")
	w.setSpec(func(s *api.ClusterSpec) { s.Network.Policy = ptr(false) })
	resp := w.step(5 * time.Second)
	w.step(5 * time.Second)
	require.Nil(t, policyOf(t, w), "switched off, it goes")
	require.Contains(t, resp.Deleted, Deletion{Key: wire.KeyNetworkPolicy, Name: w.names().NetworkPolicy(), Reason: "spec.network.policy is false"})
}
