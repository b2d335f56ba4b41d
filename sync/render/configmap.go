package render

import (
	"fmt"

	json "github.com/go-json-experiment/json/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// AgentConfig is the agents' configuration (api.ConfigKeyAgent).
func AgentConfig(d *Desired) api.AgentConfig {
	n := d.Names
	return api.AgentConfig{
		Cluster: n.Cluster, Namespace: n.Namespace, ClusterUID: d.ClusterUID,
		PeerService: n.PeerService(),
		ClientPort:  api.ClientPort, PeerPort: api.PeerPort, ProbePort: api.ProbePort, EtcdMetricsPort: api.EtcdMetricsPort,
		DataDir:              api.DataDir,
		Token:                api.Token(n.Namespace, n.Cluster, d.ClusterUID),
		LeaseDurationSeconds: api.DefaultLeaseDurationSeconds,
		AdoptExistingData:    d.Spec.AdoptExistingData,
		TLS:                  agentTLS(d),
		Restore:              agentRestore(d.Spec.SeedRestore()),
		RetiredClusters:      d.Config.RetiredClusters,
		Bootstrap:            d.Bootstrap,
	}
}

// agentRestore is spec.restore for the agent, nil without one.
func agentRestore(r *api.RestoreSpec, keepRevisions bool) *api.AgentRestore {
	if r == nil {
		return nil
	}
	a := &api.AgentRestore{From: r.From, KeepRevisions: keepRevisions}
	if r.ToRevision != nil {
		a.ToRevision = *r.ToRevision
	}
	if r.ToTime != nil {
		t := r.ToTime.UTC()
		a.ToTime = &t
	}
	if r.CredentialsSecret != "" {
		a.CredentialsDir = api.BackupCredentialsDir
	}
	if r.VolumeClaimName != "" {
		a.FileRoot = api.BackupMount
	}
	if r.Encryption != nil {
		a.EncryptionDir = api.BackupEncryptionDir
	}
	return a
}

// agentTLS is the agent's part of spec.security.tls, nil when TLS is off (and no pod may still run a
// transition template: Template.AgentTLS).
func agentTLS(d *Desired) *api.AgentTLS {
	if !d.Template.AgentTLS {
		return nil
	}
	t := d.Spec.Security.TLS.As(true)
	n := d.Names
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

// userSecretsOf are the planes whose certificates come from the user's Secrets.
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
func clientIdentitySecret(d *Desired) string {
	if d.Auth != nil {
		// With spec.auth the Jobs act as root (membership changes, snapshots): the shared client
		// Secret's CN is no etcd user.
		return d.Names.RootSecret()
	}
	if s := d.Spec.Security.TLS.Client.SecretName; s != "" {
		return s
	}
	return d.Names.ClientSecret()
}

// ConfigMap holds the agent configuration and the hook's records (docs/design/06-sync-order.md).
func ConfigMap(d *Desired) *corev1.ConfigMap {
	agent, _ := json.MarshalIndent(AgentConfig(d), "", "  ")
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(d.Names, d.Names.ConfigMap(), api.ComponentEtcd),
		Data: map[string]string{
			api.ConfigKeyAgent:        string(agent) + "\n",
			api.ConfigKeySpec:         string(api.SpecJSON(d.SpecRecord)),
			api.ConfigKeyBootstrapped: fmt.Sprint(d.Config.Bootstrapped),
			api.ConfigKeyClusterID:    d.Config.ClusterID,
			api.ConfigKeyRunning:      d.Config.Running,
			api.ConfigKeyFormed:       fmt.Sprint(d.Config.Formed),
			api.ConfigKeyRollingTo:    d.Config.RollingTo,
		},
	}
	if v := d.Config.DefragNowDone; v != "" {
		cm.Data[api.ConfigKeyDefragNowDone] = v
	}
	if v := d.Config.StandbyPromoted; v != "" {
		cm.Data[api.ConfigKeyStandbyPromoted] = v
	}
	if v := d.Config.SpaceQuota; v != "" {
		cm.Data[api.ConfigKeySpaceQuota] = v
	}
	if v := d.Config.SpaceStorage; v != "" {
		cm.Data[api.ConfigKeySpaceStorage] = v
	}
	if v := d.Config.RestoreInPlace; v != "" {
		cm.Data[api.ConfigKeyRestoreInPlace] = v
	}
	if d.Auth != nil {
		b, _ := json.Marshal(d.Auth) // typed: cannot fail
		cm.Data[api.ConfigKeyAuth] = string(b)
	}
	return cm
}
