// Package charts holds the Helm chart (charts/etcdhook); this test keeps it, and the install
// kustomization (install/), in step with manifests/.
//
// helm and kustomize run as binaries built by scripts/helm.sh and scripts/kustomize.sh (pinned, from the
// Go module proxy), not as Go dependencies of the module: they would bring most of Kubernetes into go.mod.
// The scripts build a missing binary first, so these tests never skip: without the binaries (or the means
// to build them) they fail.
package charts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

const (
	chartDir  = "etcdhook"
	namespace = "etcdhook-system" // the namespace manifests/ installs into
	release   = "etcdhook"
)

// tool runs scripts/<name>.sh with args from the repository root and returns its standard output.
func tool(t *testing.T, name string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join("scripts", name+".sh")}, args...)...)
	cmd.Dir = ".."
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("scripts/%s.sh %s: %w\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), err
}

func mustTool(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := tool(t, name, args...)
	require.NoError(t, err)
	return out
}

// helmTemplate renders the chart as `helm install etcdhook charts/etcdhook -n NS` would, with --set values.
func helmTemplate(t *testing.T, ns string, set ...string) ([]byte, error) {
	t.Helper()
	args := []string{"template", release, "charts/" + chartDir, "--namespace", ns}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return tool(t, "helm", args...)
}

type object = map[string]any

// key names an object as the API server does: group/kind, namespace, name.
func key(o object) string {
	group := strings.Split(o["apiVersion"].(string), "/")
	g := ""
	if len(group) == 2 {
		g = group[0]
	}
	return fmt.Sprintf("%s/%s %s/%s", g, o["kind"], str(o, "metadata", "namespace"), str(o, "metadata", "name"))
}

func str(o object, path ...string) string {
	var v any = o
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

func sub(o object, path ...string) map[string]any {
	var v any = o
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	m, _ := v.(map[string]any)
	return m
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// parse reads a multi-document YAML stream into objects by key; a key seen twice is an error.
func parse(t *testing.T, b []byte) map[string]object {
	t.Helper()
	out := map[string]object{}
	for _, doc := range docSep.Split(string(b), -1) {
		var o object
		require.NoError(t, yaml.Unmarshal([]byte(doc), &o), "document:\n%s", doc)
		if o == nil {
			continue // comments only
		}
		k := key(o)
		require.NotContains(t, out, k, "rendered twice")
		out[k] = o
	}
	return out
}

// Labels Helm's conventions add to every object the chart renders, and that manifests/ cannot know.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

func dropHelmLabels(t *testing.T, objs map[string]object) {
	t.Helper()
	for k, o := range objs {
		labels := sub(o, "metadata", "labels")
		require.Equal(t, "Helm", labels["app.kubernetes.io/managed-by"], "%s lacks the chart's labels", k)
		for _, l := range helmLabels {
			delete(labels, l)
		}
	}
}

// An intentional difference between the chart and manifests/: applied to manifests/' object, it gives the
// chart's. apply fails when the difference is not there to make, so a stale entry is noticed.
type difference struct {
	key, why string
	apply    func(o object) error
}

func addLabel(name, value string) func(object) error {
	return addMetadata("labels", "label", name, value)
}

func addAnnotation(name, value string) func(object) error {
	return addMetadata("annotations", "annotation", name, value)
}

// addMetadata adds name=value to the object's metadata.labels or metadata.annotations (field), where
// it must not be yet (what names one of them).
func addMetadata(field, what, name, value string) func(object) error {
	return func(o object) error {
		meta := o["metadata"].(map[string]any)
		m, _ := meta[field].(map[string]any)
		if m == nil {
			m = map[string]any{}
			meta[field] = m
		}
		if _, ok := m[name]; ok {
			return fmt.Errorf("already has %s %s", what, name)
		}
		m[name] = value
		return nil
	}
}

// The chart's objects with default values differ from `kustomize build manifests/` only here.
var differences = []difference{
	{key: "/Namespace /etcdhook-system", why: "a chart does not own the namespace it is installed into: helm install --create-namespace (label it pod-security.kubernetes.io/enforce=restricted yourself)",
		apply: nil}, // nil: only in manifests/
	{key: "apiextensions.k8s.io/CustomResourceDefinition /etcdclusters.etcd.io", why: "crds.keep: helm uninstall must not delete every EtcdCluster",
		apply: addAnnotation("helm.sh/resource-policy", "keep")},
	{key: "apiextensions.k8s.io/CustomResourceDefinition /etcdclusters.etcd.io", why: "every chart object carries app.kubernetes.io/name",
		apply: addLabel("app.kubernetes.io/name", "etcdhook")},
	{key: "metacontroller.k8s.io/CompositeController /etcdhook", why: "every chart object carries app.kubernetes.io/name",
		apply: addLabel("app.kubernetes.io/name", "etcdhook")},
	{key: "policy/PodDisruptionBudget etcdhook-system/etcdhook", why: "every chart object carries app.kubernetes.io/name",
		apply: addLabel("app.kubernetes.io/name", "etcdhook")},
}

// The chart with default values renders the objects of manifests/ (which includes metacontroller/),
// field for field, but for the listed differences.
func TestChartRendersManifests(t *testing.T) {
	chart := mustTool(t, "helm", "template", release, "charts/"+chartDir, "--namespace", namespace)
	kust := mustTool(t, "kustomize", "build", "manifests")
	got, want := parse(t, chart), parse(t, kust)
	dropHelmLabels(t, got)
	require.NotEmpty(t, want)
	for _, d := range differences {
		o, ok := want[d.key]
		require.True(t, ok, "listed difference for %s, which manifests/ does not render", d.key)
		if d.apply == nil {
			delete(want, d.key)
			continue
		}
		require.NoError(t, d.apply(o), "%s: %s", d.key, d.why)
	}
	require.ElementsMatch(t, keys(want), keys(got), "the chart and manifests/ render different objects")
	for k, w := range want {
		require.Equal(t, dropBlankLines(w), dropBlankLines(got[k]), "%s differs between the chart and manifests/", k)
	}
}

// blankLines matches a line break followed by empty lines.
var blankLines = regexp.MustCompile(`\n[ \t]*\n+`)

// dropBlankLines removes empty lines inside every string of v. kustomize's YAML library (go-yaml v3) reads a
// folded scalar (>-) whose next line is more indented with an extra empty line, Helm's (go-yaml v2) without:
// manifests/member-lease-policy.yaml's CEL reads "filter(k,\n\n  (k in" from one and "filter(k,\n  (k in"
// from the other. The expression is the same; any other difference still shows.
func dropBlankLines(v any) any {
	switch v := v.(type) {
	case string:
		return blankLines.ReplaceAllString(v, "\n")
	case map[string]any:
		for k, e := range v {
			v[k] = dropBlankLines(e)
		}
	case []any:
		for i, e := range v {
			v[i] = dropBlankLines(e)
		}
	}
	return v
}

func keys(m map[string]object) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestHelmLint(t *testing.T) {
	for _, set := range [][]string{nil, {"metacontroller.enabled=true"}} {
		args := []string{"lint", "--strict", "charts/" + chartDir, "--namespace", namespace}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		out := mustTool(t, "helm", args...)
		require.Contains(t, string(out), "0 chart(s) failed", "%s", out)
	}
}

func container(t *testing.T, objs map[string]object) map[string]any {
	t.Helper()
	d := objs["apps/Deployment "+namespace+"/etcdhook"]
	require.NotNil(t, d)
	cs := sub(d, "spec", "template", "spec")["containers"].([]any)
	require.Len(t, cs, 1)
	return cs[0].(map[string]any)
}

func env(c map[string]any) map[string]string {
	out := map[string]string{}
	for _, e := range c["env"].([]any) {
		e := e.(map[string]any)
		out[e["name"].(string)] = e["value"].(string)
	}
	return out
}

// The values the chart documents change what they say.
func TestChartValues(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		objs := parse(t, mustTool(t, "helm", "template", release, "charts/"+chartDir, "--namespace", namespace))
		c := container(t, objs)
		require.Equal(t, "ghcr.io/etcdhook/etcdhook:v0.1.0", c["image"], "image.tag empty: the chart's appVersion")
		require.NotContains(t, env(c), "ETCDHOOK_LOG_LEVEL", "logLevel empty: the server's default")
	})
	t.Run("image, replicas, resources, log level, args", func(t *testing.T) {
		out, err := helmTemplate(t, namespace, "image.repository=registry.example/etcdhook", "image.tag=v9.9.9",
			"replicas=3", "resources.requests.cpu=200m", "logLevel=debug", "extraArgs={--max-in-flight=8}")
		require.NoError(t, err)
		objs := parse(t, out)
		c := container(t, objs)
		require.Equal(t, "registry.example/etcdhook:v9.9.9", c["image"])
		// The hook hands its own image to the agent init container and the Jobs: the two must not differ.
		require.Equal(t, "registry.example/etcdhook:v9.9.9", env(c)["ETCDHOOK_IMAGE"])
		require.Equal(t, "debug", env(c)["ETCDHOOK_LOG_LEVEL"])
		require.Equal(t, []any{"serve", "--addr=:8080", "--tls-addr=:8443", "--tls-cert-file=/var/run/etcdhook/serving/tls.crt", "--tls-key-file=/var/run/etcdhook/serving/tls.key", "--max-in-flight=8"}, c["args"])
		require.Equal(t, "200m", sub(c, "resources", "requests")["cpu"])
		require.Equal(t, "64Mi", sub(c, "resources", "requests")["memory"], "a --set of one resource keeps the others")
		require.EqualValues(t, 3, sub(objs["apps/Deployment "+namespace+"/etcdhook"], "spec")["replicas"])
	})
	t.Run("another namespace", func(t *testing.T) {
		out, err := helmTemplate(t, "etcd-operators")
		require.NoError(t, err)
		objs := parse(t, out)
		for k, o := range objs {
			if ns := str(o, "metadata", "namespace"); ns != "" {
				require.Equal(t, "etcd-operators", ns, k)
			}
		}
		// Metacontroller must call the hook where it runs.
		hooks := sub(objs["metacontroller.k8s.io/CompositeController /etcdhook"], "spec", "hooks")
		require.Len(t, hooks, 2)
		for name := range hooks {
			require.Equal(t, "etcd-operators", str(hooks, name, "webhook", "service", "namespace"), name)
			// ... and trust the CA the hook pods keep there.
			require.Equal(t, "etcd-operators", str(hooks, name, "webhook", "caBundle", "secretRef", "namespace"), name)
		}
	})
	t.Run("optional parts off", func(t *testing.T) {
		out, err := helmTemplate(t, namespace, "crds.install=false", "memberLeasePolicy.enabled=false",
			"networkPolicy.enabled=false", "podDisruptionBudget.enabled=false")
		require.NoError(t, err)
		kinds := map[string]bool{}
		for _, o := range parse(t, out) {
			kinds[o["kind"].(string)] = true
		}
		for _, k := range []string{"CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "NetworkPolicy", "PodDisruptionBudget"} {
			require.False(t, kinds[k], k)
		}
		require.True(t, kinds["Deployment"] && kinds["CompositeController"] && kinds["Service"])
	})
	t.Run("crds.keep=false", func(t *testing.T) {
		out, err := helmTemplate(t, namespace, "crds.keep=false")
		require.NoError(t, err)
		crd := parse(t, out)["apiextensions.k8s.io/CustomResourceDefinition /etcdclusters.etcd.io"]
		require.NotContains(t, sub(crd, "metadata", "annotations"), "helm.sh/resource-policy")
	})
}

// metacontroller.enabled installs Metacontroller v4.17.2 from its own chart, and the NetworkPolicy lets
// its pods (in the release namespace) call the hook.
func TestChartWithMetacontroller(t *testing.T) {
	out, err := helmTemplate(t, namespace, "metacontroller.enabled=true")
	require.NoError(t, err)
	objs := parse(t, out)
	sts := objs["apps/StatefulSet "+namespace+"/etcdhook-metacontroller"]
	require.NotNil(t, sts, "the subchart's StatefulSet; got %v", keys(objs))
	podLabels := sub(sts, "spec", "template", "metadata", "labels")
	cs := sub(sts, "spec", "template", "spec")["containers"].([]any)
	require.Equal(t, "ghcr.io/metacontroller/metacontroller:v4.17.2", cs[0].(map[string]any)["image"])
	// The settings install/ gives Metacontroller, in the chart's values too.
	b, err := os.ReadFile("../install/metacontroller/settings.yaml")
	require.NoError(t, err)
	var settings map[string]any
	require.NoError(t, yaml.Unmarshal(b, &settings))
	require.EqualValues(t, sub(settings, "spec")["replicas"], sub(sts, "spec")["replicas"])
	chartArgs := cs[0].(map[string]any)["args"]
	for _, a := range sub(settings, "spec", "template", "spec")["containers"].([]any)[0].(map[string]any)["args"].([]any) {
		require.Contains(t, chartArgs, a, "install/metacontroller/settings.yaml's args in the chart's metacontroller.commandArgs")
	}

	np := objs["networking.k8s.io/NetworkPolicy "+namespace+"/etcdhook"]
	from := sub(np, "spec")["ingress"].([]any)[0].(map[string]any)["from"].([]any)
	admitted := false
	for _, f := range from {
		sel := sub(f.(map[string]any), "podSelector", "matchLabels")
		if sel == nil {
			continue
		}
		matches := true
		for k, v := range sel {
			matches = matches && podLabels[k] == v
		}
		admitted = admitted || matches
	}
	require.True(t, admitted, "no NetworkPolicy peer selects Metacontroller's pods %v: %v", podLabels, from)

	// Helm installs the subchart's crds/ before any template (so, unlike `kubectl apply`, the
	// CompositeController is created in one pass): they are the release's CRDs that install/ applies.
	withCRDs := parse(t, mustTool(t, "helm", "template", release, "charts/"+chartDir, "--namespace", namespace,
		"--set", "metacontroller.enabled=true", "--include-crds"))
	mcRelease := parse(t, mustTool(t, "kustomize", "build", "install/metacontroller/v4.17.2"))
	n := 0
	for k, o := range mcRelease {
		if o["kind"] != "CustomResourceDefinition" {
			continue
		}
		n++
		delete(sub(o, "metadata", "labels"), "app.kubernetes.io/name") // the release kustomization's commonLabels
		if len(sub(o, "metadata", "labels")) == 0 {
			delete(sub(o, "metadata"), "labels")
		}
		require.Equal(t, o, withCRDs[k], k)
	}
	require.Equal(t, 3, n, "Metacontroller's CRDs")

	// Without it, no Metacontroller object is rendered.
	objs = parse(t, mustTool(t, "helm", "template", release, "charts/"+chartDir, "--namespace", namespace))
	for k := range objs {
		require.NotContains(t, k, "etcdhook-metacontroller")
	}
}

// The subchart is Metacontroller's own chart of the release install/ vendors.
func TestSubchartVersion(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "charts", "metacontroller", "Chart.yaml"))
	require.NoError(t, err)
	var c struct{ Name, Version, AppVersion string }
	require.NoError(t, yaml.Unmarshal(b, &c))
	require.Equal(t, "metacontroller-helm", c.Name)
	require.Equal(t, "4.17.2", c.Version)
	require.Equal(t, "v4.17.2", c.AppVersion)
	require.DirExists(t, filepath.Join("..", "install", "metacontroller", c.AppVersion))
}

// monitoring.enabled renders the component manifests/monitoring (kustomize: manifests/ plus
// `components: [monitoring]`) into the release namespace, with monitoring.labels added. While that
// directory does not exist, asking for it fails the render with a message instead of installing nothing.
func TestChartMonitoring(t *testing.T) {
	abs, err := filepath.Abs("../manifests")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(abs, "monitoring")); os.IsNotExist(err) {
		_, err := helmTemplate(t, namespace, "monitoring.enabled=true")
		require.Error(t, err)
		require.Contains(t, err.Error(), "holds no manifests")
		return
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, abs) // kustomize takes no absolute paths
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(fmt.Sprintf(
		"resources:\n- %s\ncomponents:\n- %s\n", rel, filepath.Join(rel, "monitoring"))), 0o644))
	want := parse(t, mustTool(t, "kustomize", "build", dir))
	plain := parse(t, mustTool(t, "kustomize", "build", "manifests"))

	out, err := helmTemplate(t, namespace, "monitoring.enabled=true")
	require.NoError(t, err)
	got := parse(t, out)
	dropHelmLabels(t, got)
	for _, d := range differences {
		if d.apply == nil {
			delete(want, d.key)
		} else {
			require.NoError(t, d.apply(want[d.key]), "%s: %s", d.key, d.why)
		}
	}
	var added []string
	for k := range want {
		if _, ok := plain[k]; !ok {
			added = append(added, k)
		}
	}
	require.NotEmpty(t, added, "the component adds no object")
	require.ElementsMatch(t, keys(want), keys(got), "the chart with monitoring.enabled and manifests/ with the component render different objects")
	for k, w := range want {
		require.Equal(t, dropBlankLines(w), dropBlankLines(got[k]), "%s differs between the chart and manifests/ with monitoring", k)
	}

	// monitoring.labels (how a Prometheus or Grafana selects them) and the release namespace reach every
	// monitoring object.
	out, err = helmTemplate(t, "etcd-operators", "monitoring.enabled=true", "monitoring.labels.release=prom")
	require.NoError(t, err)
	got = parse(t, out)
	for _, k := range added {
		k = strings.Replace(k, " "+namespace+"/", " etcd-operators/", 1)
		require.Contains(t, got, k)
		require.Equal(t, "prom", sub(got[k], "metadata", "labels")["release"], k)
	}
}

// install/ is the vendored Metacontroller release plus manifests/, nothing more or less, but for the
// settings of install/metacontroller/settings.yaml on Metacontroller's StatefulSet (replicas, args).
func TestInstallKustomization(t *testing.T) {
	install := parse(t, mustTool(t, "kustomize", "build", "install"))
	want := parse(t, mustTool(t, "kustomize", "build", "manifests"))
	mc := parse(t, mustTool(t, "kustomize", "build", "install/metacontroller/v4.17.2"))
	b, err := os.ReadFile("../install/metacontroller/settings.yaml")
	require.NoError(t, err)
	var settings map[string]any
	require.NoError(t, yaml.Unmarshal(b, &settings))
	mcSTS := mc["apps/StatefulSet metacontroller/metacontroller"]
	sub(mcSTS, "spec")["replicas"] = sub(settings, "spec")["replicas"]
	args := sub(settings, "spec", "template", "spec")["containers"].([]any)[0].(map[string]any)["args"]
	sub(mcSTS, "spec", "template", "spec")["containers"].([]any)[0].(map[string]any)["args"] = args
	require.Contains(t, args, "--leader-election")
	for k, o := range mc {
		require.NotContains(t, want, k, "Metacontroller's release and manifests/ both render it")
		want[k] = o
	}
	require.ElementsMatch(t, keys(want), keys(install))
	for k, w := range want {
		require.Equal(t, w, install[k], k)
	}
	// What the Metacontroller release must bring for manifests/ to work.
	for _, k := range []string{
		"apiextensions.k8s.io/CustomResourceDefinition /compositecontrollers.metacontroller.k8s.io",
		"apps/StatefulSet metacontroller/metacontroller",
		"/Namespace /metacontroller", // manifests/networkpolicy.yaml admits this namespace
	} {
		require.Contains(t, install, k)
	}
	img := sub(install["apps/StatefulSet metacontroller/metacontroller"], "spec", "template", "spec")["containers"].([]any)[0].(map[string]any)["image"]
	require.Equal(t, "ghcr.io/metacontroller/metacontroller:v4.17.2", img)
}

// The vendored Metacontroller files are unchanged: their SHA-256 sums are the ones the README beside
// them lists (taken from the release), and every file of the directory is listed.
func TestVendoredMetacontrollerUnchanged(t *testing.T) {
	for readme, dir := range map[string]string{
		"../install/README.md": "../install/metacontroller/v4.17.2",
		"etcdhook/README.md":   "etcdhook/charts/metacontroller",
	} {
		b, err := os.ReadFile(readme)
		require.NoError(t, err)
		sums := map[string]string{}
		for _, m := range regexp.MustCompile(`(?m)^([0-9a-f]{64})  (\S+)$`).FindAllStringSubmatch(string(b), -1) {
			sums[m[2]] = m[1]
		}
		n := 0
		require.NoError(t, filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			rel, err := filepath.Rel(dir, path)
			require.NoError(t, err)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			h := sha256.Sum256(b)
			require.Equal(t, sums[filepath.ToSlash(rel)], hex.EncodeToString(h[:]), "%s differs from the release (or %s does not list it)", path, readme)
			n++
			return nil
		}))
		require.Equal(t, len(sums), n, "%s lists files that %s does not hold", readme, dir)
	}
}

// The packaged chart (helm package stores the files the links point at) renders as the chart directory
// does: it is usable away from this repository.
func TestPackagedChart(t *testing.T) {
	dir := t.TempDir()
	mustTool(t, "helm", "package", "charts/"+chartDir, "--destination", dir)
	pkgs, err := filepath.Glob(filepath.Join(dir, "etcdhook-*.tgz"))
	require.NoError(t, err)
	require.Len(t, pkgs, 1)
	sets := []string{"crds.keep=true", "metacontroller.enabled=true"} // the first: default values
	if _, err := os.Stat("../manifests/monitoring"); err == nil {
		sets = append(sets, "monitoring.enabled=true")
	}
	for _, set := range sets {
		fromDir := mustTool(t, "helm", "template", release, "charts/"+chartDir, "--namespace", namespace, "--set", set)
		fromPkg := mustTool(t, "helm", "template", release, pkgs[0], "--namespace", namespace, "--set", set)
		require.Equal(t, string(fromDir), string(fromPkg), set)
	}
}
