package sync

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/sync/wire"
)

// The API server returns a StatefulSet's claim templates with fields the hook never writes
// (metadata.creationTimestamp: null, status.phase: Pending). Metacontroller's merge replaces the whole
// list (its entries have no name to merge by), so anything but the server's own bytes is a difference:
// before the fix every sync sent an Update that stored nothing new (37 of 37 idle syncs).
func TestClaimTemplatesEchoedAsObserved(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	sts := w.desired[wire.KeyStatefulSet][w.name]["spec"].(map[string]any)
	vct := sts["volumeClaimTemplates"].([]any)[0].(map[string]any)
	vct["metadata"].(map[string]any)["creationTimestamp"] = nil
	vct["status"] = map[string]any{"phase": "Pending"}
	observed := mustJSON(sts["volumeClaimTemplates"])
	resp, err := Compute(w.request(), w.now, w.opts)
	require.NoError(t, err)
	for _, c := range resp.Children {
		m := c.(map[string]any)
		if m["kind"] == "StatefulSet" {
			got, err := json.Marshal(m["spec"].(map[string]any)["volumeClaimTemplates"])
			require.NoError(t, err)
			require.JSONEq(t, string(observed), string(got))
			return
		}
	}
	t.Fatal("no StatefulSet rendered")
}
