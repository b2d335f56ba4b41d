package sync

import (
	"encoding/json"
	"fmt"
	"slices"
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
		Restore:              p.agentRestore(),
		RetiredClusters:      p.retiredClusters(),
	}
}

// retiredClusters are the cluster IDs in-place restores replaced, as the agents get them: those of a
// restore not committed yet are still the live cluster's (a member restarting meanwhile must start on
// its data, and the restore may yet be withdrawn), so only the IDs of the restore before it count.
func (p *plan) retiredClusters() []string {
	r := p.inPlace
	if r.inFlight() && !r.Committed {
		r = r.Prior
	}
	if r == nil || len(r.Retired) == 0 {
		return nil
	}
	ids := slices.Clone(r.Retired)
	slices.Sort(ids)
	return ids
}

// agentRestore is spec.restore for the agent, nil without one.
func (p *plan) agentRestore() *api.AgentRestore {
	r := p.spec.Restore
	if r == nil {
		return nil
	}
	a := &api.AgentRestore{From: r.From}
	if r.CredentialsSecret != "" {
		a.CredentialsDir = api.BackupCredentialsDir
	}
	if r.VolumeClaimName != "" {
		a.FileRoot = api.BackupMount
	}
	return a
}

// agentTLS is the agent's part of spec.security.tls, nil when TLS is off (and no pod may still run a
// transition template: agentKeepsTLS).
func (p *plan) agentTLS() *api.AgentTLS {
	if !p.agentKeepsTLS() {
		return nil
	}
	t := p.spec.Security.TLS.As(true)
	n := p.f.names
	a := &api.AgentTLS{
		CADuration: t.BuiltIn.CADuration.Duration.String(), CertDuration: t.BuiltIn.CertDuration.Duration.String(),
		ClientAuth: t.ClientAuth(),
	}
	if g := t.BuiltIn.RotationGrace; g != nil {
		a.RotationGrace = g.Duration.String()
	}
	if t.BuiltInNeeded() {
		a.CASecret = n.CASecret()
	}
	if t.Client.SecretName == "" {
		a.ClientSecret = n.ClientSecret()
	}
	for _, sec := range userSecretsOf(t) {
		if sec.plane == "peer" {
			a.PeerSource = sec.dir
		} else {
			a.ClientSource = sec.dir
		}
	}
	return a
}

// userSecret is a user's Secret for one plane, as the pod mounts it.
type userSecret struct{ plane, name, volume, dir string }

// userSecrets are the planes whose certificates come from the user's Secrets.
func (p *plan) userSecrets() []userSecret { return userSecretsOf(p.renderTLS()) }

func userSecretsOf(t api.TLSSpec) []userSecret {
	if !t.TLSOn() {
		return nil
	}
	var out []userSecret
	if t.Peer.SecretName != "" {
		out = append(out, userSecret{"peer", t.Peer.SecretName, "peer-secret", api.SecretSourceDir + "/peer"})
	}
	if t.Client.SecretName != "" {
		out = append(out, userSecret{"client", t.Client.SecretName, "client-secret", api.SecretSourceDir + "/client"})
	}
	return out
}

// clientIdentitySecret is the Secret whose certificate the Jobs present to etcd: the user's client-plane
// Secret, or the built-in client Secret.
func (p *plan) clientIdentitySecret() string {
	if s := p.spec.Security.TLS.Client.SecretName; s != "" {
		return s
	}
	return p.f.names.ClientSecret()
}

func specJSON(s api.ClusterSpec) []byte {
	b, _ := json.Marshal(s) // typed struct: cannot fail
	return b
}

func (p *plan) configMap() *corev1.ConfigMap {
	f := p.f
	agent, _ := json.MarshalIndent(p.agentConfig(), "", "  ")
	cm := &corev1.ConfigMap{
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
	if v := p.defragNowDone(); v != "" {
		cm.Data[api.ConfigKeyDefragNowDone] = v
	}
	if v := p.inPlaceRecordJSON(); v != "" {
		cm.Data[api.ConfigKeyRestoreInPlace] = v
	}
	return cm
}

func runningRecord(vs []SemVer) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return strings.Join(out, " ")
}
