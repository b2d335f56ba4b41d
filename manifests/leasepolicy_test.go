package manifests

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"

	"github.com/etcdhook/etcdhook/api"
)

// The member Lease policy, evaluated with the API server's own admission library (compiled as its
// ValidatingAdmissionPolicy plugin compiles a policy): what a member's token may and may not do to the
// Leases. e2e/leasepolicy_test.go does the same against the real API server.

func memberLeasePolicy(t *testing.T) (*admissionv1.ValidatingAdmissionPolicy, validating.Validator) {
	t.Helper()
	b, err := os.ReadFile("member-lease-policy.yaml")
	require.NoError(t, err)
	docs := strings.Split(string(b), "\n---\n")
	var p admissionv1.ValidatingAdmissionPolicy
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[0]), &p))
	opt := cel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true}
	c, err := cel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	require.NoError(t, err)
	var vars []cel.NamedExpressionAccessor
	for _, v := range p.Spec.Variables {
		vars = append(vars, &validating.Variable{Name: v.Name, Expression: v.Expression})
	}
	c.CompileAndStoreVariables(vars, opt, environment.StoredExpressions)
	var validations, messages []cel.ExpressionAccessor
	for _, v := range p.Spec.Validations {
		validations = append(validations, &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason})
		var m cel.ExpressionAccessor
		if v.MessageExpression != "" {
			m = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
		messages = append(messages, m)
	}
	var conds []cel.ExpressionAccessor
	for i := range p.Spec.MatchConditions {
		conds = append(conds, (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i]))
	}
	matcher := matchconditions.NewMatcher(c.CompileCondition(conds, opt, environment.StoredExpressions), p.Spec.FailurePolicy, "policy", "validate", p.Name)
	v := validating.NewValidator(c.CompileCondition(validations, opt, environment.StoredExpressions), matcher,
		c.CompileCondition(nil, opt, environment.StoredExpressions),
		c.CompileCondition(messages, cel.OptionalVariableDeclarations{}, environment.StoredExpressions), p.Spec.FailurePolicy, nil)
	return &p, v
}

func memberLease(name string, lbls, ann map[string]string) *coordv1.Lease {
	return &coordv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod", Labels: lbls, Annotations: ann}}
}

// admitUpdate runs the policy on an UPDATE of old to next by the member pod's token, as the API server
// would: first the object selector (matched by the old or the new object), then the conditions and
// validations. It says whether the update is admitted, and why not.
func admitUpdate(t *testing.T, p *admissionv1.ValidatingAdmissionPolicy, v validating.Validator, pod string, old, next *coordv1.Lease) (bool, string) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.MatchConstraints.ObjectSelector)
	require.NoError(t, err)
	if !sel.Matches(labels.Set(old.Labels)) && !sel.Matches(labels.Set(next.Labels)) {
		return true, "not selected"
	}
	u := &user.DefaultInfo{Name: "system:serviceaccount:prod:demo-member",
		Extra: map[string][]string{"authentication.kubernetes.io/pod-name": {pod}}}
	gvk := schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}
	gvr := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	attr := admission.NewAttributesRecord(next, old, gvk, "prod", next.Name, gvr, "", admission.Update, &metav1.UpdateOptions{}, false, u)
	va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: gvk,
		VersionedOldObject: admission.NewLazyObject(old), VersionedObject: admission.NewLazyObject(next)}
	res := v.Validate(context.Background(), gvr, va, nil, nil, celconfig.RuntimeCELCostBudget, nil)
	for _, d := range res.Decisions {
		require.NotEqual(t, validating.EvalError, d.Evaluation, "the policy failed to evaluate: %s", d.Message)
		if d.Action == validating.ActionDeny {
			return false, d.Message
		}
	}
	return true, ""
}

func TestMemberLeasePolicyAdmits(t *testing.T) {
	p, v := memberLeasePolicy(t)
	lbls := api.Names{Cluster: "demo"}.ObjectLabels(api.ComponentEtcd)
	own := func(ann map[string]string) *coordv1.Lease { return memberLease("demo-0-member", lbls, ann) }
	base := map[string]string{api.AnnIntent: api.IntentMember, api.AnnVersion: "3.6.16"}
	with := func(k, val string) map[string]string {
		m := map[string]string{}
		for a, b := range base {
			m[a] = b
		}
		if val == "" {
			delete(m, k)
		} else {
			m[k] = val
		}
		return m
	}
	for name, tc := range map[string]struct {
		pod       string
		old, next *coordv1.Lease
		admitted  bool
		why       string
	}{
		"its own report":          {"demo-0", own(base), own(with(api.AnnVersion, "3.7.3")), true, ""},
		"another member's report": {"demo-1", own(base), own(with(api.AnnVersion, "3.7.3")), false, "only its own member Lease"},
		"its own intent":          {"demo-0", own(base), own(with(api.AnnIntent, api.IntentLeave)), false, "written only by the hook"},
		"its own intent, removed": {"demo-0", own(base), own(with(api.AnnIntent, "")), false, "written only by the hook"},
		"its own join permission": {"demo-0", own(base), own(with(api.AnnJoinPermitted, "x")), false, "written only by the hook"},
		"its labels, dropped":     {"demo-0", own(base), memberLease("demo-0-member", nil, base), false, "labels"},
		"one label changed":       {"demo-0", own(base), memberLease("demo-0-member", map[string]string{api.LabelManagedBy: "someone", api.LabelComponent: api.ComponentEtcd, api.LabelInstance: "demo", api.LabelName: "etcd"}, base), false, "labels"},
		"a label added":           {"demo-0", own(base), memberLease("demo-0-member", withLabel(lbls, "x", "y"), base), true, ""},
	} {
		ok, why := admitUpdate(t, p, v, tc.pod, tc.old, tc.next)
		require.Equal(t, tc.admitted, ok, "%s: %s", name, why)
		require.Contains(t, why, tc.why, name)
	}
	// The two-step attempt of issue 24 §6: labels first (refused above), then the intent of a Lease
	// with no labels left: were the first step admitted, the second would match no policy.
	noLabels := func(ann map[string]string) *coordv1.Lease { return memberLease("demo-0-member", nil, ann) }
	ok, why := admitUpdate(t, p, v, "demo-0", noLabels(base), noLabels(with(api.AnnIntent, api.IntentLeave)))
	require.True(t, ok && why == "not selected", "a Lease without labels is outside the policy: the first step must be refused")
}

func withLabel(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range m {
		out[a] = b
	}
	return out
}
