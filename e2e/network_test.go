//go:build e2e

package e2e

import (
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// checkMetricsNamespace runs on a settled cluster with the default network spec: its NetworkPolicy
// exists and admits the metrics port from the default namespace; a spec naming another metrics
// namespace is adopted and the policy follows it (Metacontroller merges the changed rule in place).
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
	s.waitFor("the policy to admit scrapers from "+metricsNS, time.Minute, func() bool {
		return policy().MatchLabels[corev1.LabelMetadataName] == metricsNS
	})
}
