package plugin

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The krew template, rendered as krew-release-bot would (the template actions replaced), is a krew
// Plugin for the kubectl-etcd binary on every platform it lists, installing the binary and LICENSE.
// cmd/kubectl-etcd/dist renders it with the real archives' sha256 and checks them (dist_test.go).
func TestKrewTemplate(t *testing.T) {
	b, err := os.ReadFile("../krew.yaml")
	require.NoError(t, err)
	s := regexp.MustCompile(`\{\{addURIAndSha "([^"]*)" \.TagName \}\}`).ReplaceAllString(string(b), "uri: $1\n    sha256: 0000")
	s = regexp.MustCompile(`\{\{ \.TagName \}\}`).ReplaceAllString(s, "v0.1.0")
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct{ Name string }
		Spec       struct {
			Version, Homepage, ShortDescription, Description, Caveats string
			Platforms                                                 []struct {
				URI, Sha256, Bin string
				Selector         struct{ MatchLabels map[string]string }
				Files            []struct{ From, To string }
			}
		}
	}
	require.NoError(t, yaml.UnmarshalStrict([]byte(s), &m, yaml.DisallowUnknownFields), s)
	require.Equal(t, "Plugin", m.Kind)
	require.Equal(t, "etcd", m.Metadata.Name, "kubectl etcd")
	require.Equal(t, "v0.1.0", m.Spec.Version)
	require.NotEmpty(t, m.Spec.ShortDescription)
	require.Len(t, m.Spec.Platforms, 5)
	for _, p := range m.Spec.Platforms {
		require.Regexp(t, `^kubectl-etcd(\.exe)?$`, p.Bin)
		require.Regexp(t, `/v0\.1\.0/kubectl-etcd_v0\.1\.0_`+p.Selector.MatchLabels["os"]+`_`+p.Selector.MatchLabels["arch"]+`\.tar\.gz$`, p.URI)
		require.Equal(t, []struct{ From, To string }{{p.Bin, "."}, {"LICENSE", "."}}, p.Files)
	}
}
