package manifests

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"
)

// printerColumns are the CRD's columns for `kubectl get etcdclusters` (-o wide adds priority 1).
func printerColumns(t *testing.T) []apiextv1.CustomResourceColumnDefinition {
	b, err := os.ReadFile("crd.yaml")
	require.NoError(t, err)
	var crd apiextv1.CustomResourceDefinition
	require.NoError(t, yaml.UnmarshalStrict(b, &crd))
	return crd.Spec.Versions[0].AdditionalPrinterColumns
}

// answeredCluster is a /sync fixture's parent with the status the hook answered for it: the object
// `kubectl get etcdcluster` shows once Metacontroller has written that status.
func answeredCluster(t *testing.T, fixture string) map[string]any {
	dir := filepath.Join("..", "hooks", "testdata", "sync")
	var req struct {
		Parent map[string]any `json:"parent"`
	}
	var resp struct {
		Status map[string]any `json:"status"`
	}
	for path, into := range map[string]any{fixture + ".request.json": &req, fixture + ".response.json": &resp} {
		b, err := os.ReadFile(filepath.Join(dir, path))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, into))
	}
	obj := req.Parent
	obj["status"] = resp.Status
	return obj
}

// columnValues evaluates every column as kubectl does (client-go's jsonpath on the object, "" for a path
// that finds nothing), by name.
func columnValues(t *testing.T, obj map[string]any) map[string]string {
	out := map[string]string{}
	for _, c := range printerColumns(t) {
		jp := jsonpath.New(c.Name).AllowMissingKeys(true)
		require.NoError(t, jp.Parse("{"+c.JSONPath+"}"), "column %s", c.Name)
		var buf bytes.Buffer
		require.NoError(t, jp.Execute(&buf, obj), "column %s", c.Name)
		out[c.Name] = buf.String()
	}
	return out
}

// `kubectl get etcdclusters` (and -o wide) shows what the README says it shows: each column finds its
// field in the status the hook writes, and a refused edit shows its reason beside the phase that goes on.
func TestPrinterColumnsShowTheStatus(t *testing.T) {
	running := columnValues(t, answeredCluster(t, "auth-declared-running"))
	for _, name := range []string{"Size", "Ready", "Phase", "Version", "Age"} {
		require.NotEmpty(t, running[name], "column %s of a running cluster", name)
	}
	require.Equal(t, "Running", running["Phase"])
	require.Equal(t, "3.7.3", running["Version"])
	require.Empty(t, running["Invalid"], "a valid spec shows no reason")

	refused := columnValues(t, answeredCluster(t, "auth-invalid-unknown-role"))
	require.Equal(t, "Running", refused["Phase"], "the cluster keeps its last valid spec")
	require.NotEmpty(t, refused["Invalid"], "the refused edit's reason")
	require.NotEmpty(t, refused["Message"], "-o wide: the status message")
}
