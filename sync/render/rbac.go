package render

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// RBAC is the members' and the ops Jobs' accounts, roles and bindings.
func RBAC(d *Desired) []any {
	n := d.Names
	var leases, claims, pods []string
	for i := 0; i < api.MaxSize; i++ {
		leases = append(leases, n.Lease(i))
		claims = append(claims, n.PVC(i))
		pods = append(pods, n.Pod(i))
	}
	account := func(name string) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{
			TypeMeta:                     metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta:                   meta(n, name, api.ComponentEtcd),
			AutomountServiceAccountToken: ptr(false),
		}
	}
	role := func(name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
		return &rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: meta(n, name, api.ComponentEtcd),
			Rules:      rules,
		}
	}
	binding := func(name string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: meta(n, name, api.ComponentEtcd),
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: n.Namespace}},
		}
	}
	// The agent may read and patch only this cluster's member Leases (never create, never update: it merge-patches its report and renewTime; the hook owns the rest);
	// the ops Jobs may delete only this cluster's member claims, and check that their pods are gone; to
	// grow a claim they patch it and may restart its pod (a driver that grows file systems offline), and
	// to bring the claim template in line they delete the StatefulSet with its pods orphaned (§17).
	events := EventsRule
	memberRules := []rbacv1.PolicyRule{{
		APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
		ResourceNames: leases, Verbs: []string{"get", "patch"},
	}, events}
	if d.Auth != nil {
		// The agents read the declared auth (auth.json) live: a ConfigMap volume is refreshed only
		// within a minute or so, and agent.json is read once at start.
		memberRules = append(memberRules, rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{n.ConfigMap()}, Verbs: []string{"get"},
		})
	}
	// The agents keep the built-in Secrets while any pod may run with certificates: also through a TLS
	// switch off, until every pod runs the plaintext template (Template.AgentTLS).
	if t := d.Spec.Security.TLS.As(d.Template.AgentTLS); t.BuiltInNeeded() {
		names := []string{n.CASecret()}
		if t.Client.SecretName == "" {
			names = append(names, n.ClientSecret())
		}
		if d.Auth != nil {
			// The root identity and each user's credentials (docs/design/20-auth.md).
			names = append(names, d.Auth.RootSecret)
			for _, u := range d.Auth.Users {
				names = append(names, u.SecretName)
			}
		}
		// With built-in TLS the agents keep the cluster's CA and client Secrets: read and renew only those
		// two. RBAC cannot limit create by name (the name is not known when it is authorised): the
		// admission policy in manifests/member-secret-policy.yaml limits the member accounts' Secret
		// creates to their own cluster's two names.
		memberRules = append(memberRules, rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"secrets"},
			ResourceNames: names, Verbs: []string{"get", "update"},
		}, rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"},
		})
	}
	return []any{
		account(n.MemberAccount()), account(n.OpsAccount()),
		role(n.MemberAccount(), memberRules...),
		role(n.OpsAccount(), rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"},
			ResourceNames: claims, Verbs: []string{"get", "patch", "delete"},
		}, rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"pods"},
			ResourceNames: pods, Verbs: []string{"get", "delete"},
		}, rbacv1.PolicyRule{
			APIGroups: []string{"apps"}, Resources: []string{"statefulsets"},
			ResourceNames: []string{n.StatefulSet()}, Verbs: []string{"get", "delete"},
		}, events),
		binding(n.MemberAccount()), binding(n.OpsAccount()),
	}
}

// EventsRule lets the agents and Jobs post Events on their EtcdCluster (`kubectl describe etcdcluster`)
// through events.k8s.io/v1 (membership.KubeRecorder): create a new one, patch a repeat into its series.
// That is as narrow as Kubernetes allows: an Event's name is generated, so neither verb can be held to
// resource names, and RBAC cannot look inside the object (its regarding). What remains: an account
// can create and patch any Event in its namespace through events.k8s.io (no longer through the core
// group, which the recorder never uses) (docs/operations.md §9).
var EventsRule = rbacv1.PolicyRule{
	APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"},
}
