// Package wire is the hook's side of Metacontroller's JSON: a sync request's body into typed observed
// objects (Decode), and an answer's values into bytes (Encode, Child). It decodes and encodes with
// github.com/go-json-experiment/json under encoding/json's rules (jsonv1.DefaultOptionsV1: keys match
// case-insensitively, a later key wins, null clears a map), into the k8s.io/api types; the body's shape
// is bounded (Shape) before any of it is decoded.
package wire

import (
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/etcdhook/etcdhook/api"
)

// Request is a Metacontroller CompositeController sync/finalize request. Children and related objects are
// keyed "Kind.group/version" and then by name (hook v1) or namespace/name (hook v2); the inner key is
// never trusted, objects are identified by their own metadata, so both key formats decode alike.
type Request struct {
	Controller jsontext.Value                       `json:"controller,omitempty"`
	Parent     jsontext.Value                       `json:"parent"`
	Children   map[string]map[string]jsontext.Value `json:"children"`
	Related    map[string]map[string]jsontext.Value `json:"related"`
	Finalizing bool                                 `json:"finalizing"`
}

// Group keys of the child and related types the registration declares (metacontroller/).
const (
	KeyStatefulSet    = "StatefulSet.apps/v1"
	KeyService        = "Service.v1"
	KeyPDB            = "PodDisruptionBudget.policy/v1"
	KeyConfigMap      = "ConfigMap.v1"
	KeyLease          = "Lease.coordination.k8s.io/v1"
	KeyJob            = "Job.batch/v1"
	KeyServiceAccount = "ServiceAccount.v1"
	KeyRole           = "Role.rbac.authorization.k8s.io/v1"
	KeyRoleBinding    = "RoleBinding.rbac.authorization.k8s.io/v1"
	// KeyCronJob: the scheduled backup. Optional: a registration from before backups existed does not
	// declare it, and then no CronJob is rendered (BackupFailing says why) rather than every sync refused.
	KeyCronJob = "CronJob.batch/v1"
	// KeyNetworkPolicy: the cluster's NetworkPolicy, optional in the same way (NetworkPolicyMissing).
	KeyNetworkPolicy = "NetworkPolicy.networking.k8s.io/v1"
	KeyPod           = "Pod.v1"
	KeyPVC           = "PersistentVolumeClaim.v1"
	// KeySecret: the user's TLS Secrets, related by name when the spec names them (customize).
	KeySecret = "Secret.v1"
)

// Observed is the decoded request: every object typed and indexed by its own name.
type Observed struct {
	Parent          api.EtcdCluster
	StatefulSets    map[string]*appsv1.StatefulSet
	Services        map[string]*corev1.Service
	PDBs            map[string]*policyv1.PodDisruptionBudget
	ConfigMaps      map[string]*corev1.ConfigMap
	Leases          map[string]*coordv1.Lease
	Jobs            map[string]*batchv1.Job
	ServiceAccounts map[string]*corev1.ServiceAccount
	Roles           map[string]*rbacv1.Role
	RoleBindings    map[string]*rbacv1.RoleBinding
	// CronJobs: nil when the registration does not declare the group (CronJobsDeclared false).
	CronJobs         map[string]*batchv1.CronJob
	CronJobsDeclared bool
	// NetworkPolicies: nil when the registration does not declare the group.
	NetworkPolicies         map[string]*networkingv1.NetworkPolicy
	NetworkPoliciesDeclared bool
	Pods                    map[string]*corev1.Pod
	PVCs                    map[string]*corev1.PersistentVolumeClaim
	// Secrets are the user's TLS Secrets the customize hook asked for (nil when none was: the group is
	// absent until Metacontroller has the spec's names, and then a named Secret counts as not seen).
	Secrets    map[string]*corev1.Secret
	Finalizing bool
	// SpecError is why the parent's spec did not decode ("" when it did).
	SpecError string
	// body is the request as received; raw, children as sent, found in body when first asked for (Raw).
	body []byte
	raw  map[ChildID][]byte
}

// Raw is a child exactly as observed, for answers that must change nothing (the children answered
// unchanged, the claim templates); nil for none. The StatefulSets' are kept at decoding (every answer
// needs the members' claim templates); the others are read from the body only when asked for (an answer
// without a spec to render from).
func (o *Observed) Raw(id ChildID) []byte {
	if b, ok := o.raw[id]; ok || id.Key == KeyStatefulSet {
		return b
	}
	var w struct {
		Children map[string]map[string]jsontext.Value `json:"children"`
	}
	if Unmarshal(o.body, &w) != nil {
		return nil
	}
	for key, objs := range w.Children {
		for _, b := range objs {
			var m struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if Unmarshal(b, &m) == nil {
				o.raw[ChildID{key, m.Metadata.Name}] = b
			}
		}
	}
	return o.raw[id]
}

// ChildID names one observed child: its group key and name.
type ChildID struct{ Key, Name string }

// ParentKey names the request's parent, namespace/name.
func (o *Observed) ParentKey() string { return o.Parent.Namespace + "/" + o.Parent.Name }

// InputError is a request the hook refuses (HTTP 422): nothing may be changed on its account.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

// InputErrorf makes an InputError.
func InputErrorf(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// MalformedError is a body that is not a request at all (HTTP 400): not JSON, or not an object of the
// request's shape.
type MalformedError struct{ Msg string }

func (e *MalformedError) Error() string { return e.Msg }
