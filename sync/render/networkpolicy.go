package render

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/etcdhook/etcdhook/api"
)

// NetworkPolicy is the cluster's NetworkPolicy (docs/design/15-maintenance.md §15.4), nil when spec.network.policy is
// off or the registration does not declare the kind. It selects the member pods and admits ingress:
//   - peer and client ports from the members themselves (raft, and the agents' membership calls);
//   - the client port from etcdhook's Jobs of this cluster (remove, pvc delete, backup) and from
//     spec.network.clientFrom (default: every pod of the namespace);
//   - the metrics port from the pods of spec.network.metricsNamespace (Prometheus).
//
// Egress is not restricted: members reach each other, the API server and (restoring) an object store.
func NetworkPolicy(d *Desired) *networkingv1.NetworkPolicy {
	if !d.NetworkPolicy {
		return nil
	}
	n := d.Names
	members := metav1.LabelSelector{MatchLabels: n.Labels()}
	jobs := metav1.LabelSelector{
		MatchLabels: map[string]string{api.LabelName: "etcd", api.LabelInstance: n.Cluster, api.LabelManagedBy: api.ManagedBy},
		MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: api.LabelComponent, Operator: metav1.LabelSelectorOpIn, Values: []string{api.ComponentBackup, api.ComponentOps},
		}},
	}
	clients := []networkingv1.NetworkPolicyPeer{{PodSelector: &jobs}}
	if from := d.Spec.Network.ClientFrom; len(from) > 0 {
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
		ObjectMeta: meta(n, n.NetworkPolicy(), api.ComponentEtcd),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: members,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &members}}, Ports: []networkingv1.NetworkPolicyPort{port(api.PeerPort), port(api.ClientPort)}},
				{From: clients, Ports: []networkingv1.NetworkPolicyPort{port(api.ClientPort)}},
				{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
					// Set by the API server on every namespace (1.22+), and not editable by its users.
					MatchLabels: map[string]string{corev1.LabelMetadataName: d.Spec.Network.MetricsNamespace},
				}}}, Ports: []networkingv1.NetworkPolicyPort{port(api.ProbePort)}},
			},
		},
	}
}
