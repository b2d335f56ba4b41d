//go:build e2e

package e2e

import (
	"context"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// checkMetricsNamespace runs on a settled cluster with the default network spec: its NetworkPolicy
// exists; a spec naming a metrics namespace that does not exist is refused (InvalidSpec, reason
// InvalidNetwork: Metacontroller relates the named namespace through the customize hook, and its
// absence is seen), the policy keeps the namespace it had; once the namespace is created the same
// spec is adopted and the policy admits scrapers from it.
func (s *scenario) checkMetricsNamespace(spec map[string]any) {
	t := s.t
	policy := func() *metav1.LabelSelector {
		np, err := s.e.kube.NetworkingV1().NetworkPolicies(s.ns).Get(s.ctx, s.names().NetworkPolicy(), metav1.GetOptions{})
		require.NoError(t, err, "the NetworkPolicy is rendered by default")
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				if p.Port != nil && p.Port.IntVal == api.ProbePort {
					require.Len(t, rule.From, 1)
					return rule.From[0].NamespaceSelector
				}
			}
		}
		t.Fatalf("NetworkPolicy %s has no rule for the metrics port", np.Name)
		return nil
	}
	require.Equal(t, api.DefaultMetricsNamespace, policy().MatchLabels[corev1.LabelMetadataName])

	metricsNS := s.ns + "-metrics"
	spec["network"] = map[string]any{"metricsNamespace": metricsNS}
	s.apply(spec)
	s.waitFor("InvalidNetwork", time.Minute, func() bool {
		c := condition(s.cluster(), api.CondInvalidSpec)
		return c != nil && c.Reason == "InvalidNetwork"
	})
	require.Equal(t, api.DefaultMetricsNamespace, policy().MatchLabels[corev1.LabelMetadataName], "a refused spec changes no child")

	_, err := s.e.kube.CoreV1().Namespaces().Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metricsNS,
		Labels: map[string]string{"etcdhook-e2e": "true"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = s.e.kube.CoreV1().Namespaces().Delete(context.Background(), metricsNS, metav1.DeleteOptions{})
	})
	s.waitFor("the spec adopted once the namespace exists", 2*time.Minute, func() bool {
		return condition(s.cluster(), api.CondInvalidSpec) == nil && policy().MatchLabels[corev1.LabelMetadataName] == metricsNS
	})
}
