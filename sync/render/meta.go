package render

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// meta is a child's metadata: its name, the cluster's namespace and the labels of its component.
func meta(n api.Names, name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: n.Namespace, Labels: n.ObjectLabels(component)}
}

// restricted is every container's security context (the restricted Pod Security Standard); a new one
// per container, since the API types hold pointers.
func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		RunAsNonRoot:             ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// nonRoot is the pod security context of the members and Jobs: the image's user 65532.
func nonRoot() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr(true),
		RunAsUser:      ptr(int64(65532)),
		RunAsGroup:     ptr(int64(65532)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path},
	}}
}

func ptr[T any](v T) *T { return &v }
