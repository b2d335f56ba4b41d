package plugin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/etcdhook/etcdhook/api"
)

var standbySpec = map[string]any{"standby": map[string]any{"from": "s3://b/p/prod/main/latest"}}

// promote sets etcd.io/promote, prints the promotion once status.standby.promoted records it, and
// ends when the cluster is Available with every member healthy; the hook is played by a reactor.
func TestPromoteAnnotatesAndWaits(t *testing.T) {
	dyn := newDynamic(demoCluster(standbySpec))
	playHook(t, dyn, func(read int, cur *unstructured.Unstructured) {
		if read < 3 {
			return
		}
		require.Equal(t, "t-1", cur.GetAnnotations()[api.AnnPromote], "the token is set before the wait")
		_ = unstructured.SetNestedMap(cur.Object, map[string]any{"promoted": map[string]any{
			"token": "t-1", "revision": int64(9870), "time": "2026-01-01T12:00:00Z", "primaryNewestRevision": int64(9876)}}, "status", "standby")
		if read < 5 {
			return
		}
		_ = unstructured.SetNestedSlice(cur.Object, []any{map[string]any{"name": "demo-0", "healthy": true}}, "status", "members")
		_ = unstructured.SetNestedSlice(cur.Object, []any{map[string]any{
			"type": api.CondAvailable, "status": "True", "reason": "QuorumHealthy", "lastTransitionTime": "2026-01-01T12:00:00Z", "message": "1 of 1 voters healthy",
		}}, "status", "conditions")
	})
	te := newTestEnv(dyn, fake.NewClientset())
	require.Equal(t, 0, te.run("promote", "demo", "--id", "t-1"), te.err.String())
	out := te.out.String()
	require.Contains(t, out, `promotion "t-1" of prod/demo requested`)
	require.Contains(t, out, "promoted at revision 9870 (the primary's newest seen: 9876)")
	require.Contains(t, out, "done: prod/demo is Available with every member healthy")
}

// A cluster that is no standby is refused; one promoted already is left as it is (no new token).
func TestPromoteRefusedOrDone(t *testing.T) {
	te := newTestEnv(newDynamic(demoCluster(map[string]any{})), fake.NewClientset())
	require.Equal(t, 1, te.run("promote", "demo"))
	require.Contains(t, te.err.String(), "has no spec.standby")

	u := demoCluster(standbySpec)
	_ = unstructured.SetNestedMap(u.Object, map[string]any{"promoted": map[string]any{
		"token": "t-0", "revision": int64(5), "time": "2026-01-01T11:00:00Z"}}, "status", "standby")
	dyn := newDynamic(u)
	te = newTestEnv(dyn, fake.NewClientset())
	require.Equal(t, 0, te.run("promote", "demo", "--id", "t-1"), te.err.String())
	require.Contains(t, te.out.String(), `was promoted already (token "t-0"`)
	obj, err := dyn.Tracker().Get(GVR, "prod", "demo")
	require.NoError(t, err)
	require.Empty(t, obj.(*unstructured.Unstructured).GetAnnotations()[api.AnnPromote], "no token written")
}

// status shows the standby in one line: following, stopped, promoted.
func TestStandbyLine(t *testing.T) {
	for want, s := range map[string]*api.StandbyStatus{
		"following 9a1f: revision 90 of 100, lag 2s": {ClusterID: "9a1f", Revision: 90, Newest: 100, Lag: &metav1.Duration{Duration: 2 * time.Second}},
		"following 9a1f: revision 90 of 100; STOPPED at revision 90: Gap prod/main/chains/95/": {ClusterID: "9a1f", Revision: 90, Newest: 100,
			Stop: &api.StandbyStop{Reason: "Gap", Object: "prod/main/chains/95/", Revision: 90}},
		`promoted at revision 90 (token "t-1", 2026-01-01T12:00:00Z; the primary's newest seen: 100)`: {Promoted: &api.StandbyPromoted{
			Token: "t-1", Revision: 90, Time: metav1.Time{Time: now}, PrimaryNewestRevision: 100}},
	} {
		require.Equal(t, want, standbyLine(s))
	}
}
