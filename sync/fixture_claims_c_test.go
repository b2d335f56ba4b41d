package sync

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

// Claims of the TLS switch, invalid-spec, hook-shape, finalize, customize, bench and backup fixtures.

// claimsCswitch is status.tls.switch (nil when no switch runs).
func claimsCswitch(a *fxAnswer) map[string]any {
	m, _ := dig(a.resp, "status", "tls", "switch").(map[string]any)
	return m
}

// claimsCswitchIs asserts the switch's phase, direction and number of members switched.
func claimsCswitchIs(t *testing.T, a *fxAnswer, phase, to string, switched int) {
	t.Helper()
	s := claimsCswitch(a)
	require.NotNil(t, s, "status.tls.switch")
	require.Equal(t, phase, s["phase"], "switch %v", s)
	require.Equal(t, to, s["to"], "switch %v", s)
	require.Equal(t, switched, num(s["switched"]), "switch %v", s)
}

// claimsCstsAnn is an annotation of the StatefulSet (nil when absent).
func claimsCstsAnn(t *testing.T, a *fxAnswer, key string) any {
	t.Helper()
	return dig(a.child(t, "StatefulSet", ""), "metadata", "annotations", key)
}

// claimsCnoArgWith asserts no argument of the etcd command starts with prefix.
func claimsCnoArgWith(t *testing.T, a *fxAnswer, prefix string) {
	t.Helper()
	for _, arg := range a.etcdCommand(t) {
		require.False(t, strings.HasPrefix(arg, prefix), "unexpected %s", arg)
	}
}

// claimsCvolumes are the pod template's volume names.
func claimsCvolumes(t *testing.T, a *fxAnswer) []string {
	t.Helper()
	var out []string
	vs, _ := dig(a.child(t, "StatefulSet", ""), "spec", "template", "spec", "volumes").([]any)
	for _, v := range vs {
		n, _ := dig(v, "name").(string)
		out = append(out, n)
	}
	return out
}

// claimsCpeerSchemes are the peer schemes asked of members 0..n-1 ("" none).
func claimsCpeerSchemes(t *testing.T, a *fxAnswer, n int) []string {
	t.Helper()
	var out []string
	for i := range n {
		in, ok := a.intent(i)
		require.True(t, ok, "Lease of member %d", i)
		out = append(out, in.PeerScheme)
	}
	return out
}

// claimsCmember is status.members' entry named name.
func claimsCmember(t *testing.T, a *fxAnswer, name string) map[string]any {
	t.Helper()
	ms, _ := a.status()["members"].([]any)
	for _, m := range ms {
		if mm, _ := m.(map[string]any); mm["name"] == name {
			return mm
		}
	}
	require.Fail(t, "no member "+name)
	return nil
}

// claimsCbackup is status.backup (nil when absent).
func claimsCbackup(a *fxAnswer) map[string]any {
	m, _ := a.status()["backup"].(map[string]any)
	return m
}

// claimsCjobCmd is the command of a Job's or CronJob's container.
func claimsCjobCmd(job map[string]any) []string {
	if dig(job, "kind") == "CronJob" {
		return strs(dig(job, "spec", "jobTemplate", "spec", "template", "spec", "containers", 0, "command"))
	}
	return strs(dig(job, "spec", "template", "spec", "containers", 0, "command"))
}

// claimsCnoBackupChildren asserts nothing of backups is rendered.
func claimsCnoBackupChildren(t *testing.T, a *fxAnswer) {
	t.Helper()
	require.Empty(t, a.children("CronJob"))
	require.Empty(t, a.jobs("backup"))
	require.NotContains(t, a.children("ServiceAccount"), "demo-backup")
	require.NotContains(t, a.children("Lease"), "demo-backup")
}

// claimsCrelated is customize's relatedResources by resource.
func claimsCrelated(a *fxAnswer) map[string]map[string]any {
	out := map[string]map[string]any{}
	rs, _ := a.resp["relatedResources"].([]any)
	for _, r := range rs {
		m, _ := r.(map[string]any)
		res, _ := m["resource"].(string)
		out[res] = m
	}
	return out
}

// claimsCrelatesPodsAndClaims asserts pods and claims are related by the cluster's labels.
func claimsCrelatesPodsAndClaims(t *testing.T, rel map[string]map[string]any) {
	t.Helper()
	for _, res := range []string{"pods", "persistentvolumeclaims"} {
		require.Contains(t, rel, res)
		require.Equal(t, "demo", dig(rel[res], "labelSelector", "matchLabels", "app.kubernetes.io/instance"), "%s", res)
		require.Equal(t, "etcd", dig(rel[res], "labelSelector", "matchLabels", "app.kubernetes.io/component"), "%s", res)
	}
}

// claimsCtransitionRoll asserts a TLS switch's first roll: the StatefulSet carries the transition
// template from the scheme the members are on (peers still there, clients on both schemes), rolled from
// partition 3, and status.tls.switch is rolling in towards to with nobody switched yet.
func claimsCtransitionRoll(t *testing.T, a *fxAnswer, from, peerFlag, to string) {
	t.Helper()
	require.Equal(t, "transition "+from, claimsCstsAnn(t, a, api.AnnTLSSwitch))
	cmd := a.etcdCommand(t)
	require.Contains(t, cmd, "--tls-transition="+from)
	require.Contains(t, cmd, peerFlag)
	require.Contains(t, cmd, claimsCtransitionClients)
	require.Equal(t, 3, a.partition(t))
	claimsCswitchIs(t, a, api.TLSSwitchRollingIn, to, 0)
}

// claimsCnoSwitch asserts no TLS switch started: the template has no switch annotation, serves clients
// as clientFlag says, no transition flag, and status has no switch.
func claimsCnoSwitch(t *testing.T, a *fxAnswer, clientFlag string) {
	t.Helper()
	require.Nil(t, claimsCstsAnn(t, a, api.AnnTLSSwitch))
	require.Contains(t, a.etcdCommand(t), clientFlag)
	claimsCnoArgWith(t, a, "--tls-transition")
	require.Nil(t, claimsCswitch(a))
}

// claimsCfirstLeaves asserts a scale-down's first step: only the highest ordinal is asked to leave (the
// next one down stays a member), the replicas stay where they were and status.target has the new size.
func claimsCfirstLeaves(t *testing.T, a *fxAnswer, highest, replicas, target int) {
	t.Helper()
	in, ok := a.intent(highest)
	require.True(t, ok)
	require.Equal(t, api.IntentLeave, in.Kind)
	in, _ = a.intent(highest - 1)
	require.Equal(t, api.IntentMember, in.Kind)
	require.Equal(t, replicas, a.replicas(t))
	require.Equal(t, target, num(dig(a.status(), "target", "size")))
}

const (
	claimsCtransitionClients = "--listen-client-urls=http://0.0.0.0:2379,https://0.0.0.0:2379"
	claimsCpeerHTTP          = "--listen-peer-urls=http://0.0.0.0:2380"
	claimsCpeerHTTPS         = "--listen-peer-urls=https://0.0.0.0:2380"
)

func init() {
	addClaims(map[string]fixtureClaim{
		"tls-disabled-new-cluster": {"with TLS disabled a new cluster is rendered plaintext: http peer and client URLs, no certificate flags, no tls volume", func(t *testing.T, a *fxAnswer) {
			cmd := a.etcdCommand(t)
			require.Contains(t, cmd, claimsCpeerHTTP)
			require.Contains(t, cmd, "--listen-client-urls=http://0.0.0.0:2379")
			require.Contains(t, cmd, "--initial-advertise-peer-urls=http://$(POD_NAME).demo-peer.prod.svc:2380")
			claimsCnoArgWith(t, a, "--cert-file")
			claimsCnoArgWith(t, a, "--peer-cert-file")
			require.NotContains(t, claimsCvolumes(t, a), "tls")
			var agent map[string]any
			require.NoError(t, json.Unmarshal([]byte(a.configData(t)["agent.json"].(string)), &agent))
			require.NotContains(t, agent, "tls", "the agent manages no certificates")
			require.Nil(t, a.status()["tls"])
		}},
		"tls-switch-on-transition-roll": {"switching TLS on first rolls to a transition template (peers http, clients on http and https, certificates mounted) from partition 3", func(t *testing.T, a *fxAnswer) {
			claimsCtransitionRoll(t, a, "http", claimsCpeerHTTP, "https")
			require.Contains(t, a.etcdCommand(t), "--peer-cert-file=/var/run/etcdhook/tls/peer/tls.crt")
			a.conditionIs(t, "Progressing", "True", "TLSSwitch")
			require.Equal(t, claimsCstsAnn(t, a, api.AnnTemplateHash), a.configData(t)["rolling-to"])
		}},
		"tls-switch-on-peer-move": {"on the transition template members move their peer URL to https one at a time: demo-1 has moved, only demo-2 is asked now", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, []string{"", "", "https"}, claimsCpeerSchemes(t, a, 3))
			claimsCswitchIs(t, a, api.TLSSwitchPeers, "https", 1)
			require.Equal(t, "demo-2", claimsCswitch(a)["switching"])
			require.Equal(t, "https://demo-1.demo-peer.prod.svc:2380", claimsCmember(t, a, "demo-1")["peerURL"])
			require.Equal(t, "http://demo-2.demo-peer.prod.svc:2380", claimsCmember(t, a, "demo-2")["peerURL"])
			require.Equal(t, "transition http", claimsCstsAnn(t, a, api.AnnTLSSwitch))
			require.Equal(t, 0, a.partition(t))
		}},
		"tls-switch-on-peer-move-member-down": {"a member down before its peer-URL move stalls the switch: nobody else is asked to move, no final roll, the cluster is Degraded", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, []string{"", "", ""}, claimsCpeerSchemes(t, a, 3))
			claimsCswitchIs(t, a, api.TLSSwitchPeers, "https", 2)
			require.Nil(t, claimsCswitch(a)["switching"])
			a.conditionIs(t, "Degraded", "True", "MembersUnhealthy")
			require.Contains(t, a.condition("Degraded")["message"], "demo-0")
			require.Equal(t, "http://demo-0.demo-peer.prod.svc:2380", claimsCmember(t, a, "demo-0")["peerURL"])
			require.Equal(t, "transition http", claimsCstsAnn(t, a, api.AnnTLSSwitch))
			require.Equal(t, 0, a.partition(t))
		}},
		"tls-switch-on-final-roll": {"with every peer URL on https the pods roll to the final https-only template, from the highest ordinal (partition 2)", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "final http", claimsCstsAnn(t, a, api.AnnTLSSwitch))
			cmd := a.etcdCommand(t)
			require.Contains(t, cmd, claimsCpeerHTTPS)
			require.Contains(t, cmd, "--listen-client-urls=https://0.0.0.0:2379")
			claimsCnoArgWith(t, a, "--tls-transition")
			require.Equal(t, 2, a.partition(t))
			claimsCswitchIs(t, a, api.TLSSwitchRollingOut, "https", 3)
		}},
		"tls-switch-off-transition-roll": {"switching TLS off first rolls to a transition template keeping https peers and serving clients on both schemes, from partition 3", func(t *testing.T, a *fxAnswer) {
			claimsCtransitionRoll(t, a, "https", claimsCpeerHTTPS, "http")
		}},
		"tls-switch-off-secret-missing": {"a user Secret gone holds a switch off before it starts: template unchanged (TLS only), no switch, CertificatesInvalid", func(t *testing.T, a *fxAnswer) {
			claimsCnoSwitch(t, a, "--listen-client-urls=https://0.0.0.0:2379")
			a.conditionIs(t, "CertificatesInvalid", "True", "SecretUnusable")
			a.messageHas(t, "etcd-client", "not found")
		}},
		"tls-switch-off-secret-expired-roll-held": {"a user Secret expiring mid-roll holds the transition roll's next restart: partition stays 3 and status names the Secret", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "transition https", claimsCstsAnn(t, a, api.AnnTLSSwitch))
			require.Equal(t, 3, a.partition(t))
			claimsCswitchIs(t, a, api.TLSSwitchRollingIn, "http", 0)
			a.conditionIs(t, "CertificatesInvalid", "True", "SecretUnusable")
			a.messageHas(t, "before restarting demo-2", "etcd-client", "expired")
		}},
		"tls-switch-held-before-final-roll": {"etcd.io/hold-tls-switch keeps both schemes served once every peer URL moved: no final roll until it is removed", func(t *testing.T, a *fxAnswer) {
			claimsCswitchIs(t, a, api.TLSSwitchPeers, "https", 3)
			require.Equal(t, "transition http", claimsCstsAnn(t, a, api.AnnTLSSwitch))
			require.Contains(t, a.etcdCommand(t), claimsCtransitionClients)
			require.Equal(t, 0, a.partition(t))
			a.messageHas(t, api.AnnHoldTLSSwitch)
		}},
		"tls-switch-held-without-quorum": {"without quorum a switch on does not start: the plaintext template stays, no switch in status, the spec waits for quorum", func(t *testing.T, a *fxAnswer) {
			claimsCnoSwitch(t, a, "--listen-client-urls=http://0.0.0.0:2379")
			a.conditionIs(t, "Progressing", "True", "SpecPending")
			a.conditionIs(t, "QuorumLost", "True", "")
			a.messageHas(t, "a healthy quorum before TLS is switched on")
		}},
		"tls-switch-secret-change-refused": {"a Secret-name change mid-switch is refused (TLSSecretChange) while the running switch carries on to its next member", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "TLSSecretChange")
			claimsCswitchIs(t, a, api.TLSSwitchPeers, "http", 1)
			require.Equal(t, "demo-2", claimsCswitch(a)["switching"])
			require.Equal(t, []string{"", "", "http"}, claimsCpeerSchemes(t, a, 3))
			require.Equal(t, "transition https", claimsCstsAnn(t, a, api.AnnTLSSwitch))
			require.NotContains(t, claimsCvolumes(t, a), "peer-secret", "the new Secret is not mounted")
		}},
		"tls-switch-waits-for-ca-rotation": {"a switch off waits for the CA rotation in progress: the rotation carries on (demo-1 restarts) and no switch starts", func(t *testing.T, a *fxAnswer) {
			require.Nil(t, claimsCswitch(a))
			require.Nil(t, claimsCstsAnn(t, a, api.AnnTLSSwitch))
			require.Equal(t, "AddingCA", dig(a.status(), "tls", "caRotation", "phase"))
			require.Equal(t, "demo-1", dig(a.status(), "tls", "caRotation", "restarting"))
			in, ok := a.intent(1)
			require.True(t, ok)
			require.Contains(t, in.CARestart, "4a76a53dc7bbabb3")
			a.conditionIs(t, "Progressing", "True", "SpecPending")
			a.messageHas(t, "the CA rotation to finish before TLS is switched off")
		}},
		"invalid-tls-change": {"switching TLS off together with a new Secret name is refused (TLSSecretChange): the TLS template stays, no switch starts", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "TLSSecretChange")
			require.Nil(t, claimsCswitch(a))
			require.Nil(t, claimsCstsAnn(t, a, api.AnnTLSSwitch))
			require.Contains(t, a.etcdCommand(t), claimsCpeerHTTPS)
			require.NotContains(t, claimsCvolumes(t, a), "peer-secret")
			a.messageHas(t, "while TLS is switched off")
		}},
		"invalid-spec-no-record-children-kept": {"an invalid spec with no record of the last valid one renders nothing new and answers every observed child as is", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "Failed", a.phase())
			a.conditionIs(t, "InvalidSpec", "True", "UpgradeRefused")
			require.Empty(t, a.children("StatefulSet"))
			require.Empty(t, a.children("ConfigMap"))
			require.Len(t, a.children("Lease"), 3)
			require.Len(t, a.children("Service"), 2)
			in, ok := a.intent(2)
			require.True(t, ok)
			require.Equal(t, api.IntentMember, in.Kind)
			a.messageHas(t, "left exactly as they are")
		}},
		"invalid-version-format": {"a malformed spec.version is refused (InvalidVersion) and the children keep the last valid version 3.7.3", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "InvalidVersion")
			require.Equal(t, "quay.io/coreos/etcd:v3.7.3", a.etcdContainer(t)["image"])
			require.Equal(t, "3.7.3", dig(a.status(), "target", "version"))
			require.Equal(t, 0, a.partition(t))
		}},
		"invalid-spec-new-cluster": {"an invalid spec on a new cluster creates nothing: no children, phase Failed, InvalidSize", func(t *testing.T, a *fxAnswer) {
			cs, _ := a.resp["children"].([]any)
			require.Empty(t, cs)
			require.Equal(t, "Failed", a.phase())
			a.conditionIs(t, "InvalidSpec", "True", "InvalidSize")
			a.conditionIs(t, "Available", "False", "NotBootstrapped")
		}},
		"hook-v2-keys": {"children keyed namespace/name (hook v2) are read as v1: the 5-to-3 scale-down asks demo-4 to leave, answered by plain name", func(t *testing.T, a *fxAnswer) {
			require.Contains(t, a.children("Lease"), "demo-4-member")
			claimsCfirstLeaves(t, a, 4, 5, 3)
		}},
		"metacontroller-last-applied": {"Metacontroller's last-applied annotations on observed children change nothing: the settled cluster stays Stable, none echoed", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "Running", a.phase())
			a.conditionIs(t, "Progressing", "False", "Stable")
			require.Equal(t, 0, a.partition(t))
			require.Equal(t, 60, num(a.resp["resyncAfterSeconds"]))
			cs, _ := a.resp["children"].([]any)
			require.NotEmpty(t, cs)
			for _, c := range cs {
				require.Nil(t, dig(c, "metadata", "annotations", lastAppliedAnnotation), "%v", dig(c, "metadata", "name"))
			}
		}},
		"finalize/finalizing": {"finalizing answers no children and stays unfinalized while the StatefulSet and member pods remain; volumes are kept", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, false, a.resp["finalized"])
			cs, _ := a.resp["children"].([]any)
			require.Empty(t, cs)
			a.messageHas(t, "waiting for 1 StatefulSet and 3 member pods", "volumes are kept")
		}},
		"customize/customize": {"customize relates the cluster's pods and claims by label, and no Secret with built-in certificates", func(t *testing.T, a *fxAnswer) {
			rel := claimsCrelated(a)
			claimsCrelatesPodsAndClaims(t, rel)
			require.NotContains(t, rel, "secrets")
		}},
		"customize/customize-tls-secrets": {"with user TLS Secrets customize also relates exactly those Secrets, by name", func(t *testing.T, a *fxAnswer) {
			rel := claimsCrelated(a)
			claimsCrelatesPodsAndClaims(t, rel)
			require.Equal(t, []string{"etcd-client", "etcd-peer"}, strs(rel["secrets"]["names"]))
		}},
		"customize/customize-tls-secrets-tls-off": {"named TLS Secrets stay related with TLS off (a switch off's transition template mounts them)", func(t *testing.T, a *fxAnswer) {
			rel := claimsCrelated(a)
			claimsCrelatesPodsAndClaims(t, rel)
			require.Equal(t, []string{"etcd-client", "etcd-peer"}, strs(rel["secrets"]["names"]))
		}},
		"bench/nine-members-idle": {"a settled 9-member cluster's resync is idle: Stable, 60s resync, 9 replicas, every Lease a plain member", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "Progressing", "False", "Stable")
			require.Equal(t, 60, num(a.resp["resyncAfterSeconds"]))
			require.Equal(t, 9, a.replicas(t))
			for i := range 9 {
				in, ok := a.intent(i)
				require.True(t, ok, "Lease of member %d", i)
				require.Equal(t, api.IntentMember, in.Kind, "member %d", i)
				require.True(t, in.Join.IsZero(), "member %d", i)
			}
		}},
		"bench/nine-members-scaling": {"scaling 9 to 7 first asks only the highest ordinal (demo-8) to leave and keeps 9 replicas", func(t *testing.T, a *fxAnswer) {
			claimsCfirstLeaves(t, a, 8, 9, 7)
			a.conditionIs(t, "Progressing", "True", "MembershipChange")
		}},
		"backup-scheduled": {"a backup schedule renders a CronJob (schedule, destination with its parameters, no overlap) with its own account and Lease", func(t *testing.T, a *fxAnswer) {
			cj := a.children("CronJob")["demo-backup"]
			require.NotNil(t, cj)
			require.Equal(t, "0 * * * *", dig(cj, "spec", "schedule"))
			require.Equal(t, "Forbid", dig(cj, "spec", "concurrencyPolicy"))
			require.Contains(t, claimsCjobCmd(cj), "--destination=s3://etcd-backups/prod?endpoint=https://minio.storage:9000&region=us-east-1&use_path_style=true")
			require.Contains(t, a.children("ServiceAccount"), "demo-backup")
			require.Contains(t, a.children("Lease"), "demo-backup")
			require.Empty(t, a.jobs("backup"))
		}},
		"backup-on-demand": {"etcd.io/backup-now without a schedule starts one Job for its token (no CronJob) and status.backup says it runs", func(t *testing.T, a *fxAnswer) {
			require.Empty(t, a.children("CronJob"))
			js := a.jobs("backup")
			require.Len(t, js, 1)
			job := a.children("Job")[js[0]]
			require.Contains(t, claimsCjobCmd(job), "--token=before-upgrade-1")
			require.Equal(t, "backup-now", dig(job, "metadata", "annotations", api.AnnJobReason))
			od := claimsCbackup(a)["onDemand"]
			require.Equal(t, "Running", dig(od, "phase"))
			require.Equal(t, "before-upgrade-1", dig(od, "token"))
			require.Equal(t, js[0], dig(od, "job"))
		}},
		"backup-on-demand-succeeded": {"a finished on-demand backup is reported Succeeded with the snapshot, revision and size its report gives", func(t *testing.T, a *fxAnswer) {
			b := claimsCbackup(a)
			require.Equal(t, "Succeeded", dig(b, "onDemand", "phase"))
			require.Equal(t, "before-upgrade-1", dig(b, "onDemand", "token"))
			require.Equal(t, "gs://etcd-backups/prod/prod/demo/20260101T115950Z-r4242.db", b["lastSnapshot"])
			require.Equal(t, 4242, num(b["revision"]))
			require.Equal(t, 2097152, num(b["size"]))
			require.Nil(t, a.condition("BackupFailing"))
		}},
		"backup-failing": {"a failed backup after a success raises BackupFailing with the failure and keeps the last success in status", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "BackupFailing", "True", "BackupFailed")
			require.Contains(t, a.condition("BackupFailing")["message"], "AccessDenied")
			b := claimsCbackup(a)
			require.Equal(t, "Failed", dig(b, "onDemand", "phase"))
			require.Equal(t, "t2", dig(b, "onDemand", "token"))
			require.Equal(t, "2026-01-01T11:58:45Z", b["lastSuccessTime"])
			require.Equal(t, "2026-01-01T11:59:50Z", b["lastFailureTime"])
		}},
		"backup-refused": {"a backup Job that meets a terminal cause (the store refuses the credentials) fails at once, and BackupFailing says it is not retried (BackupRefused)", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "BackupFailing", "True", "BackupRefused")
			require.Contains(t, a.condition("BackupFailing")["message"], "refused the credentials")
			require.Contains(t, a.condition("BackupFailing")["message"], "not retried by its Job")
			require.Equal(t, "Failed", dig(claimsCbackup(a), "onDemand", "phase"))
			j := a.children("Job")[dig(claimsCbackup(a), "onDemand", "job").(string)]
			require.Equal(t, float64(3), dig(j, "spec", "podFailurePolicy", "rules", 0, "onExitCodes", "values", 0), "exit 3 fails the Job without its retries")
		}},
		"backup-stale": {"a last success older than two runs of the schedule raises BackupStale (NoRecentBackup) naming its time", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "BackupStale", "True", "NoRecentBackup")
			require.Contains(t, a.condition("BackupStale")["message"], "since 2026-01-01T09:00:00Z")
			require.Equal(t, "2026-01-01T09:00:00Z", claimsCbackup(a)["lastSuccessTime"])
			require.Nil(t, a.condition("BackupFailing"))
		}},
		"backup-report-distrusted": {"backup reports dated ahead of the clock or not JSON are ignored (InputIgnored) and leave status.backup empty", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InputIgnored", "True", "ImpossibleInput")
			msg, _ := a.condition("InputIgnored")["message"].(string)
			require.Contains(t, msg, "ahead of the hook's clock")
			require.Contains(t, msg, "not JSON")
			b := claimsCbackup(a)
			require.NotNil(t, b)
			require.Empty(t, b)
			require.Nil(t, a.condition("BackupFailing"))
		}},
		"backup-invalid-destination": {"a destination with an unknown parameter is refused (InvalidBackup), naming it with its value redacted; no backup children", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "InvalidBackup")
			a.messageHas(t, `parameter "endpiont"`, "endpiont=REDACTED")
			require.NotContains(t, a.message(), "minio:9000")
			claimsCnoBackupChildren(t, a)
		}},
		"backup-file-on-claim": {"a file:// backup on a named claim mounts that claim in the CronJob and passes the retention (keep 3, max age 72h)", func(t *testing.T, a *fxAnswer) {
			cj := a.children("CronJob")["demo-backup"]
			require.NotNil(t, cj)
			require.Equal(t, "@daily", dig(cj, "spec", "schedule"))
			cmd := claimsCjobCmd(cj)
			require.Contains(t, cmd, "--destination=file:///etcd")
			require.Contains(t, cmd, "--keep-last=3")
			require.Contains(t, cmd, "--max-age=72h0m0s")
			claims := map[string]any{}
			vs, _ := dig(cj, "spec", "jobTemplate", "spec", "template", "spec", "volumes").([]any)
			for _, v := range vs {
				if c := dig(v, "persistentVolumeClaim", "claimName"); c != nil {
					claims[dig(v, "name").(string)] = c
				}
			}
			require.Equal(t, map[string]any{"backup-volume": "etcd-backups"}, claims)
		}},
		"backup-stale-never-succeeded": {"backups that never succeeded in two runs of the schedule since being configured are BackupStale", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "BackupStale", "True", "NoRecentBackup")
			require.Contains(t, a.condition("BackupStale")["message"], "since backups were configured")
			require.Nil(t, claimsCbackup(a)["lastSuccessTime"])
		}},
	})
}
