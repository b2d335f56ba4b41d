package sync

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// Claims of the continuous backup and point-in-time restore fixtures (issue 27).

// claimsEwriterCmd is the continuous backup writer's command, failing when it is not rendered.
func claimsEwriterCmd(t *testing.T, a *fxAnswer) []string {
	t.Helper()
	w := a.children("StatefulSet")["demo-backup-writer"]
	require.NotNil(t, w, "the writer's StatefulSet is rendered")
	return strs(dig(w, "spec", "template", "spec", "containers", 0, "command"))
}

func init() {
	addClaims(map[string]fixtureClaim{
		"backup-continuous": {"spec.backup.continuous renders the writer (one-replica StatefulSet running backup-follow on the backup account) and status.backup.continuous shows its newest restorable point", func(t *testing.T, a *fxAnswer) {
			cmd := claimsEwriterCmd(t, a)
			require.Contains(t, cmd, "backup-follow")
			require.Contains(t, cmd, "--chunk-interval=5s")
			require.Contains(t, cmd, "--lease=demo-backup")
			w := a.children("StatefulSet")["demo-backup-writer"]
			require.Equal(t, float64(1), dig(w, "spec", "replicas"))
			require.Equal(t, "demo-backup", dig(w, "spec", "template", "spec", "serviceAccountName"))
			require.Equal(t, "backup-writer", dig(w, "spec", "selector", "matchLabels", "app.kubernetes.io/component"))
			require.Nil(t, dig(w, "spec", "volumeClaimTemplates"), "the members' claim templates are theirs alone")
			require.NotNil(t, dig(a.children("StatefulSet")["demo"], "spec", "volumeClaimTemplates"))
			c, _ := claimsCbackup(a)["continuous"].(map[string]any)
			require.Equal(t, continuousSnap, c["snapshot"])
			require.Equal(t, float64(9876), c["revision"])
			require.Equal(t, float64(4242), c["chainStart"])
			require.NotEmpty(t, c["time"])
			require.Nil(t, a.condition("BackupLagging"))
		}},
		"backup-continuous-lagging": {"a restorable point older than maxLag (1m by default) raises BackupLagging (Lagging) with the writer's own message", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "BackupLagging", "True", "Lagging")
			msg, _ := a.condition("BackupLagging")["message"].(string)
			require.Contains(t, msg, "revision 9876")
			require.Contains(t, msg, "5m0s old")
			require.Contains(t, msg, "not reachable")
		}},
		"backup-continuous-report-distrusted": {"a writer report naming a snapshot outside the cluster's folder is ignored (InputIgnored) and not shown in status", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InputIgnored", "True", "ImpossibleInput")
			msg, _ := a.condition("InputIgnored")["message"].(string)
			require.Contains(t, msg, "not one of this cluster's folder")
			require.Nil(t, claimsCbackup(a)["continuous"])
		}},
		"backup-continuous-invalid": {"a maxLag below chunkInterval plus the report period is InvalidBackup naming the field; no writer is rendered", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "InvalidBackup")
			msg, _ := a.condition("InvalidSpec")["message"].(string)
			require.Contains(t, msg, "spec.backup.continuous.maxLag 40s")
			require.Nil(t, a.children("StatefulSet")["demo-backup-writer"])
		}},
		"backup-retention-tiers": {"retention tiers reach the CronJob's and the writer's commands as --keep-hourly/-daily/-weekly, with no keepLast default beside them", func(t *testing.T, a *fxAnswer) {
			for _, cmd := range [][]string{claimsCjobCmd(a.children("CronJob")["demo-backup"]), claimsEwriterCmd(t, a)} {
				require.Contains(t, cmd, "--keep-hourly=24")
				require.Contains(t, cmd, "--keep-daily=7")
				require.Contains(t, cmd, "--keep-weekly=4")
				require.NotContains(t, cmd, "--keep-monthly=")
				for _, arg := range cmd {
					require.NotContains(t, arg, "--keep-last=", "tiers alone decide: no default count beside them")
				}
			}
		}},
		"restore-to-time": {"spec.restore.toTime reaches the seed's agent.json as restore.toTime", func(t *testing.T, a *fxAnswer) {
			var agent map[string]any
			require.NoError(t, json.Unmarshal([]byte(a.configData(t)["agent.json"].(string)), &agent))
			require.Equal(t, "2025-12-31T23:15:00Z", dig(agent, "restore", "toTime"))
			require.Nil(t, dig(agent, "restore", "toRevision"))
		}},
		"restore-two-points": {"spec.restore with both toRevision and toTime is InvalidRestore (one point only); nothing is created", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "InvalidRestore")
			msg, _ := a.condition("InvalidSpec")["message"].(string)
			require.Contains(t, msg, "one point only")
			require.Empty(t, a.children("StatefulSet"))
		}},
	})
}
