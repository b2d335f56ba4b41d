// Package manifests holds the deployable YAML; this test keeps it in step with the code.
package manifests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/etcdhook/etcdhook/api"
)

func loadCRD(t *testing.T) apiextv1.JSONSchemaProps {
	b, err := os.ReadFile("crd.yaml")
	require.NoError(t, err)
	var crd apiextv1.CustomResourceDefinition
	require.NoError(t, yaml.UnmarshalStrict(b, &crd))
	require.Len(t, crd.Spec.Versions, 1)
	v := crd.Spec.Versions[0]
	require.Equal(t, api.Version, v.Name)
	require.NotNil(t, v.Subresources.Status, "Metacontroller does not start a controller whose parent lacks the status subresource")
	require.Equal(t, api.Group, crd.Spec.Group)
	return *v.Schema.OpenAPIV3Schema
}

// Every status field the hook writes is declared: an undeclared field is pruned, the stored status
// never matches the computed one, and Metacontroller loops.
func TestStatusSchemaDeclaresEveryField(t *testing.T) {
	schema := loadCRD(t)
	checkDeclared(t, "status", reflect.TypeOf(api.ClusterStatus{}), schema.Properties["status"])
}

// The spec schema declares what the Go type reads, and nothing the Go type would drop.
func TestSpecSchemaMatchesTypes(t *testing.T) {
	schema := loadCRD(t)
	spec := schema.Properties["spec"]
	checkDeclared(t, "spec", reflect.TypeOf(api.ClusterSpec{}), spec)
	for name := range spec.Properties {
		_, ok := jsonFields(reflect.TypeOf(api.ClusterSpec{}))[name]
		require.True(t, ok, "spec.%s is in the CRD but not in ClusterSpec", name)
	}
}

func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		out[name] = f.Type
	}
	return out
}

func checkDeclared(t *testing.T, path string, typ reflect.Type, schema apiextv1.JSONSchemaProps) {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		if typ.Kind() == reflect.Slice {
			require.NotNil(t, schema.Items, "%s is a list in Go, not in the CRD", path)
			schema = *schema.Items.Schema
		}
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || strings.HasPrefix(typ.PkgPath(), "k8s.io/") {
		return // scalars and Kubernetes types (passed through)
	}
	if schema.XPreserveUnknownFields != nil && *schema.XPreserveUnknownFields {
		return
	}
	for name, ft := range jsonFields(typ) {
		sub, ok := schema.Properties[name]
		require.True(t, ok, "%s.%s is written by the code but not declared in manifests/crd.yaml", path, name)
		checkDeclared(t, path+"."+name, ft, sub)
	}
}

// Defaults in the CRD are the defaults the hook applies.
func TestCRDDefaultsMatchCode(t *testing.T) {
	spec := loadCRD(t).Properties["spec"]
	d := api.Defaulted(api.ClusterSpec{})
	def := func(s apiextv1.JSONSchemaProps) string { return strings.Trim(string(s.Default.Raw), `"`) }
	require.Equal(t, json.Number(def(spec.Properties["size"])).String(), jsonString(*d.Size))
	require.Equal(t, d.Version, def(spec.Properties["version"]))
	require.Equal(t, d.Repository, def(spec.Properties["repository"]))
	require.Equal(t, d.Storage.Size.String(), def(spec.Properties["storage"].Properties["size"]))
	to := spec.Properties["timeouts"].Properties
	require.Equal(t, jsonString(*d.Timeouts.LearnerPromotionSeconds), def(to["learnerPromotionSeconds"]))
	require.Equal(t, jsonString(*d.Timeouts.DeadMemberSeconds), def(to["deadMemberSeconds"]))
	require.Equal(t, jsonString(*d.Timeouts.LeaveSeconds), def(to["leaveSeconds"]))
	require.Equal(t, int64(api.MaxSize), int64(*spec.Properties["size"].Maximum))
}

// The CEL rule refusing managed flags lists exactly sync.ManagedOptions.
func TestManagedOptionsMatchCEL(t *testing.T) {
	spec := loadCRD(t).Properties["spec"]
	var rule string
	for _, r := range spec.Properties["options"].XValidations {
		if strings.Contains(r.Rule, "'name'") {
			rule = r.Rule
		}
	}
	require.NotEmpty(t, rule)
	var inCEL []string
	for _, m := range regexp.MustCompile(`'([a-z-]+)'`).FindAllStringSubmatch(rule, -1) {
		inCEL = append(inCEL, m[1])
	}
	var inCode []string
	for k := range api.ManagedOptions {
		inCode = append(inCode, k)
	}
	sort.Strings(inCEL)
	sort.Strings(inCode)
	require.Equal(t, inCode, inCEL)
}

// The registration declares exactly the child types the hook renders, with the strategies of docs/design/02-metacontroller.md §2.1.
func TestRegistrationMatchesHook(t *testing.T) {
	b, err := os.ReadFile("../metacontroller/compositecontroller.yaml")
	require.NoError(t, err)
	var cc struct {
		Spec struct {
			GenerateSelector bool `json:"generateSelector"`
			ParentResource   struct{ APIVersion, Resource string }
			ChildResources   []struct {
				APIVersion     string                  `json:"apiVersion"`
				Resource       string                  `json:"resource"`
				UpdateStrategy struct{ Method string } `json:"updateStrategy"`
			} `json:"childResources"`
			Hooks map[string]struct {
				Version string `json:"version"`
				Webhook struct {
					Path    string `json:"path"`
					Timeout string `json:"timeout"`
				} `json:"webhook"`
			} `json:"hooks"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(b, &cc))
	require.True(t, cc.Spec.GenerateSelector)
	require.Equal(t, api.APIVersion, cc.Spec.ParentResource.APIVersion)
	want := map[string]string{
		"apps/v1/statefulsets": "InPlace", "v1/services": "InPlace", "policy/v1/poddisruptionbudgets": "InPlace",
		"v1/configmaps": "InPlace", "coordination.k8s.io/v1/leases": "InPlace", "batch/v1/jobs": "OnDelete", "batch/v1/cronjobs": "InPlace",
		"networking.k8s.io/v1/networkpolicies": "InPlace",
		"v1/serviceaccounts":                   "InPlace", "rbac.authorization.k8s.io/v1/roles": "InPlace",
		"rbac.authorization.k8s.io/v1/rolebindings": "OnDelete",
	}
	got := map[string]string{}
	for _, c := range cc.Spec.ChildResources {
		got[c.APIVersion+"/"+c.Resource] = c.UpdateStrategy.Method
	}
	require.Equal(t, want, got)
	require.Equal(t, "/sync", cc.Spec.Hooks["sync"].Webhook.Path)
	require.Equal(t, "/customize", cc.Spec.Hooks["customize"].Webhook.Path)
	require.Equal(t, "v1", cc.Spec.Hooks["sync"].Version)
}

// The member Lease policy (manifests/member-lease-policy.yaml) is installed, decodes into the typed API
// objects, guards UPDATEs of exactly the Leases the hook renders, keeps every hook-owned annotation (and
// no report annotation) out of the members' reach, and pairs each Lease with its pod as sync names them.
func TestMemberLeasePolicy(t *testing.T) {
	b, err := os.ReadFile("member-lease-policy.yaml")
	require.NoError(t, err)
	var policy admissionv1.ValidatingAdmissionPolicy
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	docs := regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1)
	require.Len(t, docs, 2)
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[0]), &policy))
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[1]), &binding))
	require.Equal(t, "admissionregistration.k8s.io/v1", policy.APIVersion)
	require.Equal(t, "ValidatingAdmissionPolicy", policy.Kind)
	require.Equal(t, "admissionregistration.k8s.io/v1", binding.APIVersion)
	require.Equal(t, "ValidatingAdmissionPolicyBinding", binding.Kind)

	spec := policy.Spec
	require.NotNil(t, spec.FailurePolicy)
	require.Equal(t, admissionv1.Fail, *spec.FailurePolicy)
	require.Nil(t, spec.ParamKind)
	require.NotNil(t, spec.MatchConstraints)
	require.Len(t, spec.MatchConstraints.ResourceRules, 1)
	rule := spec.MatchConstraints.ResourceRules[0]
	require.Equal(t, []admissionv1.OperationType{admissionv1.Update}, rule.Operations)
	require.Equal(t, []string{"coordination.k8s.io"}, rule.APIGroups)
	require.Equal(t, []string{"v1"}, rule.APIVersions)
	require.Equal(t, []string{"leases"}, rule.Resources)
	require.NotNil(t, spec.MatchConstraints.ObjectSelector)
	require.Equal(t, map[string]string{api.LabelManagedBy: api.ManagedBy, api.LabelComponent: api.ComponentEtcd},
		spec.MatchConstraints.ObjectSelector.MatchLabels)
	require.Empty(t, spec.MatchConstraints.ObjectSelector.MatchExpressions)

	n := api.Names{Cluster: "demo", Namespace: "prod"}
	require.True(t, strings.HasSuffix(n.MemberAccount(), "-member"), "the matchCondition selects the member account by its suffix")
	for i := 0; i < api.MaxSize; i++ {
		require.Equal(t, n.Pod(i)+"-member", n.Lease(i), "the policy pairs Lease <pod>-member with pod <pod>")
	}
	require.Len(t, spec.MatchConditions, 1)
	require.Contains(t, spec.MatchConditions[0].Expression, "'system:serviceaccount:'")
	require.Contains(t, spec.MatchConditions[0].Expression, "'-member'")

	vars := map[string]string{}
	for _, v := range spec.Variables {
		vars[v.Name] = v.Expression
	}
	require.Contains(t, vars["podName"], "'authentication.kubernetes.io/pod-name'")
	var inCEL []string
	for _, m := range regexp.MustCompile(`'([^']+)'`).FindAllStringSubmatch(vars["hookOwned"], -1) {
		inCEL = append(inCEL, m[1])
	}
	hookOwned := []string{api.AnnIntent, api.AnnIntentSince, api.AnnJoinPermitted, api.AnnJoinDeadline, api.AnnBootstrap, api.AnnDefrag, api.AnnRenewal,
		api.AnnCARotation, api.AnnCARestart, api.AnnPeerScheme, api.AnnRecover, api.AnnAuthDeclared}
	sort.Strings(inCEL)
	sort.Strings(hookOwned)
	require.Equal(t, hookOwned, inCEL, "the policy's hookOwned list is the hook-owned Lease annotations")
	report := []string{api.AnnMemberID, api.AnnClusterID, api.AnnClusterUID, api.AnnRole, api.AnnHealthy,
		api.AnnVersion, api.AnnError, api.AnnLeaderID, api.AnnMembers}
	for _, k := range append(report, api.AnnTLSCAs, api.AnnTLSIssuer, api.AnnTLSCASecret) {
		require.NotContains(t, string(b), "'"+k+"'", "the agent writes %s: the policy must leave it alone", k)
	}
	var validations []string
	for _, v := range spec.Validations {
		validations = append(validations, v.Expression)
	}
	all := strings.Join(validations, "\n")
	require.Contains(t, all, "variables.podName + '-member'")
	require.Contains(t, all, "variables.changedHookOwned")

	require.Equal(t, policy.Name, binding.Spec.PolicyName)
	require.Equal(t, []admissionv1.ValidationAction{admissionv1.Deny}, binding.Spec.ValidationActions)
	require.Nil(t, binding.Spec.MatchResources, "the binding applies wherever the policy matches")
	require.Nil(t, binding.Spec.ParamRef)

	k, err := os.ReadFile("kustomization.yaml")
	require.NoError(t, err)
	var kust struct{ Resources []string }
	require.NoError(t, yaml.Unmarshal(k, &kust))
	require.Contains(t, kust.Resources, "member-lease-policy.yaml")
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The hooks are served over TLS (docs/design/02-metacontroller.md §2.2) end to end: the registration dials the Service's
// https port with the CA of the Secret the init container keeps; that port reaches the server's TLS
// listener, which serves the certificate the init container writes; the NetworkPolicy lets it in; and
// the API token is in the init container alone.
func TestHooksServedOverTLS(t *testing.T) {
	b, err := os.ReadFile("../metacontroller/compositecontroller.yaml")
	require.NoError(t, err)
	var cc struct {
		Spec struct {
			Hooks map[string]struct {
				Webhook struct {
					Service struct {
						Name, Namespace, Protocol string
						Port                      int32
					} `json:"service"`
					CABundle struct {
						SecretRef struct{ Name, Namespace, Key string } `json:"secretRef"`
					} `json:"caBundle"`
				} `json:"webhook"`
			} `json:"hooks"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(b, &cc))

	var dep appsv1.Deployment
	var svc corev1.Service
	docs, err := os.ReadFile("deployment.yaml")
	require.NoError(t, err)
	for _, doc := range strings.Split(string(docs), "\n---\n") {
		var meta struct{ Kind string }
		require.NoError(t, yaml.Unmarshal([]byte(doc), &meta))
		switch meta.Kind {
		case "Deployment":
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &dep))
		case "Service":
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &svc))
		}
	}
	pod := dep.Spec.Template.Spec
	require.Len(t, pod.InitContainers, 1)
	init, hook := pod.InitContainers[0], pod.Containers[0]
	flag := func(args []string, name string) string {
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
		}
		return ""
	}
	require.Equal(t, "certs", init.Args[0])
	secret, outDir := flag(init.Args, "secret"), flag(init.Args, "out-dir")
	require.Equal(t, outDir+"/tls.crt", flag(hook.Args, "tls-cert-file"))
	require.Equal(t, outDir+"/tls.key", flag(hook.Args, "tls-key-file"))
	tlsPort := flag(hook.Args, "tls-addr")

	var httpsPort int32
	for _, p := range hook.Ports {
		if p.Name == "https" {
			httpsPort = p.ContainerPort
		}
	}
	require.Equal(t, ":"+strconv.Itoa(int(httpsPort)), tlsPort)
	for name, h := range cc.Spec.Hooks {
		w := h.Webhook
		require.Equal(t, "https", w.Service.Protocol, name)
		require.Equal(t, svc.Name, w.Service.Name, name)
		require.Equal(t, svc.Namespace, w.Service.Namespace, name)
		require.Equal(t, secret, w.CABundle.SecretRef.Name, name)
		require.Equal(t, dep.Namespace, w.CABundle.SecretRef.Namespace, name)
		require.Equal(t, "ca.crt", w.CABundle.SecretRef.Key, name)
		var target string
		for _, p := range svc.Spec.Ports {
			if p.Port == w.Service.Port {
				target = p.TargetPort.StrVal
			}
		}
		require.Equal(t, "https", target, "%s: Service port %d reaches the TLS listener", name, w.Service.Port)
	}
	require.False(t, *pod.AutomountServiceAccountToken)
	for _, m := range hook.VolumeMounts {
		require.NotEqual(t, "/var/run/secrets/kubernetes.io/serviceaccount", m.MountPath, "the server holds no token")
	}
	var tokenInInit bool
	for _, m := range init.VolumeMounts {
		tokenInInit = tokenInInit || m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount"
	}
	require.True(t, tokenInInit)

	np, err := os.ReadFile("networkpolicy.yaml")
	require.NoError(t, err)
	require.Contains(t, string(np), "{port: "+strconv.Itoa(int(httpsPort))+", protocol: TCP}")
}

// The samples are clusters a newcomer applies first: each decodes strictly, passes the hook's own
// validation, and runs the default etcd version (a sample pinned to an older one upgrades nobody and
// hides the default).
func TestSamples(t *testing.T) {
	paths, err := filepath.Glob("samples/*.yaml")
	require.NoError(t, err)
	var clusters int
	for _, path := range paths {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var meta struct{ Kind string }
			require.NoError(t, yaml.Unmarshal([]byte(doc), &meta), path)
			if meta.Kind != api.Kind {
				continue
			}
			var ec api.EtcdCluster
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &ec), path)
			require.Equal(t, api.DefaultVersion, api.Defaulted(ec.Spec).Version, "%s runs another etcd version than the default", path)
			require.Empty(t, api.Validate(ec.Name, api.Defaulted(ec.Spec)), path)
			clusters++
		}
	}
	require.Equal(t, len(paths), clusters, "one EtcdCluster per sample")
}
