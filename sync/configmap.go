package sync

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

func (p *plan) agentConfig() api.AgentConfig {
	n := p.f.names
	return api.AgentConfig{
		Cluster: n.Cluster, Namespace: n.Namespace, ParentUID: p.f.uid,
		PeerService: n.PeerService(),
		ClientPort:  api.ClientPort, PeerPort: api.PeerPort, ProbePort: api.ProbePort, EtcdMetricsPort: api.EtcdMetricsPort,
		DataDir:              api.DataDir,
		Token:                api.Token(n.Namespace, n.Cluster, p.f.uid),
		LeaseDurationSeconds: api.DefaultLeaseDurationSeconds,
		AdoptExistingData:    p.spec.AdoptExistingData,
		TLS:                  p.agentTLS(),
	}
}

// agentTLS is the agent's part of spec.security.tls, nil when TLS is off.
func (p *plan) agentTLS() *api.AgentTLS {
	t := p.spec.Security.TLS
	if !t.TLSOn() {
		return nil
	}
	n := p.f.names
	return &api.AgentTLS{
		CASecret: n.CASecret(), ClientSecret: n.ClientSecret(),
		CADuration: t.BuiltIn.CADuration.Duration.String(), CertDuration: t.BuiltIn.CertDuration.Duration.String(),
		ClientAuth: t.ClientAuth(),
	}
}

func specJSON(s api.ClusterSpec) []byte {
	b, _ := json.Marshal(s) // typed struct: cannot fail
	return b
}

func (p *plan) configMap() *corev1.ConfigMap {
	f := p.f
	agent, _ := json.MarshalIndent(p.agentConfig(), "", "  ")
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: p.meta(f.names.ConfigMap(), api.ComponentEtcd),
		Data: map[string]string{
			api.ConfigKeyAgent:        string(agent) + "\n",
			api.ConfigKeySpec:         string(specJSON(p.spec)),
			api.ConfigKeyBootstrapped: fmt.Sprint(f.bootstrapped),
			api.ConfigKeyClusterID:    f.clusterID,
			api.ConfigKeyRunning:      runningRecord(f.running),
			api.ConfigKeyFormed:       fmt.Sprint(f.formed || p.formedNow()),
			api.ConfigKeyRollingTo:    p.rollingTo,
		},
	}
}

func runningRecord(vs []SemVer) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return strings.Join(out, " ")
}
