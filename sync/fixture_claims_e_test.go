package sync

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Claims of the continuous backup and point-in-time restore fixtures (issue 27).

// claimsEbackupPods are the pod specs that reach the store: the backup CronJob's and the writer's.
func claimsEbackupPods(a *fxAnswer) map[string]map[string]any {
	return map[string]map[string]any{
		"CronJob demo-backup":            dig(a.children("CronJob")["demo-backup"], "spec", "jobTemplate", "spec", "template", "spec").(map[string]any),
		"StatefulSet demo-backup-writer": dig(a.children("StatefulSet")["demo-backup-writer"], "spec", "template", "spec").(map[string]any),
	}
}

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
			require.Equal(t, "2025-12-31T23:15:00Z", claimsDStatus(a, "restore", "toTime"), "status.restore names the point")
		}},
		"restore-in-place-to-time-verifying": {"etcd.io/restore-to beside restore-from: the verify Job looks for that time while the members serve; status.restore names it", func(t *testing.T, a *fxAnswer) {
			jobs := a.jobs("demo-restore")
			require.Len(t, jobs, 1)
			require.Contains(t, claimsCjobCmd(a.children("Job")[jobs[0]]), "--to-time=2026-01-01T00:55:00Z")
			require.Contains(t, claimsCjobCmd(a.children("Job")[jobs[0]]), "--verify-only")
			require.Equal(t, "Verifying", claimsDStatus(a, "restore", "phase"))
			require.Equal(t, "2026-01-01T00:55:00Z", claimsDStatus(a, "restore", "toTime"))
			require.Equal(t, 3, a.replicas(t))
		}},
		"restore-in-place-to-time-job": {"the restore Job to a time restores the revision its verification found (--to-revision), never the time again", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 0, a.replicas(t))
			var restore []string
			for _, name := range a.jobs("demo-restore") {
				if !strings.HasPrefix(name, "demo-restore-v") {
					restore = claimsCjobCmd(a.children("Job")[name])
				}
			}
			require.Contains(t, restore, "--to-revision=5017")
			for _, arg := range restore {
				require.NotContains(t, arg, "--to-time")
			}
			require.Equal(t, "Restoring", claimsDStatus(a, "restore", "phase"))
			require.Equal(t, "2026-01-01T00:55:00Z", claimsDStatus(a, "restore", "toTime"))
		}},
		"backup-encrypted": {"spec.backup.encryption: the backup CronJob and the writer mount the Secret read-only and pass --encryption-dir; no key, only its Secret's name", func(t *testing.T, a *fxAnswer) {
			for name, pod := range claimsEbackupPods(a) {
				c := dig(pod, "containers", 0).(map[string]any)
				envs, _ := c["env"].([]any)
				for _, e := range envs {
					require.Nil(t, dig(e, "valueFrom", "secretKeyRef"), "%s: a key is a file, never an environment variable", name)
				}
				require.Contains(t, strs(c["command"]), "--encryption-dir=/etc/etcdhook/backup-encryption", name)
				require.Contains(t, c["volumeMounts"], map[string]any{"name": "backup-encryption", "mountPath": "/etc/etcdhook/backup-encryption", "readOnly": true}, name)
				require.Contains(t, pod["volumes"], map[string]any{"name": "backup-encryption", "secret": map[string]any{"secretName": "backup-keys", "defaultMode": float64(0o444)}}, name)
			}
		}},
		"backup-copy": {"spec.backup.copy: the CronJob and the writer get the copy's destination, its own retention and its credentials mounted apart; status.backup.copy shows the last pass", func(t *testing.T, a *fxAnswer) {
			for name, pod := range claimsEbackupPods(a) {
				c := dig(pod, "containers", 0).(map[string]any)
				cmd := strs(c["command"])
				require.Contains(t, cmd, "--copy-destination=gs://dr-etcd/prod", name)
				require.Contains(t, cmd, "--copy-keep-daily=30", name)
				require.Contains(t, cmd, "--copy-credentials-dir=/etc/etcdhook/copy-credentials", name)
				require.Contains(t, cmd, "--keep-last=7", "%s: the primary keeps its own retention", name)
				for _, arg := range cmd {
					require.NotContains(t, arg, "--copy-keep-last", "%s: the copy's retention is its own, not the primary's default", name)
				}
				require.Contains(t, pod["volumes"], map[string]any{"name": "copy-credentials", "secret": map[string]any{"secretName": "dr-credentials", "defaultMode": float64(0o444)}}, name)
			}
			require.Equal(t, "gs://dr-etcd/prod/prod/demo/20260101T110000Z-r4242.db", claimsDStatus(a, "backup", "copy", "snapshot"))
			require.Equal(t, float64(9876), claimsDStatus(a, "backup", "copy", "revision"))
			require.Nil(t, a.condition("BackupCopyFailing"))
		}},
		"backup-copy-failing": {"a failed copy pass is BackupCopyFailing with its message, and nothing else about backups changes", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "BackupCopyFailing", "True", "CopyFailed")
			msg, _ := a.condition("BackupCopyFailing")["message"].(string)
			require.Contains(t, msg, "bucket doesn't exist")
			require.Contains(t, msg, "primary's backups are not affected")
			require.Nil(t, a.condition("BackupFailing"))
		}},
		"backup-copy-report-distrusted": {"a copy report naming a snapshot outside the copy's folder for this cluster is ignored and named in InputIgnored", func(t *testing.T, a *fxAnswer) {
			require.Nil(t, claimsDStatus(a, "backup", "copy"))
			a.conditionIs(t, "InputIgnored", "True", "")
			require.Contains(t, a.condition("InputIgnored")["message"], "spec.backup.copy.destination: ignored")
		}},
		"restore-encrypted": {"spec.restore.encryption: the members mount the Secret and the seed's agent.json names where (encryptionDir)", func(t *testing.T, a *fxAnswer) {
			var agent map[string]any
			require.NoError(t, json.Unmarshal([]byte(a.configData(t)["agent.json"].(string)), &agent))
			require.Equal(t, "/etc/etcdhook/backup-encryption", dig(agent, "restore", "encryptionDir"))
			pod := dig(a.children("StatefulSet")["demo"], "spec", "template", "spec").(map[string]any)
			require.Contains(t, pod["volumes"], map[string]any{"name": "backup-encryption", "secret": map[string]any{"secretName": "backup-keys", "defaultMode": float64(0o444)}})
		}},
		"restore-two-points": {"spec.restore with both toRevision and toTime is InvalidRestore (one point only); nothing is created", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "InvalidRestore")
			msg, _ := a.condition("InvalidSpec")["message"].(string)
			require.Contains(t, msg, "one point only")
			require.Empty(t, a.children("StatefulSet"))
		}},
	})
}
