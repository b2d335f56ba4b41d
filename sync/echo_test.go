package sync

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// With no spec to render from, children are answered so that Metacontroller's merge changes nothing —
// even when a child's last-applied annotation was edited: it decides which fields exist, never their
// values or the object's identity (found by FuzzSync: a mistyped apiVersion in the annotation made the
// answer name another kind, so the Lease was left out and would have been deleted).
func TestEchoTrustsLastAppliedOnlyForItsShape(t *testing.T) {
	w := newWorld(t, 3)
	w.lastApplied = true
	settle(w)
	delete(w.desired, wire.KeyStatefulSet)
	delete(w.desired, wire.KeyConfigMap)
	w.status = api.ClusterStatus{}
	w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.5.21" }) // a downgrade: refused, nothing to render
	req := w.request()
	for k, raw := range req.Children[wire.KeyLease] {
		var obj map[string]any
		require.NoError(t, json.Unmarshal(raw, &obj))
		ann := obj["metadata"].(map[string]any)["annotations"].(map[string]any)
		ann[lastAppliedAnnotation] = `{"apiVersion":"coordinamion.k8s.io/v1","kind":"Lease","metadata":{"name":"elsewhere","annotations":{"etcd.io/intent":"leave"}}}`
		req.Children[wire.KeyLease][k] = mustJSON(obj)
	}
	resp, err := Compute(req, w.now, w.opts)
	require.NoError(t, err)
	leases := 0
	for _, c := range resp.Children {
		m := c.(map[string]any)
		if m["kind"] != "Lease" {
			continue
		}
		leases++
		require.Equal(t, "coordination.k8s.io/v1", m["apiVersion"])
		md := m["metadata"].(map[string]any)
		require.Regexp(t, `^demo-\d-member$`, md["name"])
		require.Equal(t, api.IntentMember, md["annotations"].(map[string]any)[api.AnnIntent], "the observed value, not the annotation's")
	}
	require.Equal(t, 3, leases)
}
