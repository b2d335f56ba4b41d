package plugin

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/etcdhook/etcdhook/api"
)

// plannedRecovery is status.recovery as the hook writes it for a Manual plan.
func plannedRecovery() map[string]any {
	return map[string]any{
		"phase": api.RecoveryPlanned, "token": "8e9e05c521647a5e@100", "survivor": "demo-0", "revision": int64(100), "raftTerm": int64(3),
		"members": []any{
			map[string]any{"name": "demo-0", "memberID": "8e9e05c521647a5e", "holds": "revision 100, raft term 3"},
			map[string]any{"name": "demo-1", "memberID": "8e9e05c521648b6f", "holds": "no data (lost for good)"},
		},
		"loses":   "no revision another member that reports holds (demo-0 is the freshest)",
		"message": "spec.recovery.quorumLoss is Manual: kubectl etcd recover NAME --apply carries this plan out",
	}
}

// --plan prints the plan and changes nothing; without a plan it says why and fails.
func TestRecoverPlan(t *testing.T) {
	u := demoCluster(map[string]any{})
	_ = unstructured.SetNestedMap(u.Object, plannedRecovery(), "status", "recovery")
	dyn := newDynamic(u)
	te := newTestEnv(dyn, fake.NewClientset())
	require.Equal(t, 0, te.run("recover", "demo", "--plan"), te.err.String())
	out := te.out.String()
	require.Contains(t, out, "survivor: demo-0 (revision 100, raft term 3)")
	require.Contains(t, out, "token:    8e9e05c521647a5e@100")
	require.Contains(t, out, "demo-1               8e9e05c521648b6f  no data (lost for good)")
	obj, err := dyn.Tracker().Get(GVR, "prod", "demo")
	require.NoError(t, err)
	require.Empty(t, obj.(*unstructured.Unstructured).GetAnnotations(), "--plan changes nothing")

	te = newTestEnv(newDynamic(demoCluster(map[string]any{})), fake.NewClientset())
	require.Equal(t, 1, te.run("recover", "demo"))
	require.Contains(t, te.err.String(), "has no recovery plan")
}

// --apply names the plan's token and waits until the hook says the cluster is back; a token other than
// the plan's is refused before anything is written.
func TestRecoverApply(t *testing.T) {
	u := demoCluster(map[string]any{})
	_ = unstructured.SetNestedMap(u.Object, plannedRecovery(), "status", "recovery")
	dyn := newDynamic(u)
	te := newTestEnv(dyn, fake.NewClientset())
	require.Equal(t, 1, te.run("recover", "demo", "--apply", "--id", "8e9e05c521647a5e@99"))
	require.Contains(t, te.err.String(), "the plan is 8e9e05c521647a5e@100 now")

	playHook(t, dyn, func(read int, cur *unstructured.Unstructured) {
		if read < 3 {
			return
		}
		require.Equal(t, "8e9e05c521647a5e@100", cur.GetAnnotations()[api.AnnRecoverApply])
		if read == 3 {
			_ = unstructured.SetNestedField(cur.Object, api.RecoveryForcing, "status", "recovery", "phase")
			return
		}
		unstructured.RemoveNestedField(cur.Object, "status", "recovery")
		_ = unstructured.SetNestedField(cur.Object, api.PhaseRunning, "status", "phase")
	})
	te = newTestEnv(dyn, fake.NewClientset())
	require.Equal(t, 0, te.run("recover", "demo", "--apply"), te.err.String())
	out := te.out.String()
	require.Contains(t, out, "recovery 8e9e05c521647a5e@100 of prod/demo applied")
	require.Contains(t, out, "Forcing: ")
	require.Contains(t, out, "recovered: every member rejoined")
}
