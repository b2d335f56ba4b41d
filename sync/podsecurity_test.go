package sync

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// Every pod the hook renders (the member StatefulSet's template and every Job's template) passes the
// "restricted" Pod Security Standard as the API server's own admission plugin checks it, so that the
// hook works in a namespace labelled pod-security.kubernetes.io/enforce=restricted.

// podTemplate is one rendered pod template and where it came from.
type podTemplate struct {
	source string // fixture file, or fixture name and step
	kind   string // StatefulSet or Job
	name   string
	tmpl   corev1.PodTemplateSpec
}

var restrictedLatest = psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}

func newPSAEvaluator(t testing.TB) policy.Evaluator {
	t.Helper()
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	return e
}

// checkRestricted returns the aggregate verdict of the restricted checks for one pod template.
func checkRestricted(e policy.Evaluator, pt corev1.PodTemplateSpec) policy.AggregateCheckResult {
	return policy.AggregateCheckResults(e.EvaluatePod(restrictedLatest, &pt.ObjectMeta, &pt.Spec))
}

// decodeStrict decodes one child into its typed form, refusing fields the type does not have: a field
// the typed object would drop is a field the checks would not see.
func decodeStrict(t testing.TB, raw []byte, into any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(into))
}

// podTemplatesOf decodes the children of kind StatefulSet and Job of one response.
func podTemplatesOf(t testing.TB, source string, children []json.RawMessage) []podTemplate {
	t.Helper()
	var out []podTemplate
	for _, raw := range children {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		require.NoError(t, json.Unmarshal(raw, &head), source)
		switch head.Kind {
		case "StatefulSet":
			require.Equal(t, "apps/v1", head.APIVersion, source)
			var sts appsv1.StatefulSet
			decodeStrict(t, raw, &sts)
			out = append(out, podTemplate{source: source, kind: head.Kind, name: sts.Name, tmpl: sts.Spec.Template})
		case "Job":
			require.Equal(t, "batch/v1", head.APIVersion, source)
			var job batchv1.Job
			decodeStrict(t, raw, &job)
			out = append(out, podTemplate{source: source, kind: head.Kind, name: job.Name, tmpl: job.Spec.Template})
		}
	}
	return out
}

func responseChildren(t testing.TB, source string, body []byte) []json.RawMessage {
	t.Helper()
	var resp struct {
		Children []json.RawMessage `json:"children"`
	}
	require.NoError(t, json.Unmarshal(body, &resp), source)
	return resp.Children
}

// fixtureResponseFiles lists the stored answers that can carry pod templates.
func fixtureResponseFiles(t testing.TB) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{"sync", "finalize", "bench"} {
		m, err := filepath.Glob(filepath.Join(fixtureDir, dir, "*.response.json"))
		require.NoError(t, err)
		files = append(files, m...)
	}
	sort.Strings(files)
	return files
}

// storedFixtureTemplates: the pod templates of every stored fixture answer, as the HTTP fixtures and
// e2e/fixtures.sh replay them.
func storedFixtureTemplates(t testing.TB) []podTemplate {
	var out []podTemplate
	for _, f := range fixtureResponseFiles(t) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		out = append(out, podTemplatesOf(t, f, responseChildren(t, f, b))...)
	}
	return out
}

// computedFixtureTemplates: every stored fixture request answered by Compute as the code is now, so that
// a change not yet written back to the fixture files is checked too.
func computedFixtureTemplates(t testing.TB) []podTemplate {
	var out []podTemplate
	for _, f := range fixtureResponseFiles(t) {
		reqFile := strings.TrimSuffix(f, ".response.json") + ".request.json"
		b, err := os.ReadFile(reqFile)
		require.NoError(t, err)
		var r Request
		require.NoError(t, json.Unmarshal(b, &r), reqFile)
		if filepath.Base(filepath.Dir(f)) == "finalize" {
			r.Finalizing = true
		}
		resp, err := Compute(&r, fixtureNow, Options{Image: FixtureImage})
		require.NoError(t, err, reqFile)
		source := reqFile + " (computed)"
		out = append(out, podTemplatesOf(t, source, rawChildren(t, resp))...)
	}
	return out
}

func rawChildren(t testing.TB, resp *Response) []json.RawMessage {
	t.Helper()
	out := make([]json.RawMessage, 0, len(resp.Children))
	for _, c := range resp.Children {
		b, err := json.Marshal(c)
		require.NoError(t, err)
		out = append(out, b)
	}
	return out
}

// worldTemplates: every answer of every step while the test world is driven to each fixture's state
// (creates, scaling both ways, upgrades, dead members, remove and volume Jobs, finalizing), not just the
// final one.
func worldTemplates(t *testing.T) []podTemplate {
	var out []podTemplate
	prev := debugHook
	t.Cleanup(func() { debugHook = prev })
	for _, fx := range fixtures() {
		if fx.build == nil || fx.hook == "customize" {
			continue
		}
		step := 0
		debugHook = func(w *world, resp *Response) {
			if prev != nil {
				prev(w, resp)
			}
			step++
			out = append(out, podTemplatesOf(t, fmt.Sprintf("world %s step %d", fx.name, step), rawChildren(t, resp))...)
		}
		w := newWorld(t, 3)
		fx.build(w)
	}
	debugHook = prev
	return out
}

// TestPodSecurityRestricted: every rendered pod template is allowed by the restricted level at the
// latest policy version.
func TestPodSecurityRestricted(t *testing.T) {
	e := newPSAEvaluator(t)
	stored, computed, inWorld := storedFixtureTemplates(t), computedFixtureTemplates(t), worldTemplates(t)
	all := append(append(append([]podTemplate{}, stored...), computed...), inWorld...)

	kinds := map[string]int{}
	seen := map[[32]byte]bool{}
	for _, pt := range all {
		b, err := json.Marshal(pt.tmpl)
		require.NoError(t, err)
		sum := sha256.Sum256(append([]byte(pt.kind+"\x00"), b...))
		if seen[sum] {
			continue // the same template rendered in another state
		}
		seen[sum] = true
		kinds[pt.kind]++
		res := checkRestricted(e, pt.tmpl)
		if !res.Allowed {
			t.Errorf("%s %s from %s violates PodSecurity %q: %s", pt.kind, pt.name, pt.source, restrictedLatest.String(), res.ForbiddenDetail())
		}
	}
	t.Logf("checked %d pod templates (%d from stored fixture answers, %d computed from fixture requests, %d from every world step), %d distinct (%d StatefulSet, %d Job), against %s",
		len(all), len(stored), len(computed), len(inWorld), len(seen), kinds["StatefulSet"], kinds["Job"], restrictedLatest.String())
	for _, src := range [][]podTemplate{stored, computed, inWorld} {
		require.NotEmpty(t, src)
	}
	require.NotZero(t, kinds["StatefulSet"], "no StatefulSet pod template was checked")
	require.NotZero(t, kinds["Job"], "no Job pod template was checked")
}

// TestPodSecurityEvaluatorRefuses: the check above is not vacuous: the same evaluator refuses a rendered
// template once one restricted requirement is taken away, and names the requirement.
func TestPodSecurityEvaluatorRefuses(t *testing.T) {
	e := newPSAEvaluator(t)
	base := map[string]podTemplate{}
	for _, pt := range storedFixtureTemplates(t) {
		if _, ok := base[pt.kind]; !ok {
			base[pt.kind] = pt
		}
	}
	require.Contains(t, base, "StatefulSet")
	require.Contains(t, base, "Job")

	allContainers := func(s *corev1.PodSpec, f func(c *corev1.Container)) {
		for i := range s.InitContainers {
			f(&s.InitContainers[i])
		}
		for i := range s.Containers {
			f(&s.Containers[i])
		}
	}
	cases := []struct {
		name   string
		mutate func(s *corev1.PodSpec)
		reason string // "" = still allowed
	}{
		{name: "unchanged", mutate: func(s *corev1.PodSpec) {}},
		{name: "runAsNonRoot dropped", reason: "runAsNonRoot != true", mutate: func(s *corev1.PodSpec) {
			if s.SecurityContext != nil {
				s.SecurityContext.RunAsNonRoot = nil
			}
			allContainers(s, func(c *corev1.Container) {
				if c.SecurityContext != nil {
					c.SecurityContext.RunAsNonRoot = nil
				}
			})
		}},
		{name: "runAsUser 0", reason: "runAsUser=0", mutate: func(s *corev1.PodSpec) {
			s.SecurityContext.RunAsUser = new(int64)
		}},
		{name: "privilege escalation", reason: "allowPrivilegeEscalation != false", mutate: func(s *corev1.PodSpec) {
			allContainers(s, func(c *corev1.Container) { c.SecurityContext.AllowPrivilegeEscalation = nil })
		}},
		{name: "capabilities kept", reason: "unrestricted capabilities", mutate: func(s *corev1.PodSpec) {
			allContainers(s, func(c *corev1.Container) { c.SecurityContext.Capabilities = nil })
		}},
		{name: "seccomp unset", reason: "seccompProfile", mutate: func(s *corev1.PodSpec) {
			s.SecurityContext.SeccompProfile = nil
			allContainers(s, func(c *corev1.Container) { c.SecurityContext.SeccompProfile = nil })
		}},
		{name: "hostPath volume", reason: "restricted volume types", mutate: func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/etcd"}}})
		}},
		{name: "host network", reason: "host namespaces", mutate: func(s *corev1.PodSpec) { s.HostNetwork = true }},
	}
	for _, kind := range []string{"StatefulSet", "Job"} {
		for _, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				src := base[kind]
				pt := *src.tmpl.DeepCopy()
				require.NotNil(t, pt.Spec.SecurityContext, "%s from %s has no pod securityContext", kind, src.source)
				for _, c := range pt.Spec.Containers {
					require.NotNil(t, c.SecurityContext, "%s container %s has no securityContext", kind, c.Name)
				}
				tc.mutate(&pt.Spec)
				res := checkRestricted(e, pt)
				if tc.reason == "" {
					require.True(t, res.Allowed, res.ForbiddenDetail())
					return
				}
				require.False(t, res.Allowed, "the evaluator allowed a template with %s", tc.name)
				require.Contains(t, res.ForbiddenReason(), tc.reason)
			})
		}
	}
}
