package sync

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/etcdhook/etcdhook/api"
)

// networkPolicy is the cluster's NetworkPolicy (docs/design/15-maintenance.md §15.4), nil when spec.network.policy is
// off or the registration does not declare the kind. It selects the member pods and admits ingress:
//   - peer and client ports from the members themselves (raft, and the agents' membership calls);
//   - the client port from etcdhook's Jobs of this cluster (remove, pvc delete, backup) and from
//     spec.network.clientFrom (default: every pod of the namespace);
//   - the metrics port from the pods of spec.network.metricsNamespace (Prometheus).
//
// Egress is not restricted: members reach each other, the API server and (restoring) an object store.
func (p *plan) networkPolicy() *networkingv1.NetworkPolicy {
	if !p.spec.Network.PolicyOn() || !p.f.obs.NetworkPoliciesDeclared {
		return nil
	}
	n := p.f.names
	members := metav1.LabelSelector{MatchLabels: n.Labels()}
	jobs := metav1.LabelSelector{
		MatchLabels: map[string]string{api.LabelName: "etcd", api.LabelInstance: n.Cluster, api.LabelManagedBy: api.ManagedBy},
		MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: api.LabelComponent, Operator: metav1.LabelSelectorOpIn, Values: []string{api.ComponentBackup, api.ComponentOps},
		}},
	}
	clients := []networkingv1.NetworkPolicyPeer{{PodSelector: &jobs}}
	if from := p.spec.Network.ClientFrom; len(from) > 0 {
		for i := range from {
			clients = append(clients, *from[i].DeepCopy())
		}
	} else {
		clients = append(clients, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}})
	}
	port := func(n int32) networkingv1.NetworkPolicyPort {
		// The protocol is the API server's default, written so that the answer is a fixed point.
		return networkingv1.NetworkPolicyPort{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(intstr.FromInt32(n))}
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: p.meta(n.NetworkPolicy(), api.ComponentEtcd),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: members,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &members}}, Ports: []networkingv1.NetworkPolicyPort{port(api.PeerPort), port(api.ClientPort)}},
				{From: clients, Ports: []networkingv1.NetworkPolicyPort{port(api.ClientPort)}},
				{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
					// Set by the API server on every namespace (1.22+), and not editable by its users.
					MatchLabels: map[string]string{corev1.LabelMetadataName: p.spec.Network.MetricsNamespace},
				}}}, Ports: []networkingv1.NetworkPolicyPort{port(api.ProbePort)}},
			},
		},
	}
}

// validateNetwork checks spec.network (after Defaulted): every clientFrom peer is one the API server
// accepts (a selector that parses, an ipBlock CIDR with exceptions inside it, not both kinds at once), and
// the metrics namespace is a namespace name.
func validateNetwork(s api.ClusterSpec) []Problem {
	var ps []Problem
	add := func(format string, args ...any) {
		ps = append(ps, Problem{"InvalidNetwork", fmt.Sprintf(format, args...)})
	}
	for i, peer := range s.Network.ClientFrom {
		field := fmt.Sprintf("spec.network.clientFrom[%d]", i)
		if peer.IPBlock != nil && (peer.PodSelector != nil || peer.NamespaceSelector != nil) {
			add("%s: ipBlock cannot be combined with a selector", field)
			continue
		}
		if peer.IPBlock == nil && peer.PodSelector == nil && peer.NamespaceSelector == nil {
			add("%s: set podSelector, namespaceSelector or ipBlock", field)
			continue
		}
		for name, sel := range map[string]*metav1.LabelSelector{"podSelector": peer.PodSelector, "namespaceSelector": peer.NamespaceSelector} {
			if sel == nil {
				continue
			}
			if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
				add("%s.%s: %v", field, name, err)
			}
		}
		if b := peer.IPBlock; b != nil {
			cidr, err := netip.ParsePrefix(b.CIDR)
			if err != nil {
				add("%s.ipBlock.cidr %q is not a CIDR", field, b.CIDR)
				continue
			}
			for j, ex := range b.Except {
				e, err := netip.ParsePrefix(ex)
				if err != nil || e.Addr().Is4() != cidr.Addr().Is4() || e.Bits() <= cidr.Bits() || !cidr.Contains(e.Addr()) {
					add("%s.ipBlock.except[%d] %q must be a CIDR strictly inside %s", field, j, ex, b.CIDR)
				}
			}
		}
	}
	if errs := validation.IsDNS1123Label(s.Network.MetricsNamespace); len(errs) > 0 {
		add("spec.network.metricsNamespace %q is not a namespace name: %s", s.Network.MetricsNamespace, errs[0])
	}
	return ps
}
