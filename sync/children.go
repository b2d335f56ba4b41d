package sync

import (
	"encoding/json"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// AgentConfig is the agent's static configuration, mounted from the ConfigMap. Everything that changes
// during a cluster's life (intent, join permission, bootstrap) is read live from the Lease instead.
type AgentConfig struct {
	Cluster              string `json:"cluster"`
	Namespace            string `json:"namespace"`
	ParentUID            string `json:"parentUID"`
	PeerService          string `json:"peerService"`
	ClientPort           int    `json:"clientPort"`
	PeerPort             int    `json:"peerPort"`
	ProbePort            int    `json:"probePort"`
	EtcdMetricsPort      int    `json:"etcdMetricsPort"`
	DataDir              string `json:"dataDir"`
	Token                string `json:"token"`
	LeaseDurationSeconds int    `json:"leaseDurationSeconds"`
	AdoptExistingData    bool   `json:"adoptExistingData"`
}

func (p *plan) agentConfig() AgentConfig {
	n := p.f.names
	return AgentConfig{
		Cluster: n.Cluster, Namespace: n.Namespace, ParentUID: p.f.uid,
		PeerService: n.PeerService(),
		ClientPort:  ClientPort, PeerPort: PeerPort, ProbePort: ProbePort, EtcdMetricsPort: EtcdMetricsPort,
		DataDir:              DataDir,
		Token:                Token(n.Namespace, n.Cluster, p.f.uid),
		LeaseDurationSeconds: DefaultLeaseDurationSeconds,
		AdoptExistingData:    p.spec.AdoptExistingData,
	}
}

func specJSON(s ClusterSpec) []byte {
	b, _ := json.Marshal(s) // typed struct: cannot fail
	return b
}

func (p *plan) meta(name, component string) metav1.ObjectMeta {
	n := p.f.names
	return metav1.ObjectMeta{Name: name, Namespace: n.Namespace, Labels: n.ObjectLabels(component)}
}

func (p *plan) configMap() *corev1.ConfigMap {
	f := p.f
	agent, _ := json.MarshalIndent(p.agentConfig(), "", "  ")
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: p.meta(f.names.ConfigMap(), ComponentEtcd),
		Data: map[string]string{
			ConfigKeyAgent:        string(agent) + "\n",
			ConfigKeySpec:         string(specJSON(p.spec)),
			ConfigKeyBootstrapped: fmt.Sprint(f.bootstrapped),
			ConfigKeyClusterID:    f.clusterID,
			ConfigKeyRunning:      runningRecord(f.running),
			ConfigKeyFormed:       fmt.Sprint(f.formed || p.formedNow()),
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

func (p *plan) services() []*corev1.Service {
	n := p.f.names
	port := func(name string, port int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: port, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP}
	}
	peer := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: p.meta(n.PeerService(), ComponentEtcd),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			// Peers resolve each other before they are ready; a learner is never ready (/readyz).
			PublishNotReadyAddresses: true,
			Selector:                 n.Labels(),
			Ports:                    []corev1.ServicePort{port("client", ClientPort), port("peer", PeerPort), port("metrics", ProbePort)},
		},
	}
	client := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: p.meta(n.ClientService(), ComponentEtcd),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: n.Labels(),
			Ports:    []corev1.ServicePort{port("client", ClientPort)},
		},
	}
	return []*corev1.Service{peer, client}
}

// pdb follows docs/design.md §10.3: a quorum budget from three members on, computed on the larger of the current
// voters and the target so that a scale step never weakens it; maxUnavailable 1 below three.
func (p *plan) pdb() *policyv1.PodDisruptionBudget {
	n := p.f.names
	size := p.target()
	if voters, _ := p.f.voters(); voters > size {
		size = voters
	}
	if p.f.unionVoters > size {
		size = p.f.unionVoters
	}
	spec := policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: n.Labels()}}
	if p.target() >= 3 {
		spec.MinAvailable = ptr(intstr.FromInt32(int32(Quorum(size))))
	} else {
		spec.MaxUnavailable = ptr(intstr.FromInt32(1))
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: p.meta(n.PDB(), ComponentEtcd),
		Spec:       spec,
	}
}

// leaseObjects render the hook's half of each member Lease: metadata only, so that Metacontroller's
// merge never touches the agent's half (spec and the report annotations).
func (p *plan) leaseObjects() []*coordv1.Lease {
	n := p.f.names
	var out []*coordv1.Lease
	for _, i := range sortedKeys(p.leases) {
		lp := p.leases[i]
		ann := map[string]string{AnnIntent: lp.intent, AnnIntentSince: lp.intentSince}
		if lp.joinPermitted != "" {
			ann[AnnJoinPermitted] = lp.joinPermitted
			ann[AnnJoinDeadline] = lp.joinDeadline
		}
		if lp.seed {
			ann[AnnBootstrap] = BootstrapSeed
		}
		m := p.meta(n.Lease(i), ComponentEtcd)
		m.Annotations = ann
		out = append(out, &coordv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}, ObjectMeta: m})
	}
	return out
}

func (p *plan) rbac() []any {
	n := p.f.names
	var leases, claims, pods []string
	for i := 0; i < MaxSize; i++ {
		leases = append(leases, n.Lease(i))
		claims = append(claims, n.PVC(i))
		pods = append(pods, n.Pod(i))
	}
	account := func(name string) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{
			TypeMeta:                     metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta:                   p.meta(name, ComponentEtcd),
			AutomountServiceAccountToken: ptr(false),
		}
	}
	role := func(name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
		return &rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: p.meta(name, ComponentEtcd),
			Rules:      rules,
		}
	}
	binding := func(name string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: p.meta(name, ComponentEtcd),
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: n.Namespace}},
		}
	}
	// The agent may read and patch only this cluster's member Leases (never create, never update: it merge-patches its report and renewTime; the hook owns the rest);
	// the ops Jobs may delete only this cluster's member claims, and check that their pods are gone.
	return []any{
		account(n.MemberAccount()), account(n.OpsAccount()),
		role(n.MemberAccount(), rbacv1.PolicyRule{
			APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			ResourceNames: leases, Verbs: []string{"get", "patch"},
		}),
		role(n.OpsAccount(), rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"},
			ResourceNames: claims, Verbs: []string{"get", "delete"},
		}, rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"pods"},
			ResourceNames: pods, Verbs: []string{"get"},
		}),
		binding(n.MemberAccount()), binding(n.OpsAccount()),
	}
}

// voterEndpoints are the client URLs of the voters other than skip, for Jobs that talk to etcd.
func (p *plan) voterEndpoints(skip string) string {
	var eps []string
	for _, m := range p.f.members {
		if m.Learner || m.ID == skip {
			continue
		}
		if m.ordinal >= 0 {
			eps = append(eps, p.f.names.ClientURL(m.ordinal))
		} else if m.ClientURL != "" {
			eps = append(eps, m.ClientURL)
		}
	}
	if len(eps) == 0 {
		eps = []string{p.f.names.ClientEndpoint()}
	}
	return strings.Join(eps, ",")
}

func (p *plan) job(name, reason, account string, automount bool, args []string) *batchv1.Job {
	m := p.meta(name, ComponentOps)
	m.Annotations = map[string]string{AnnJobReason: reason}
	restricted := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		RunAsNonRoot:             ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: m,
		Spec: batchv1.JobSpec{
			// One try per Job: a failed attempt stays visible and the hook retries under the next number.
			BackoffLimit:          ptr(int32(0)),
			ActiveDeadlineSeconds: ptr(int64(removeJobDeadlineSeconds)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: p.f.names.ObjectLabels(ComponentOps)},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					ServiceAccountName:           account,
					AutomountServiceAccountToken: ptr(automount),
					EnableServiceLinks:           ptr(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr(true),
						RunAsUser:      ptr(int64(65532)),
						RunAsGroup:     ptr(int64(65532)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:                     "etcdhook",
						Image:                    p.opts.Image,
						ImagePullPolicy:          p.opts.ImagePullPolicy,
						Command:                  append([]string{HookBinary}, args...),
						SecurityContext:          restricted,
						TerminationMessagePath:   corev1.TerminationMessagePathDefault,
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
				},
			},
		},
	}
}

func (p *plan) removeJob(m *memberView, reason string, attempt int) *batchv1.Job {
	n := p.f.names
	args := []string{"member", "remove",
		"--id=" + m.ID,
		"--peer-url=" + m.PeerURL,
		"--reason=" + reason,
		"--endpoints=" + p.voterEndpoints(m.ID),
		fmt.Sprintf("--timeout=%ds", removeJobDeadlineSeconds-30),
	}
	j := p.job(n.RemoveJob(m.ID, attempt), reason, n.OpsAccount(), false, args)
	return j
}

func (p *plan) pvcJob(i, attempt int) *batchv1.Job {
	n := p.f.names
	args := []string{"pvc", "delete",
		"--claim=" + n.PVC(i),
		"--namespace=" + n.Namespace,
		"--cluster-uid=" + p.f.uid,
		"--peer-url=" + n.PeerURL(i),
		"--pod=" + n.Pod(i),
		"--endpoints=" + p.voterEndpoints(""),
		fmt.Sprintf("--timeout=%ds", removeJobDeadlineSeconds-30),
	}
	return p.job(n.PVCJob(i, attempt), "volume-of-removed-member", n.OpsAccount(), true, args)
}

// toChild turns a typed object into the JSON map Metacontroller receives: no nulls (a null becomes a
// field removal or a perpetual diff), no status, no empty spec (Leases are metadata only).
func toChild(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	dropNulls(m)
	delete(m, "status")
	if s, ok := m["spec"].(map[string]any); ok && len(s) == 0 {
		delete(m, "spec")
	}
	return m, nil
}

func dropNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if x == nil {
				delete(t, k)
				continue
			}
			dropNulls(x)
		}
	case []any:
		for _, x := range t {
			dropNulls(x)
		}
	}
}
