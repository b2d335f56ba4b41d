package sync

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/standby"
)

// Claims of the standby's fixtures (docs/design/21-standby.md).

// claimsGApplier is the applier StatefulSet's replicas (-1: not answered).
func claimsGApplier(a *fxAnswer) int {
	s, ok := a.children("StatefulSet")["demo-standby"]
	if !ok {
		return -1
	}
	r, _ := dig(s, "spec", "replicas").(float64)
	return int(r)
}

// claimsGFenced says whether auth.json declares the standby's write fence (else the lift).
func claimsGFenced(t *testing.T, a *fxAnswer) bool {
	t.Helper()
	c := claimsFAnswered(t, a)
	require.NotNil(t, c, "a standby always declares its auth")
	fenced := c.Enabled && strings.Contains(string(mustJSON(c.Roles)), standby.ReadRole)
	if !fenced {
		require.False(t, c.Enabled, "the lift of a spec without auth turns auth off")
	}
	return fenced
}

// claimsGFollowing: the applier runs, the fence holds, the report is status.standby.
func claimsGFollowing(t *testing.T, a *fxAnswer) {
	t.Helper()
	require.Equal(t, 1, claimsGApplier(a))
	require.True(t, claimsGFenced(t, a))
	claimsDHasChild(t, a, "Lease", "demo-backup")
	require.Equal(t, "9a1f0c3e5b7d2468", claimsDStatus(a, "standby", "clusterID"))
	require.Nil(t, claimsDStatus(a, "standby", "promoted"))
}

func init() {
	addClaims(map[string]fixtureClaim{
		"standby-following": {"a formed standby runs its applier (one replica, `etcdhook standby-follow` from spec.standby.from, reporting on the backup Lease), declares the write fence, shows the applier's report in status.standby and is neither lagging nor stopped", func(t *testing.T, a *fxAnswer) {
			claimsGFollowing(t, a)
			cmd, _ := dig(a.children("StatefulSet")["demo-standby"], "spec", "template", "spec", "containers", 0, "command").([]any)
			require.Contains(t, cmd, "standby-follow")
			require.Contains(t, cmd, "--from="+standbyFrom)
			require.Equal(t, float64(9870), claimsDStatus(a, "standby", "revision"))
			require.Equal(t, "1s", claimsDStatus(a, "standby", "lag"))
			require.Nil(t, a.condition(api.CondStandbyLagging))
			require.Nil(t, a.condition(api.CondStandbyStopped))
			var agent map[string]any
			require.NoError(t, json.Unmarshal([]byte(a.configData(t)["agent.json"].(string)), &agent))
			require.Equal(t, true, dig(agent, "restore", "keepRevisions"), "the seed restores without the revision bump")
		}},
		"standby-lagging": {"a standby further behind the primary's newest chunk than maxLag (1m) is StandbyLagging, saying by how much; it goes on following", func(t *testing.T, a *fxAnswer) {
			claimsGFollowing(t, a)
			a.conditionIs(t, api.CondStandbyLagging, "True", "Lagging")
			require.Contains(t, a.condition(api.CondStandbyLagging)["message"], "behind the primary's newest revision 9876")
		}},
		"standby-stopped": {"a standby whose applier stopped for good is StandbyStopped naming the object and the revision it holds; status.standby.stop says the same", func(t *testing.T, a *fxAnswer) {
			claimsGFollowing(t, a)
			a.conditionIs(t, api.CondStandbyStopped, "True", "Stopped")
			require.Contains(t, a.condition(api.CondStandbyStopped)["message"], "stopped at revision 9870: Gap: prod/main/chains/9950/")
			require.Equal(t, "Gap", claimsDStatus(a, "standby", "stop", "reason"))
		}},
		"standby-promote-requested": {"etcd.io/promote scales the applier to 0 first and waits for it, still fenced, nothing recorded yet", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 0, claimsGApplier(a))
			require.True(t, claimsGFenced(t, a))
			require.Nil(t, claimsDStatus(a, "standby", "promoted"))
			require.Empty(t, a.configData(t)[api.ConfigKeyStandbyPromoted])
			require.Contains(t, a.message(), "the applier StatefulSet demo-standby to stop before the promotion")
		}},
		"standby-promoted": {"once no applier pod is left the promotion is recorded (ConfigMap and status.standby.promoted: token, revision reached, the primary's newest seen), the applier is released and the fence lifted", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, -1, claimsGApplier(a))
			require.False(t, claimsGFenced(t, a))
			require.Equal(t, "failover-1", claimsDStatus(a, "standby", "promoted", "token"))
			require.Equal(t, float64(9870), claimsDStatus(a, "standby", "promoted", "revision"))
			require.Equal(t, float64(9876), claimsDStatus(a, "standby", "promoted", "primaryNewestRevision"))
			require.Contains(t, a.configData(t)[api.ConfigKeyStandbyPromoted], `"token":"failover-1"`)
			claimsDHasChild(t, a, "Lease", "demo-backup")
		}},
		"standby-second-promote": {"a second promote token changes nothing: the first promotion stays recorded, no applier, the fence lifted", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, -1, claimsGApplier(a))
			require.False(t, claimsGFenced(t, a))
			require.Equal(t, "failover-1", claimsDStatus(a, "standby", "promoted", "token"))
			require.Contains(t, a.configData(t)[api.ConfigKeyStandbyPromoted], `"token":"failover-1"`)
		}},
		"standby-invalid": {"spec.standby with spec.restore on emptyDir is InvalidSpec naming both; nothing is started", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "InvalidStandby")
			claimsBCondMessageHas(t, a, "InvalidSpec", "spec.standby and spec.restore", "storage.emptyDir")
			require.Empty(t, a.children("StatefulSet"))
		}},
		"standby-own-folder": {"a standby whose source is its own folder in its backup destination is InvalidSpec naming spec.standby.from; nothing is started", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "InvalidStandby")
			claimsBCondMessageHas(t, a, "InvalidSpec", "spec.standby.from names this cluster's own folder")
			require.Empty(t, a.children("StatefulSet"))
		}},
	})
}
