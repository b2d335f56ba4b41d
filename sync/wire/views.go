package wire

import (
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the decision reads of each observed kind. An object is decoded into its k8s.io/api type, but the
// parts the decision never reads are passed over by the library (they cost a 9-member sync more CPU
// than the decision itself, and a real request carries full pod specs): the library's unmarshalers
// below decode those kinds through a smaller struct of the same fields. Every other kind (Leases,
// ConfigMaps, Jobs, claims, Secrets) is decoded whole. A field read elsewhere must be added here:
// TestObservedViews fails for a fixture whose answer depends on one that is not.
var views = jsonv2.JoinUnmarshalers(
	identityOnly(func(o *corev1.Service) (*metav1.TypeMeta, *metav1.ObjectMeta) { return &o.TypeMeta, &o.ObjectMeta }),
	identityOnly(func(o *policyv1.PodDisruptionBudget) (*metav1.TypeMeta, *metav1.ObjectMeta) {
		return &o.TypeMeta, &o.ObjectMeta
	}),
	identityOnly(func(o *corev1.ServiceAccount) (*metav1.TypeMeta, *metav1.ObjectMeta) {
		return &o.TypeMeta, &o.ObjectMeta
	}),
	identityOnly(func(o *rbacv1.Role) (*metav1.TypeMeta, *metav1.ObjectMeta) { return &o.TypeMeta, &o.ObjectMeta }),
	identityOnly(func(o *rbacv1.RoleBinding) (*metav1.TypeMeta, *metav1.ObjectMeta) { return &o.TypeMeta, &o.ObjectMeta }),
	identityOnly(func(o *batchv1.CronJob) (*metav1.TypeMeta, *metav1.ObjectMeta) { return &o.TypeMeta, &o.ObjectMeta }),
	identityOnly(func(o *networkingv1.NetworkPolicy) (*metav1.TypeMeta, *metav1.ObjectMeta) {
		return &o.TypeMeta, &o.ObjectMeta
	}),
	// A StatefulSet without its pod template (the decision compares the hash it rendered, an annotation).
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, s *appsv1.StatefulSet) error {
		var w struct {
			metav1.TypeMeta
			Metadata metav1.ObjectMeta `json:"metadata"`
			Spec     struct {
				Replicas             *int32                           `json:"replicas"`
				Selector             *metav1.LabelSelector            `json:"selector"`
				ServiceName          string                           `json:"serviceName"`
				PodManagementPolicy  appsv1.PodManagementPolicyType   `json:"podManagementPolicy"`
				UpdateStrategy       appsv1.StatefulSetUpdateStrategy `json:"updateStrategy"`
				VolumeClaimTemplates []corev1.PersistentVolumeClaim   `json:"volumeClaimTemplates"`
			} `json:"spec"`
			Status appsv1.StatefulSetStatus `json:"status"`
		}
		if err := within(dec, &w); err != nil {
			return err
		}
		sp := &w.Spec
		*s = appsv1.StatefulSet{TypeMeta: w.TypeMeta, ObjectMeta: w.Metadata, Status: w.Status, Spec: appsv1.StatefulSetSpec{
			Replicas: sp.Replicas, Selector: sp.Selector, ServiceName: sp.ServiceName, PodManagementPolicy: sp.PodManagementPolicy,
			UpdateStrategy: sp.UpdateStrategy, VolumeClaimTemplates: sp.VolumeClaimTemplates}}
		return nil
	}),
	// A member pod without its spec.
	jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, p *corev1.Pod) error {
		var w struct {
			metav1.TypeMeta
			Metadata metav1.ObjectMeta `json:"metadata"`
			Status   corev1.PodStatus  `json:"status"`
		}
		if err := within(dec, &w); err != nil {
			return err
		}
		*p = corev1.Pod{TypeMeta: w.TypeMeta, ObjectMeta: w.Metadata, Status: w.Status}
		return nil
	}),
)

// identityOnly decodes a kind of which the decision reads only the kind and metadata.
func identityOnly[T any](parts func(*T) (*metav1.TypeMeta, *metav1.ObjectMeta)) *jsonv2.Unmarshalers {
	return jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, o *T) error {
		var w struct {
			metav1.TypeMeta
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := within(dec, &w); err != nil {
			return err
		}
		tm, om := parts(o)
		*tm, *om = w.TypeMeta, w.Metadata
		return nil
	})
}
