package sync

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Each hand-written error fixture is refused for the reason it exists to prove, not another one.
func TestDecodeRefusesForTheRightReason(t *testing.T) {
	for name, want := range map[string]string{
		"error-wrong-kind":             "parent is apps/v1 Deployment",
		"error-missing-uid":            "must have name, namespace and uid",
		"error-undeclared-child-type":  "undeclared types [Secret.v1]",
		"error-child-wrong-namespace":  `is in namespace "other"`,
		"error-children-absent":        "children group StatefulSet.apps/v1 is absent",
		"error-child-group-absent":     "children group Lease.coordination.k8s.io/v1 is absent",
		"error-finalizing-live-parent": "no metadata.deletionTimestamp",
	} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "hooks", "testdata", "sync", name+".request.json"))
			require.NoError(t, err)
			var req Request
			require.NoError(t, json.Unmarshal(b, &req))
			_, err = Compute(&req, fixtureNow, Options{})
			var in *InputError
			require.ErrorAs(t, err, &in)
			require.Contains(t, err.Error(), want)
		})
	}
}
