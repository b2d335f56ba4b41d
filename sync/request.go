package sync

import (
	"encoding/json"
	"fmt"

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
// The server does not build one: it decodes the body in one pass (DecodeBody); Compute takes this form.
type Request struct {
	Controller json.RawMessage                       `json:"controller,omitempty"`
	Parent     json.RawMessage                       `json:"parent"`
	Children   map[string]map[string]json.RawMessage `json:"children"`
	Related    map[string]map[string]json.RawMessage `json:"related"`
	Finalizing bool                                  `json:"finalizing"`
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

// Observed is the decoded request: every object typed and indexed by name. Objects other than Jobs and
// the parent hold only the fields the decision reads (decode.go lists them); the rest stays zero.
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
	// raw holds every child exactly as observed (for answers that must change nothing, see
	// echoLastApplied and claimTemplates).
	raw map[childID][]byte
}

// childID names one observed child: its group key and name.
type childID struct{ key, name string }

// InputError is a request the hook refuses (HTTP 422): nothing may be changed on its account.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// MalformedError is a body that is not a request at all (HTTP 400): not JSON, or not an object of the
// request's shape. Msg is what encoding/json says of it.
type MalformedError struct{ Msg string }

func (e *MalformedError) Error() string { return e.Msg }

// rawRequest is a request split into its parts, each object still as it was sent.
type rawRequest struct {
	parent     []byte
	finalizing bool
	children   groups
	related    groups
}

// groups is the children or related map of a request. set is false when it is absent or null.
type groups struct {
	set  bool
	list []group // by key, one per key
}

// group is one "Kind.group/version" key and its objects, by their request key (one per key, sorted).
type group struct {
	key  string
	objs []rawObject
}

type rawObject struct {
	key string
	raw []byte
}

func (g groups) get(key string) (*group, bool) {
	for i := range g.list {
		if g.list[i].key == key {
			return &g.list[i], true
		}
	}
	return nil, false
}

// Deletion is an observed child the answer leaves out on purpose: Metacontroller deletes it. Every
// child the hook leaves out must be one of these, with the reason the plan gave.
type Deletion struct {
	Key    string // group key, e.g. Lease.coordination.k8s.io/v1
	Name   string
	Reason string
}
