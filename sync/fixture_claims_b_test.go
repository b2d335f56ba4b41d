package sync

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// Claims for the options, pause, certificate renewal, CA rotation, volume growth and user TLS Secret
// fixtures.

// claimsBNewCA is the CA the world's agents make for a rotation of mark from worldCA (carotation_test.go).
func claimsBNewCA(mark string) string {
	h := sha256.Sum256([]byte("ca " + mark + " " + worldCA))
	return hex.EncodeToString(h[:])
}

// claimsBNothingCreated: the answer holds no child at all.
func claimsBNothingCreated(t *testing.T, a *fxAnswer) {
	t.Helper()
	cs, _ := a.resp["children"].([]any)
	require.Empty(t, cs, "no child is created")
}

// claimsBTLS is status.tls's field at path.
func claimsBTLS(a *fxAnswer, path ...any) any {
	return dig(a.resp, append([]any{"status", "tls"}, path...)...)
}

// claimsBEtcdCommand is the StatefulSet's etcd container command.
func claimsBEtcdCommand(t *testing.T, a *fxAnswer) []string {
	t.Helper()
	cs, _ := dig(a.child(t, "StatefulSet", ""), "spec", "template", "spec", "containers").([]any)
	for _, c := range cs {
		if m, _ := c.(map[string]any); m["name"] == "etcd" {
			return strs(m["command"])
		}
	}
	require.Fail(t, "no etcd container")
	return nil
}

// claimsBConfigJSON is the JSON document the ConfigMap holds under key, failing when it does not parse.
func claimsBConfigJSON(t *testing.T, a *fxAnswer, key string) map[string]any {
	t.Helper()
	s, _ := a.configData(t)[key].(string)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m))
	return m
}

// claimsBSpec is the applied spec the ConfigMap records (spec.json).
func claimsBSpec(t *testing.T, a *fxAnswer) map[string]any {
	t.Helper()
	return claimsBConfigJSON(t, a, api.ConfigKeySpec)
}

// claimsBAgentTLS is agent.json's tls section.
func claimsBAgentTLS(t *testing.T, a *fxAnswer) map[string]any {
	t.Helper()
	tls, _ := claimsBConfigJSON(t, a, api.ConfigKeyAgent)["tls"].(map[string]any)
	return tls
}

// claimsBSecretVolumes maps the pod template's Secret volumes to their Secret names.
func claimsBSecretVolumes(t *testing.T, a *fxAnswer) map[string]any {
	t.Helper()
	out := map[string]any{}
	vs, _ := dig(a.child(t, "StatefulSet", ""), "spec", "template", "spec", "volumes").([]any)
	for _, v := range vs {
		if sn := dig(v, "secret", "secretName"); sn != nil {
			out[dig(v, "name").(string)] = sn
		}
	}
	return out
}

// claimsBClaimTemplateSize is the StatefulSet's data claim template's storage request.
func claimsBClaimTemplateSize(t *testing.T, a *fxAnswer) any {
	t.Helper()
	return dig(a.child(t, "StatefulSet", ""), "spec", "volumeClaimTemplates", 0, "spec", "resources", "requests", "storage")
}

// claimsBJobCommand is the command of the answered Job named name.
func claimsBJobCommand(t *testing.T, a *fxAnswer, name string) []string {
	t.Helper()
	j := a.children("Job")[name]
	require.NotNil(t, j, "Job %s", name)
	return strs(dig(j, "spec", "template", "spec", "containers", 0, "command"))
}

// claimsBMembers asserts members 0..n-1 have a Lease asking them to stay members, and no member n.
func claimsBMembers(t *testing.T, a *fxAnswer, n int) []api.Intent {
	t.Helper()
	var out []api.Intent
	for i := 0; i < n; i++ {
		in, ok := a.intent(i)
		require.True(t, ok, "member %d's Lease", i)
		require.Equal(t, api.IntentMember, in.Kind, "member %d", i)
		out = append(out, in)
	}
	_, ok := a.intent(n)
	require.False(t, ok, "no member %d", n)
	return out
}

// claimsBNoRoll: the StatefulSet releases every pod to its template and no roll is recorded.
func claimsBNoRoll(t *testing.T, a *fxAnswer) {
	t.Helper()
	require.Equal(t, 0, a.partition(t))
	require.Equal(t, "", a.configData(t)[api.ConfigKeyRollingTo])
}

// claimsBCondMessageHas asserts condition typ's message mentions every part.
func claimsBCondMessageHas(t *testing.T, a *fxAnswer, typ string, parts ...string) {
	t.Helper()
	c := a.condition(typ)
	require.NotNil(t, c, "condition %s", typ)
	for _, p := range parts {
		require.Contains(t, c["message"], p, "condition %s", typ)
	}
}

// claimsBSecretUnusable: a new cluster whose user TLS Secret is unusable creates nothing and says why.
func claimsBSecretUnusable(parts ...string) func(t *testing.T, a *fxAnswer) {
	return func(t *testing.T, a *fxAnswer) {
		claimsBNothingCreated(t, a)
		require.Equal(t, "Failed", a.phase())
		a.conditionIs(t, "CertificatesInvalid", "True", "SecretUnusable")
		claimsBCondMessageHas(t, a, "CertificatesInvalid", parts...)
		a.messageHas(t, "nothing is created")
	}
}

func init() {
	caMark := api.RenewalMark("ca-2027")
	addClaims(map[string]fixtureClaim{
		"unsafe-option-allowed": {"an unsafe etcd option with spec.allowUnsafeOptions is accepted and rolled onto the members as an etcd flag", func(t *testing.T, a *fxAnswer) {
			require.Nil(t, a.condition("InvalidSpec"))
			require.Contains(t, claimsBEtcdCommand(t, a), "--unsafe-no-fsync=true")
			require.Equal(t, map[string]any{"unsafe-no-fsync": "true"}, claimsBSpec(t, a)["options"])
			require.Equal(t, "Upgrading", a.phase())
			require.Equal(t, 3, a.partition(t), "the roll restarts one pod at a time, none yet")
		}},
		"invalid-name-peer-suffix": {"a cluster named *-peer (its client Service would clash with a peer Service) fails and creates nothing", func(t *testing.T, a *fxAnswer) {
			claimsBNothingCreated(t, a)
			require.Equal(t, "Failed", a.phase())
			a.conditionIs(t, "InvalidSpec", "True", "InvalidName")
			claimsBCondMessageHas(t, a, "InvalidSpec", `"demo-peer"`, "-peer")
		}},
		"invalid-spec-does-not-decode": {"a spec the hook's types cannot decode is answered (not refused): the running cluster keeps its children and says InvalidSpec", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 200, a.code)
			a.conditionIs(t, "InvalidSpec", "True", "SpecDoesNotDecode")
			claimsBCondMessageHas(t, a, "InvalidSpec", "quantities", "children keep the last valid spec")
			require.Equal(t, "Running", a.phase())
			require.Equal(t, 3, a.replicas(t))
			claimsBNoRoll(t, a)
			require.Nil(t, claimsBSpec(t, a)["resources"], "the applied spec is the last valid one")
			claimsBMembers(t, a, 3)
		}},
		"invalid-managed-option": {"spec.options setting flags etcdhook manages is InvalidSpec, every one listed; the running cluster keeps its last valid spec", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "ManagedOption")
			claimsBCondMessageHas(t, a, "InvalidSpec", `"data-dir"`, `"initial-cluster-state"`)
			require.Equal(t, "Running", a.phase())
			require.Nil(t, claimsBSpec(t, a)["options"])
			require.NotContains(t, claimsBEtcdCommand(t, a), "--data-dir=/tmp")
			claimsBNoRoll(t, a)
		}},
		"paused-running": {"a paused running cluster reports phase Paused and Progressing Waiting, its children stay as they are, and it is asked again at the idle pace (it waits for a human, not for time)", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "Paused", a.phase())
			require.EqualValues(t, 60, a.resp["resyncAfterSeconds"])
			a.conditionIs(t, "Paused", "True", "SpecPaused")
			a.conditionIs(t, "Progressing", "False", "Waiting")
			require.Equal(t, 3, a.replicas(t))
			claimsBNoRoll(t, a)
			claimsBMembers(t, a, 3)
		}},
		"paused-scale-held": {"a size change made while paused waits: replicas and the applied spec stay at 3, no member 3, Progressing SpecPending", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "Paused", a.phase())
			a.conditionIs(t, "Progressing", "True", "SpecPending")
			require.Equal(t, 3, a.replicas(t))
			require.Equal(t, float64(3), claimsBSpec(t, a)["size"])
			claimsBMembers(t, a, 3)
		}},
		"paused-new-cluster": {"a cluster created paused creates nothing until unpaused", func(t *testing.T, a *fxAnswer) {
			claimsBNothingCreated(t, a)
			require.Equal(t, "Paused", a.phase())
			a.conditionIs(t, "Paused", "True", "SpecPaused")
			a.messageHas(t, "nothing is created")
		}},
		"paused-template-changed": {"while paused, a StatefulSet from an earlier release gets its new template with partition at replicas: no pod restarts", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "Paused", a.phase())
			require.Equal(t, 3, a.replicas(t))
			require.Equal(t, 3, a.partition(t))
			require.Equal(t, "", a.configData(t)[api.ConfigKeyRollingTo], "no roll is started")
		}},
		"tls-renew-certificates-asked": {"etcd.io/renew-certificates asks every member's Lease for the request's renewal mark; status counts 0 of 3 renewed", func(t *testing.T, a *fxAnswer) {
			for i, in := range claimsBMembers(t, a, 3) {
				require.Equal(t, api.RenewalMark("suspected-leak-2026-01-01"), in.Renewal, "member %d", i)
			}
			require.Equal(t, "suspected-leak-2026-01-01", claimsBTLS(a, "renewal", "request"))
			require.Equal(t, float64(0), claimsBTLS(a, "renewal", "renewed"))
			require.Equal(t, float64(3), claimsBTLS(a, "renewal", "members"))
			claimsBNoRoll(t, a)
		}},
		"tls-renew-certificates-served": {"once every member reports the renewal mark, status counts 3 of 3 renewed, without any restart by the hook", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, float64(3), claimsBTLS(a, "renewal", "renewed"))
			require.Equal(t, float64(3), claimsBTLS(a, "renewal", "members"))
			require.Equal(t, "Running", a.phase())
			a.conditionIs(t, "Progressing", "False", "Stable")
			claimsBNoRoll(t, a)
		}},
		"ca-rotation-asked": {"etcd.io/rotate-ca asks every member to trust a new CA (phase AddingCA) and restarts none until the CA exists", func(t *testing.T, a *fxAnswer) {
			for i, in := range claimsBMembers(t, a, 3) {
				require.Equal(t, api.CARotationIntent{Mark: caMark, Phase: api.CAPhaseTrust}, in.CARotation, "member %d", i)
				require.Empty(t, in.CARestart, "member %d", i)
			}
			require.Equal(t, api.CARotationAddingCA, claimsBTLS(a, "caRotation", "phase"))
			require.Equal(t, []any{worldCA}, claimsBTLS(a, "caFingerprints"))
			a.conditionIs(t, "Progressing", "True", "CARotation")
		}},
		"ca-rotation-first-restart": {"once the new CA is in the Secret, one follower at a time is asked to restart trusting the old and the new CA", func(t *testing.T, a *fxAnswer) {
			in1, _ := a.intent(1)
			require.Equal(t, worldCA+","+claimsBNewCA(caMark), in1.CARestart)
			for _, i := range []int{0, 2} {
				in, ok := a.intent(i)
				require.True(t, ok)
				require.Empty(t, in.CARestart, "member %d is not restarted at the same time", i)
			}
			require.NotEqual(t, "demo-1", dig(a.resp, "status", "leader"), "the restarted member is a follower")
			require.Equal(t, "demo-1", claimsBTLS(a, "caRotation", "restarting"))
			require.Equal(t, api.CARotationAddingCA, claimsBTLS(a, "caRotation", "phase"))
		}},
		"ca-rotation-drop-asked": {"once every member trusts both CAs and holds certificates from the new one, every Lease asks to drop the old CA", func(t *testing.T, a *fxAnswer) {
			for i, in := range claimsBMembers(t, a, 3) {
				require.Equal(t, api.CARotationIntent{Mark: caMark, Phase: api.CAPhaseDrop}, in.CARotation, "member %d", i)
				require.Empty(t, in.CARestart, "member %d", i)
			}
			require.Equal(t, api.CARotationDroppingCA, claimsBTLS(a, "caRotation", "phase"))
			require.Equal(t, float64(3), claimsBTLS(a, "caRotation", "issued"))
			require.Equal(t, float64(3), claimsBTLS(a, "caRotation", "trusting"))
		}},
		"ca-rotation-restart-held-member-down": {"a CA rotation restarts no member while another member is down: it waits for that member to be healthy", func(t *testing.T, a *fxAnswer) {
			for i, in := range claimsBMembers(t, a, 3) {
				require.Empty(t, in.CARestart, "member %d", i)
				require.Equal(t, api.CAPhaseTrust, in.CARotation.Phase, "member %d", i)
			}
			require.Equal(t, api.CARotationAddingCA, claimsBTLS(a, "caRotation", "phase"))
			require.Contains(t, claimsBTLS(a, "caRotation", "waiting"), "demo-2 to be healthy")
			require.Less(t, claimsBTLS(a, "caRotation", "trusting"), float64(3))
			require.Equal(t, "Degraded", a.phase())
		}},
		"ca-rotation-done": {"a finished CA rotation leaves the members trusting only the new CA and clears the rotation from every Lease", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, api.CARotationDone, claimsBTLS(a, "caRotation", "phase"))
			require.Equal(t, []any{claimsBNewCA(caMark)}, claimsBTLS(a, "caFingerprints"))
			for i, in := range claimsBMembers(t, a, 3) {
				require.Equal(t, api.CARotationIntent{}, in.CARotation, "member %d", i)
				require.Empty(t, in.CARestart, "member %d", i)
			}
			a.conditionIs(t, "Progressing", "False", "Stable")
		}},
		"restore-in-place-record-retires-live-cluster": {"an in-place restore record retiring the cluster healthy voters report is ignored (InputIgnored) and its retired list dropped", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InputIgnored", "True", "ImpossibleInput")
			claimsBCondMessageHas(t, a, "InputIgnored", "not retired")
			var rec facts.InPlaceRecord
			s, _ := a.configData(t)[api.ConfigKeyRestoreInPlace].(string)
			require.NoError(t, json.Unmarshal([]byte(s), &rec))
			require.Empty(t, rec.Retired)
			require.Equal(t, "s3://b/x.db", rec.Request)
			require.Equal(t, "Running", a.phase())
			claimsBMembers(t, a, 3)
			require.Empty(t, a.jobs(""), "no restore or remove Job")
		}},
		"volume-grow-first-claim": {"a larger spec.storage.size grows one claim at a time by a Job, ordinal 0 first; the claim template stays until all grew", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, []string{"demo-grow-0-1"}, a.jobs(""))
			cmd := claimsBJobCommand(t, a, "demo-grow-0-1")
			require.Contains(t, cmd, "--claim=data-demo-0")
			require.Contains(t, cmd, "--size=20Gi")
			require.Equal(t, "data-demo-0", dig(a.resp, "status", "storage", "growing"))
			require.Equal(t, "10Gi", claimsBClaimTemplateSize(t, a))
			a.conditionIs(t, "Progressing", "True", "VolumeGrowth")
		}},
		"volume-grow-down-member-first": {"volume growth starts with a member that is down (ordinal 1), not ordinal 0: it restarts nothing healthy", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, []string{"demo-grow-1-1"}, a.jobs(""))
			require.Contains(t, claimsBJobCommand(t, a, "demo-grow-1-1"), "--claim=data-demo-1")
			require.Equal(t, "data-demo-1", dig(a.resp, "status", "storage", "growing"))
		}},
		"volume-grow-job-failed-backoff": {"a failed grow Job is kept and not retried before its backoff ends; status says when it retries", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, []string{"demo-grow-0-1"}, a.jobs(""), "the failed Job is kept, no second attempt yet")
			a.conditionIs(t, "Progressing", "False", "Waiting")
			a.messageHas(t, "demo-grow-0-1 failed", "retrying after")
			require.Nil(t, dig(a.resp, "status", "storage", "growing"))
		}},
		"volume-grow-job-refused": {"a grow Job the API refused (exit 3, failed by its pod failure policy) is terminal: no second attempt after any backoff, and the status says so", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, []string{"demo-grow-0-1"}, a.jobs(""), "one attempt, kept for its log")
			a.messageHas(t, "demo-grow-0-1 was refused", "not retried; delete the Job to try again")
		}},
		"volume-grow-template-recreate": {"once every claim has grown, a Job re-creates the StatefulSet for its claim template, which the hook cannot patch", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, []string{"demo-vct-1"}, a.jobs(""))
			require.Equal(t, "claim-template", dig(a.children("Job")["demo-vct-1"], "metadata", "annotations", api.AnnJobReason))
			require.Equal(t, float64(3), dig(a.resp, "status", "storage", "atSize"))
			require.Equal(t, "10Gi", claimsBClaimTemplateSize(t, a), "the answered template is unchanged: the Job replaces it")
		}},
		"volume-shrink-refused": {"a smaller spec.storage.size is InvalidSpec StorageShrink: no Job, the claims and template keep their size", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "StorageShrink")
			require.Empty(t, a.jobs(""))
			require.Equal(t, "10Gi", claimsBClaimTemplateSize(t, a))
			require.Equal(t, "10Gi", dig(claimsBSpec(t, a), "storage", "size"))
			require.Equal(t, "Running", a.phase())
		}},
		"statefulset-orphaned-by-hand": {"a StatefulSet deleted with its pods orphaned is re-created with partition at replicas and rolls the adopted pods one by one", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 3, a.replicas(t))
			require.Equal(t, 3, a.partition(t))
			hash := dig(a.child(t, "StatefulSet", ""), "metadata", "annotations", api.AnnTemplateHash)
			require.Equal(t, hash, a.configData(t)[api.ConfigKeyRollingTo])
			require.Equal(t, "Upgrading", a.phase())
			require.Equal(t, float64(1), dig(a.resp, "status", "observedGeneration"), "no spec change asked for the roll")
			require.Nil(t, a.condition("CertificatesInvalid"))
			a.messageHas(t, "demo-2 to run the new revision")
			claimsBMembers(t, a, 3)
		}},
		"tls-user-secrets-new-cluster": {"user TLS Secrets are mounted into the pods, the agent reads them there, and members get no access to Secrets", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, map[string]any{"peer-secret": "etcd-peer", "client-secret": "etcd-client"}, claimsBSecretVolumes(t, a))
			tls := claimsBAgentTLS(t, a)
			require.NotEmpty(t, tls["peerSource"])
			require.NotEmpty(t, tls["clientSource"])
			require.Equal(t, "", tls["caSecret"], "no built-in CA")
			rules, _ := a.child(t, "Role", "-member")["rules"].([]any)
			for _, r := range rules {
				require.NotContains(t, strs(dig(r, "resources")), "secrets")
			}
			in, ok := a.intent(0)
			require.True(t, ok)
			require.Equal(t, 3, in.Static, "created statically")
			require.Equal(t, 3, a.replicas(t))
		}},
		"tls-user-secrets-running": {"a cluster on usable user TLS Secrets settles Running with them mounted and no certificate condition", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "Running", a.phase())
			require.Nil(t, a.condition("CertificatesInvalid"))
			require.Equal(t, map[string]any{"peer-secret": "etcd-peer", "client-secret": "etcd-client"}, claimsBSecretVolumes(t, a))
			claimsBNoRoll(t, a)
			claimsBMembers(t, a, 3)
		}},
		"tls-secret-missing":                {"a new cluster naming a TLS Secret that does not exist creates nothing and says which Secret is not found", claimsBSecretUnusable("Secret etcd-client", "not found")},
		"tls-secret-names-not-covered":      {"a client certificate must cover every member's host: one that does not creates nothing and lists the hosts missing", claimsBSecretUnusable("Secret etcd-client", "does not cover", `"demo-1.demo-peer.prod.svc"`, `"demo-2.demo-peer.prod.svc"`)},
		"tls-secret-peer-wildcard-svc-only": {"a peer certificate with only a *.<peer>.<ns>.svc wildcard, which etcd's peer DNS check refuses, creates nothing", claimsBSecretUnusable("Secret etcd-peer", "wildcard", "*.demo-peer.prod.svc.cluster.local")},
		"tls-secret-expired-running": {"a user TLS Secret expiring under a running cluster is reported, and the members keep running on what they have", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "CertificatesInvalid", "True", "SecretUnusable")
			claimsBCondMessageHas(t, a, "CertificatesInvalid", "Secret etcd-client", "expired", "keep using")
			require.Equal(t, "Running", a.phase())
			require.Equal(t, 3, a.replicas(t))
			claimsBNoRoll(t, a)
			claimsBMembers(t, a, 3)
		}},
		"tls-secret-expired-scale-held": {"a scale-up asked while a user TLS Secret is expired is held: replicas and the applied spec stay at 3", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "CertificatesInvalid", "True", "SecretUnusable")
			claimsBCondMessageHas(t, a, "CertificatesInvalid", "expired", "children keep the last valid spec")
			require.Equal(t, 3, a.replicas(t))
			require.Equal(t, float64(3), claimsBSpec(t, a)["size"])
			claimsBMembers(t, a, 3)
		}},
		"tls-secret-expired-roll-held": {"a roll restarts no healthy member while a user TLS Secret it would start on is expired: partition stays at replicas", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 3, a.replicas(t))
			require.Equal(t, 3, a.partition(t))
			a.conditionIs(t, "Progressing", "True", "RollingUpdate")
			a.messageHas(t, "usable TLS Secrets before restarting demo-2")
			a.conditionIs(t, "CertificatesInvalid", "True", "SecretUnusable")
		}},
		"tls-members-trust-different-cas": {"members reporting different trusted CAs raise CertificatesInvalid CAMismatch naming the odd member; nothing is rotated", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "CertificatesInvalid", "True", "CAMismatch")
			claimsBCondMessageHas(t, a, "CertificatesInvalid", "demo-2 trust 9d0c5e7f")
			fps, _ := claimsBTLS(a, "caFingerprints").([]any)
			require.Len(t, fps, 2)
			for i, in := range claimsBMembers(t, a, 3) {
				require.Equal(t, api.CARotationIntent{}, in.CARotation, "member %d", i)
				require.Empty(t, in.CARestart, "member %d", i)
			}
			claimsBNoRoll(t, a)
		}},
		"tls-secret-change-refused": {"naming a user TLS Secret on a running built-in-TLS cluster is InvalidSpec TLSSecretChange: nothing mounts it", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "TLSSecretChange")
			require.Empty(t, claimsBSecretVolumes(t, a))
			require.Nil(t, dig(claimsBSpec(t, a), "security", "tls", "client", "secretName"))
			claimsBNoRoll(t, a)
			require.Equal(t, "Running", a.phase())
		}},
		"tls-certificates-expiring": {"a member certificate expiring within weeks raises CertificatesExpiring with its date, in status.tls too", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "CertificatesExpiring", "True", "ExpiresSoon")
			claimsBCondMessageHas(t, a, "CertificatesExpiring", "2026-01-11T12:00:00Z")
			require.Equal(t, "2026-01-11T12:00:00Z", claimsBTLS(a, "certNotAfter"))
			require.Equal(t, "Running", a.phase())
		}},
	})
}
