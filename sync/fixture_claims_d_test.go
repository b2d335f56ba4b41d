package sync

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// Claims of the backup, restore, database, network, defrag and refused-request fixtures.

// claimsDStatus reads a path under status.
func claimsDStatus(a *fxAnswer, path ...any) any { return dig(a.status(), path...) }

// claimsDDefrags is the defragmentation pass each member (ordinals 0..8) is asked, by ordinal, for
// the members asked one.
func claimsDDefrags(a *fxAnswer) map[int]string {
	out := map[int]string{}
	for i := 0; i < 9; i++ {
		if in, ok := a.intent(i); ok && in.Defrag != "" {
			out[i] = in.Defrag
		}
	}
	return out
}

// claimsDNoChild asserts no child of kind is named name.
func claimsDNoChild(t *testing.T, a *fxAnswer, kind, name string) {
	t.Helper()
	_, ok := a.children(kind)[name]
	require.False(t, ok, "%s %s is not answered", kind, name)
}

// claimsDHasChild asserts a child of kind named name is answered.
func claimsDHasChild(t *testing.T, a *fxAnswer, kind, name string) map[string]any {
	t.Helper()
	c, ok := a.children(kind)[name]
	require.True(t, ok, "%s %s is answered", kind, name)
	return c
}

// claimsDRefusal is why the sync hook refuses the (raw) fixture name: the answer carries only the
// code, so the request is decoded and computed again to read the refusal.
func claimsDRefusal(t *testing.T, name string) string {
	t.Helper()
	var r Request
	require.NoError(t, json.Unmarshal(syncFixtureRequest(t, name), &r))
	_, err := Compute(&r, fixtureNow, Options{Image: FixtureImage})
	var ie *InputError
	require.ErrorAs(t, err, &ie, "refused as bad input")
	return ie.Msg
}

// claimsDRefused asserts the answer is code and the refusal names every part.
func claimsDRefused(name string, code int, parts ...string) func(t *testing.T, a *fxAnswer) {
	return func(t *testing.T, a *fxAnswer) {
		require.Equal(t, code, a.code)
		require.Nil(t, a.resp)
		msg := claimsDRefusal(t, name)
		for _, p := range parts {
			require.Contains(t, msg, p)
		}
	}
}

// claimsDSteady asserts the cluster still runs three healthy voters at three replicas.
func claimsDSteady(t *testing.T, a *fxAnswer) {
	t.Helper()
	require.Equal(t, 3, a.replicas(t))
	a.conditionIs(t, "Available", "True", "QuorumHealthy")
}

func init() {
	const restoreSnap = "s3://etcd-backups/prod/prod/demo/20260101T000000Z-r4242.db"
	addClaims(map[string]fixtureClaim{
		// ---- backups ----
		"backup-cronjobs-not-registered": {"a schedule without cronjobs in the registration answers no CronJob and says BackupFailing: CronJobsNotRegistered", func(t *testing.T, a *fxAnswer) {
			require.Empty(t, a.children("CronJob"))
			a.conditionIs(t, "BackupFailing", "True", "CronJobsNotRegistered")
			require.Contains(t, a.condition("BackupFailing")["message"], "batch/v1 cronjobs")
			claimsDSteady(t, a)
		}},
		"backup-on-demand-new-token-while-running": {"a new backup-now token while the previous token's Job runs starts a second Job and keeps the first", func(t *testing.T, a *fxAnswer) {
			jobs := a.jobs("demo-backup-")
			require.Len(t, jobs, 2)
			require.Contains(t, jobs, "demo-backup-628b49d96d", "the running Job of token t1 is kept")
			for _, j := range jobs {
				require.Equal(t, "backup-now", dig(a.children("Job")[j], "metadata", "annotations", api.AnnJobReason))
			}
			require.Equal(t, "t2", claimsDStatus(a, "backup", "onDemand", "token"))
			job := claimsDStatus(a, "backup", "onDemand", "job")
			require.NotEqual(t, "demo-backup-628b49d96d", job, "status follows the new token's Job")
			require.Contains(t, jobs, job)
		}},
		"backup-now-without-backup": {"etcd.io/backup-now without spec.backup is ignored and named in InputIgnored: no Job, no backup children", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InputIgnored", "True", "ImpossibleInput")
			require.Contains(t, a.condition("InputIgnored")["message"], "etcd.io/backup-now")
			require.Empty(t, a.children("Job"))
			require.Empty(t, a.children("CronJob"))
			claimsDNoChild(t, a, "Lease", "demo-backup")
			require.Nil(t, claimsDStatus(a, "backup"))
		}},
		"backup-removed": {"removing spec.backup releases the backup CronJob, Lease, ServiceAccount, Role and RoleBinding and drops status.backup", func(t *testing.T, a *fxAnswer) {
			require.Empty(t, a.children("CronJob"))
			for _, kind := range []string{"Lease", "ServiceAccount", "Role", "RoleBinding"} {
				claimsDNoChild(t, a, kind, "demo-backup")
			}
			claimsDHasChild(t, a, "ServiceAccount", "demo-member")
			require.Nil(t, claimsDStatus(a, "backup"))
			claimsDSteady(t, a)
		}},
		// ---- restores into a new cluster (spec.restore) ----
		"restore-new-cluster": {"a new cluster with spec.restore bootstraps its seed alone from the source, with the credentials Secret mounted", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 1, a.replicas(t))
			in, ok := a.intent(0)
			require.True(t, ok)
			require.True(t, in.Seed)
			require.Equal(t, "Restoring", a.phase())
			require.Equal(t, "Restoring", claimsDStatus(a, "restore", "phase"))
			var agent map[string]any
			require.NoError(t, json.Unmarshal([]byte(a.configData(t)["agent.json"].(string)), &agent))
			require.Equal(t, "s3://etcd-backups/prod/latest?endpoint=https://minio.storage:9000&region=us-east-1&use_path_style=true", dig(agent, "restore", "from"))
			vols, _ := dig(a.child(t, "StatefulSet", ""), "spec", "template", "spec", "volumes").([]any)
			require.Contains(t, vols, map[string]any{"name": "backup-credentials", "secret": map[string]any{"defaultMode": float64(292), "secretName": "minio-credentials"}})
		}},
		"restore-failed": {"a seed's restore that cannot succeed as written (nothing under the folder) ends the restore: phase Failed, RestoreFailed/RestoreRefused naming spec.restore.from, status.restore Failed, the message says what to do", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "RestoreFailed", "True", api.ReasonRestoreRefused)
			require.Contains(t, a.condition("RestoreFailed")["message"], "demo-0: spec.restore.from: no such snapshot: no complete snapshot")
			require.Contains(t, claimsDStatus(a, "restore", "message"), "no complete snapshot")
			require.Equal(t, "Failed", claimsDStatus(a, "restore", "phase"))
			require.Equal(t, "Failed", a.phase())
			require.Contains(t, a.message(), "the restore has failed and is not retried")
			require.Equal(t, 1, a.replicas(t), "nothing but the seed")
		}},
		"restore-retrying": {"a seed's restore failing for a cause that may pass says it retries (RestoreRetrying, with the next attempt and the bound) and the restore stays Restoring", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "RestoreFailed", "True", api.ReasonRestoreRetrying)
			require.Contains(t, a.condition("RestoreFailed")["message"], "demo-0: attempt 2 failed, retrying at 2026-01-01T12:00:10Z, until 2026-01-01T12:59:55Z")
			require.Equal(t, "Restoring", claimsDStatus(a, "restore", "phase"))
			require.Equal(t, "Restoring", a.phase())
			require.Equal(t, 1, a.replicas(t))
		}},
		"restore-done": {"once the seed restored, status.restore says Restored with the snapshot and revision, and the cluster grows to its size", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "Restored", claimsDStatus(a, "restore", "phase"))
			require.Equal(t, restoreSnap, claimsDStatus(a, "restore", "snapshot"))
			require.Equal(t, float64(4242), claimsDStatus(a, "restore", "revision"))
			require.Equal(t, "Running", a.phase())
			claimsDSteady(t, a)
		}},
		"restore-added-running": {"spec.restore added to a running cluster is InvalidSpec RestoreImmutable: nothing restores, children keep the last valid spec", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "RestoreImmutable")
			require.Nil(t, claimsDStatus(a, "restore"))
			require.NotContains(t, a.configData(t)["agent.json"], `"restore"`)
			require.NotContains(t, a.configData(t)["spec.json"], `"restore"`)
			require.Empty(t, a.jobs("restore"))
			require.Equal(t, "Running", a.phase())
			claimsDSteady(t, a)
		}},
		"restore-invalid-source": {"a new cluster whose spec.restore.from names neither a snapshot nor latest is Failed InvalidRestore and creates nothing", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "InvalidRestore")
			require.Equal(t, "Failed", a.phase())
			cs, _ := a.resp["children"].([]any)
			require.Empty(t, cs)
			a.messageHas(t, "nothing is created", "spec.restore.from")
		}},
		// ---- in-place restores (etcd.io/restore-from) ----
		"restore-in-place-verifying": {"restore-from on a running cluster first runs a verify Job while every member keeps serving", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, []string{"demo-restore-v1da1e70ebe"}, a.jobs("demo-restore"))
			require.Equal(t, "Verifying", claimsDStatus(a, "restore", "phase"))
			require.Equal(t, true, claimsDStatus(a, "restore", "inPlace"))
			require.Equal(t, "Running", a.phase())
			claimsDSteady(t, a)
		}},
		"restore-in-place-stopping": {"once the verify Job passed the members stop (replicas 0), their Leases kept, the replaced cluster ID recorded", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 0, a.replicas(t))
			require.Equal(t, "Stopping", claimsDStatus(a, "restore", "phase"))
			require.Equal(t, []any{"cdf818194e3a8c32"}, claimsDStatus(a, "restore", "replacedClusterIDs"))
			require.Equal(t, []string{"demo-restore-v1da1e70ebe"}, a.jobs("demo-restore"), "no restore Job before every member stopped")
			for i := 0; i < 3; i++ {
				in, ok := a.intent(i)
				require.True(t, ok)
				require.Equal(t, api.IntentMember, in.Kind)
			}
			require.Equal(t, "Restoring", a.phase())
			a.conditionIs(t, "Available", "False", "RestoringInPlace")
		}},
		"restore-in-place-refused-by-verification": {"a snapshot refused by the verify Job stops nothing: RestoreFailed InvalidRestoreRequest, replicas kept, no restore", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "RestoreFailed", "True", "InvalidRestoreRequest")
			require.Contains(t, a.condition("RestoreFailed")["message"], "failed verification")
			require.Empty(t, a.jobs("demo-restore"))
			require.Nil(t, claimsDStatus(a, "restore"))
			require.Equal(t, "Running", a.phase())
			claimsDSteady(t, a)
		}},
		"restore-in-place-job": {"with every member stopped the restore Job runs, on the snapshot that latest resolved to, endpoint kept", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 0, a.replicas(t))
			require.Equal(t, []string{"demo-restore-169e47d773", "demo-restore-v169e47d773"}, a.jobs("demo-restore"))
			require.Equal(t, "Restoring", claimsDStatus(a, "restore", "phase"))
			require.Equal(t, "s3://etcd-backups/prod/latest?endpoint=https://minio.storage:9000", claimsDStatus(a, "restore", "source"))
			require.Equal(t, restoreSnap+"?endpoint=https://minio.storage:9000", claimsDStatus(a, "restore", "snapshot"))
			a.messageHas(t, "restore Job demo-restore-169e47d773")
		}},
		"restore-in-place-starting": {"after the restore Job pod 0 alone restarts on the restored data, the replaced members' reports ignored, and demo-1 may join", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 3, a.replicas(t))
			require.Equal(t, "Restored", claimsDStatus(a, "restore", "phase"))
			require.Equal(t, float64(4242), claimsDStatus(a, "restore", "revision"))
			require.Empty(t, a.jobs("demo-restore"), "the restore Jobs are released")
			a.conditionIs(t, "Available", "True", "QuorumHealthy")
			require.Contains(t, a.condition("Available")["message"], "1 of 1 voters", "only the restored member votes")
			in, ok := a.intent(1)
			require.True(t, ok)
			require.False(t, in.Join.IsZero(), "demo-1 may join")
			in, _ = a.intent(2)
			require.True(t, in.Join.IsZero(), "one join at a time")
			require.Equal(t, "Scaling", a.phase())
		}},
		"restore-in-place-failed": {"a restore Job that failed after the stop keeps the members stopped and says RestoreFailed, pointing at its log", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 0, a.replicas(t))
			a.conditionIs(t, "RestoreFailed", "True", api.ReasonRestoreFailed)
			require.Contains(t, a.condition("RestoreFailed")["message"], "kubectl logs job/demo-restore-1da1e70ebe")
			require.Equal(t, "Restoring", claimsDStatus(a, "restore", "phase"))
			require.Equal(t, []string{"demo-restore-1da1e70ebe", "demo-restore-v1da1e70ebe"}, a.jobs("demo-restore"), "the failed Job is kept for its log")
			a.conditionIs(t, "Progressing", "False", "Waiting")
		}},
		"restore-on-quorum-loss": {"restoreOnQuorumLoss: two of three members running without data start a verify Job of latest; nothing is stopped yet", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, []string{"demo-restore-v169e47d773"}, a.jobs("demo-restore"))
			require.Equal(t, "restore-on-quorum-loss", dig(a.children("Job")["demo-restore-v169e47d773"], "metadata", "annotations", api.AnnJobReason))
			require.Equal(t, "Verifying", claimsDStatus(a, "restore", "phase"))
			require.Equal(t, []any{"demo-1", "demo-2"}, claimsDStatus(a, "restore", "lostMembers"))
			require.Equal(t, "s3://etcd-backups/prod/latest?endpoint=https://minio.storage:9000", claimsDStatus(a, "restore", "source"))
			require.Equal(t, 3, a.replicas(t), "the members still running are not stopped before the verification")
			a.conditionIs(t, "QuorumLost", "True", "NoHealthyVoter")
		}},
		"restore-in-place-invalid": {"a restore-from value with a URL fragment is refused (RestoreFailed InvalidRestoreRequest), not echoed, and nothing changes", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "RestoreFailed", "True", "InvalidRestoreRequest")
			msg, _ := a.condition("RestoreFailed")["message"].(string)
			require.Contains(t, msg, "fragment")
			require.NotContains(t, msg, "snapshot.db#x", "the fragment is redacted")
			require.Empty(t, a.jobs("demo-restore"))
			require.Nil(t, claimsDStatus(a, "restore"))
			claimsDSteady(t, a)
		}},
		// ---- database size, quota and alarms ----
		"database-near-quota": {"members' sizes reach status.members, and 1.7 GiB of the default 2 GiB quota raises DatabaseNearQuota naming them", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, float64(1740<<20), claimsDStatus(a, "members", 0, "dbSize"))
			require.Equal(t, float64(300<<20), claimsDStatus(a, "members", 0, "dbSizeInUse"))
			a.conditionIs(t, "DatabaseNearQuota", "True", "NearQuota")
			msg := a.condition("DatabaseNearQuota")["message"]
			require.Contains(t, msg, "2.0 GiB quota")
			require.Contains(t, msg, "demo-2 1.7 GiB (84%")
			require.Nil(t, a.condition("DatabaseFull"))
			// 1.4 GiB of it free: the space pass gives it back, one member at a time.
			require.Len(t, claimsDDefrags(a), 1)
			for _, tok := range claimsDDefrags(a) {
				require.Equal(t, "space:70", tok)
			}
		}},
		"recovery-planned": {"Manual: two of three members lost for good; status.recovery plans demo-0 (revision 100) with its token, says what each holds and asks nothing of any member", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, api.RecoveryPlanned, claimsDStatus(a, "recovery", "phase"))
			require.Equal(t, "demo-0", claimsDStatus(a, "recovery", "survivor"))
			require.Equal(t, float64(100), claimsDStatus(a, "recovery", "revision"))
			require.Contains(t, claimsDStatus(a, "recovery", "token"), "@100")
			require.Equal(t, "no data (lost for good)", claimsDStatus(a, "recovery", "members", 1, "holds"))
			require.Contains(t, claimsDStatus(a, "recovery", "message"), "kubectl etcd recover NAME --apply")
			for i := 0; i < 3; i++ {
				in, _ := a.intent(i)
				require.Empty(t, in.Recover.Token, "nothing asked of demo-%d", i)
			}
		}},
		"recovery-fencing": {"FromSurvivor, five members, three lost: demo-4 (revision 130) survives; demo-1 (120) is fenced first, the survivor not asked yet", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, api.RecoveryFencing, claimsDStatus(a, "recovery", "phase"))
			require.Equal(t, "demo-4", claimsDStatus(a, "recovery", "survivor"))
			require.Contains(t, claimsDStatus(a, "recovery", "loses"), "(demo-4 is the freshest)")
			in1, _ := a.intent(1)
			require.Equal(t, api.RecoverFence, in1.Recover.Role)
			in4, _ := a.intent(4)
			require.Empty(t, in4.Recover.Token, "the survivor waits for the fence")
		}},
		"space-quota-raised": {"live data past 70% of a 32 MiB quota raises it to 64 MiB: the flag, the record, status.space; the spec's record keeps 32 MiB, and no defragmentation is asked", func(t *testing.T, a *fxAnswer) {
			require.Contains(t, a.etcdCommand(t), "--quota-backend-bytes=67108864")
			require.Equal(t, "67108864", a.configData(t)[api.ConfigKeySpaceQuota])
			require.Contains(t, a.configData(t)["spec.json"], `"quota-backend-bytes":"33554432"`)
			require.Equal(t, float64(64<<20), claimsDStatus(a, "space", "quotaBytes"))
			require.Equal(t, float64(32<<20), claimsDStatus(a, "space", "specQuotaBytes"))
			require.Contains(t, claimsDStatus(a, "space", "message"), "quota raised from 32.0 MiB to 64.0 MiB")
			require.Empty(t, claimsDDefrags(a))
		}},
		"space-at-max": {"the same data at maxQuota: the quota stays, status.space says why, no record is written", func(t *testing.T, a *fxAnswer) {
			require.Contains(t, a.etcdCommand(t), "--quota-backend-bytes=33554432")
			require.NotContains(t, a.configData(t), api.ConfigKeySpaceQuota)
			require.Contains(t, claimsDStatus(a, "space", "message"), "the quota is at spec.maintenance.space.maxQuota")
			require.Equal(t, float64(32<<20), claimsDStatus(a, "space", "quotaBytes"))
		}},
		"database-sizes-under-quota": {"the same 1.7 GiB under an 8 GiB quota-backend-bytes option raises no DatabaseNearQuota", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, float64(1740<<20), claimsDStatus(a, "members", 0, "dbSize"))
			require.Nil(t, a.condition("DatabaseNearQuota"))
			require.Contains(t, a.configData(t)["spec.json"], `"quota-backend-bytes":"8589934592"`)
		}},
		"database-full": {"NOSPACE from two members: DatabaseFull names them, a nospace defrag pass starts with a follower, members stay healthy voters", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "DatabaseFull", "True", "NoSpaceAlarm")
			require.Contains(t, a.condition("DatabaseFull")["message"], "raised by demo-0, demo-2")
			require.Equal(t, map[int]string{1: "nospace"}, claimsDDefrags(a))
			a.conditionIs(t, "Available", "True", "QuorumHealthy")
			a.conditionIs(t, "Degraded", "False", "AllMembersHealthy")
			require.Nil(t, a.condition("QuorumLost"))
			for i := 0; i < 3; i++ {
				require.Equal(t, true, claimsDStatus(a, "members", i, "healthy"))
			}
		}},
		"alarm-unknown-member": {"a NOSPACE alarm of a member no longer listed is named by its ID, and a follower is asked to clear it", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "DatabaseFull", "True", "NoSpaceAlarm")
			require.Contains(t, a.condition("DatabaseFull")["message"], "raised by 1234567890abcdef")
			require.Equal(t, map[int]string{1: "nospace"}, claimsDDefrags(a))
			claimsDSteady(t, a)
		}},
		"invalid-quota-option": {"quota-backend-bytes \"8Gi\" is InvalidSpec InvalidOption and the ConfigMap keeps the last valid options", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "InvalidOption")
			require.Contains(t, a.condition("InvalidSpec")["message"], `"quota-backend-bytes": "8Gi"`)
			require.NotContains(t, a.configData(t)["spec.json"], "8Gi")
			claimsDSteady(t, a)
		}},
		// ---- network ----
		"network-client-from": {"spec.network.clientFrom peers may reach the client port and the metrics namespace the metrics port", func(t *testing.T, a *fxAnswer) {
			np := a.child(t, "NetworkPolicy", "demo")
			client, _ := dig(np, "spec", "ingress", 1, "from").([]any)
			require.Contains(t, client, map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app": "api"}}})
			require.Contains(t, client, map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"etcd-client": "true"}}})
			require.NotContains(t, client, map[string]any{"podSelector": map[string]any{}}, "not the default: every pod of the namespace")
			require.Equal(t, []any{map[string]any{"port": float64(2379), "protocol": "TCP"}}, dig(np, "spec", "ingress", 1, "ports"))
			require.Equal(t, "observability", dig(np, "spec", "ingress", 2, "from", 0, "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name"))
			require.Equal(t, float64(2381), dig(np, "spec", "ingress", 2, "ports", 0, "port"))
		}},
		"network-policy-off": {"spec.network.policy false releases the NetworkPolicy without a warning condition", func(t *testing.T, a *fxAnswer) {
			require.Empty(t, a.children("NetworkPolicy"))
			require.Nil(t, a.condition("NetworkPolicyMissing"))
			claimsDSteady(t, a)
		}},
		"network-invalid": {"an invalid spec.network is InvalidSpec InvalidNetwork naming each fault, and the NetworkPolicy keeps the last valid peers", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "InvalidNetwork")
			msg := a.condition("InvalidSpec")["message"]
			for _, p := range []string{"clientFrom[0].podSelector", "clientFrom[1].ipBlock.except[0]", "clientFrom[2]", `metricsNamespace "Monitoring"`} {
				require.Contains(t, msg, p)
			}
			np := a.child(t, "NetworkPolicy", "demo")
			require.Equal(t, map[string]any{"podSelector": map[string]any{}}, dig(np, "spec", "ingress", 1, "from", 1))
			require.Equal(t, "monitoring", dig(np, "spec", "ingress", 2, "from", 0, "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name"))
		}},
		"network-policy-not-registered": {"policy on but networkpolicies not registered: no NetworkPolicy answered, NetworkPolicyMissing says the ports are open", func(t *testing.T, a *fxAnswer) {
			require.Empty(t, a.children("NetworkPolicy"))
			a.conditionIs(t, "NetworkPolicyMissing", "True", "NotRegistered")
			require.Contains(t, a.condition("NetworkPolicyMissing")["message"], "open to every pod")
		}},
		// ---- defragmentation ----
		"defrag-follower-first": {"a due scheduled pass asks only the first follower at least half free (demo-1), on its Lease", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, map[int]string{1: "schedule:2026-01-01T03:00:00Z"}, claimsDDefrags(a))
			a.conditionIs(t, "Defragmenting", "True", "MemberDefragmenting")
			require.Contains(t, a.condition("Defragmenting")["message"], "0 done, 3 to go")
			require.Equal(t, "leader", claimsDStatus(a, "members", 0, "role"))
		}},
		"defrag-leader-last": {"with both followers done the pass asks the leader (demo-0), last", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, map[int]string{0: "schedule:2026-01-01T03:00:00Z"}, claimsDDefrags(a))
			require.Equal(t, "leader", claimsDStatus(a, "members", 0, "role"))
			require.Contains(t, a.condition("Defragmenting")["message"], "2 done, 1 to go")
		}},
		"defrag-held-unhealthy": {"with a member down the due pass asks nobody and Defragmenting is False Held naming the member", func(t *testing.T, a *fxAnswer) {
			require.Empty(t, claimsDDefrags(a))
			a.conditionIs(t, "Defragmenting", "False", "Held")
			require.Contains(t, a.condition("Defragmenting")["message"], "demo-2 to be healthy")
		}},
		"defrag-running-keeps-turn": {"a member defragmenting keeps its turn; a scale-up asked meanwhile waits for it and the cluster is not Degraded", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, map[int]string{1: "schedule:2026-01-01T03:00:00Z"}, claimsDDefrags(a))
			require.Equal(t, 5, a.replicas(t))
			for _, i := range []int{3, 4} {
				in, ok := a.intent(i)
				require.True(t, ok)
				require.True(t, in.Join.IsZero(), "demo-%d may not join beside a defragmentation", i)
			}
			a.conditionIs(t, "Progressing", "False", "Waiting")
			a.messageHas(t, "demo-1 to finish defragmenting before demo-3 joins")
			a.conditionIs(t, "Degraded", "False", "AllMembersHealthy")
		}},
		// The build sets 900 MiB in use but no agent reports it before the request (db-size is empty on
		// every Lease): what this fixture shows is a member of unknown size being skipped.
		"defrag-below-threshold": {"a due scheduled pass asks no member whose file is mostly in use (1 GiB, 900 MiB used): no Defragmenting", func(t *testing.T, a *fxAnswer) {
			require.Empty(t, claimsDDefrags(a))
			require.Nil(t, a.condition("Defragmenting"))
			require.EqualValues(t, 1<<30, claimsDStatus(a, "members", 1, "dbSize"), "the size is reported: the threshold, not ignorance, holds the pass")
			require.EqualValues(t, 900<<20, claimsDStatus(a, "members", 1, "dbSizeInUse"))
		}},
		"defrag-now": {"etcd.io/defrag-now starts a pass without a schedule whatever the free space: a follower (demo-1) first", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, map[int]string{1: "now:before-upgrade"}, claimsDDefrags(a))
			a.conditionIs(t, "Defragmenting", "True", "MemberDefragmenting")
			require.Contains(t, a.condition("Defragmenting")["message"], "3 to go")
		}},
		"defrag-invalid": {"a defrag schedule with a TZ prefix and minFreePercent 0 are InvalidSpec InvalidDefrag; no pass is started", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "InvalidDefrag")
			msg := a.condition("InvalidSpec")["message"]
			require.Contains(t, msg, "time zone prefix")
			require.Contains(t, msg, "minFreePercent 0")
			require.Empty(t, claimsDDefrags(a))
			require.NotContains(t, a.configData(t)["spec.json"], "defrag")
			claimsDSteady(t, a)
		}},
		// ---- refused requests ----
		"error-malformed-json": {"a body that is not JSON is refused with 400", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 400, a.code)
			require.Nil(t, a.resp)
		}},
		"error-wrong-kind":             {"a parent that is not an etcd.io EtcdCluster is refused with 422", claimsDRefused("error-wrong-kind", 422, "apps/v1 Deployment", "want "+api.APIVersion)},
		"error-missing-uid":            {"a parent without metadata.uid is refused with 422", claimsDRefused("error-missing-uid", 422, "name, namespace and uid")},
		"error-undeclared-child-type":  {"children of a type the hook does not declare (Secret) are refused with 422", claimsDRefused("error-undeclared-child-type", 422, "undeclared types [Secret.v1]")},
		"error-child-wrong-namespace":  {"a child in another namespace than the parent is refused with 422", claimsDRefused("error-child-wrong-namespace", 422, `in namespace "other"`)},
		"error-children-absent":        {"a request with no children map at all is refused with 422 rather than answered as empty", claimsDRefused("error-children-absent", 422, fmt.Sprintf("children group %s is absent", wire.KeyStatefulSet))},
		"error-child-group-absent":     {"one declared children group (Leases) absent is refused with 422: an answer would delete its objects", claimsDRefused("error-child-group-absent", 422, fmt.Sprintf("children group %s is absent", wire.KeyLease), "delete its objects")},
		"error-finalizing-live-parent": {"finalizing about a parent without deletionTimestamp is refused with 422, not released", claimsDRefused("error-finalizing-live-parent", 422, "no metadata.deletionTimestamp")},
	})
}
