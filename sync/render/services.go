package render

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/etcdhook/etcdhook/api"
)

// Services are the peer Service (headless, for the members' DNS names) and the client Service.
func Services(d *Desired) []*corev1.Service {
	n := d.Names
	port := func(name string, port int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: port, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP}
	}
	peer := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(n, n.PeerService(), api.ComponentEtcd),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			// Peers resolve each other before they are ready; a learner is never ready (/readyz).
			PublishNotReadyAddresses: true,
			Selector:                 n.Labels(),
			Ports:                    []corev1.ServicePort{port("client", api.ClientPort), port("peer", api.PeerPort), port("metrics", api.ProbePort)},
		},
	}
	client := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(n, n.ClientService(), api.ComponentEtcd),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: n.Labels(),
			Ports:    []corev1.ServicePort{port("client", api.ClientPort)},
		},
	}
	return []*corev1.Service{peer, client}
}
