package sync

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

func init() {
	addClaims(map[string]fixtureClaim{
		"new-cluster": {"a fresh creation (no claim, pod, Lease or record anywhere) starts every member at once from one static initial cluster: replicas 3, each Lease asks static/3, the StatefulSet and agent.json record it", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 3, a.replicas(t))
			for i := 0; i < 3; i++ {
				in, ok := a.intent(i)
				require.True(t, ok)
				require.Equal(t, api.IntentMember, in.Kind)
				require.Equal(t, 3, in.Static, "demo-%d", i)
				require.False(t, in.Seed)
				require.True(t, in.Join.IsZero(), "no join permission: nobody joins")
			}
			_, ok := a.intent(3)
			require.False(t, ok)
			require.Equal(t, "static/3", dig(a.child(t, "StatefulSet", ""), "metadata", "annotations", api.AnnBootstrap))
			require.Equal(t, "static/3", claimsBConfigJSON(t, a, api.ConfigKeyAgent)["bootstrap"])
			require.Equal(t, "false", a.configData(t)["bootstrapped"])
			a.conditionIs(t, "Progressing", "True", "Bootstrapping")
		}},
		"new-cluster-size-5-custom": {"a new cluster's spec reaches its children (v3.5.21 image, fast-ssd claims, options as etcd flags, PDB of 3) while its 5 members start together", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 5, a.replicas(t))
			require.Equal(t, "quay.io/coreos/etcd:v3.5.21", claimsAImage(t, a))
			require.Equal(t, "fast-ssd", dig(a.child(t, "StatefulSet", ""), "spec", "volumeClaimTemplates", 0, "spec", "storageClassName"))
			cmd := a.etcdCommand(t)
			require.Contains(t, cmd, "--quota-backend-bytes=8589934592")
			require.Contains(t, cmd, "--auto-compaction-retention=1h")
			require.Equal(t, 3, num(dig(a.child(t, "PodDisruptionBudget", ""), "spec", "minAvailable")))
			require.Equal(t, 5, num(dig(a.status(), "target", "size")))
			in, _ := a.intent(4)
			require.Equal(t, 5, in.Static)
		}},
		"new-cluster-emptydir": {"storage.emptyDir gives the pods an emptyDir data volume and no claim template; a lone member's PDB allows it down", func(t *testing.T, a *fxAnswer) {
			sts := a.child(t, "StatefulSet", "")
			require.Nil(t, dig(sts, "spec", "volumeClaimTemplates"))
			var data any
			vols, _ := dig(sts, "spec", "template", "spec", "volumes").([]any)
			for _, v := range vols {
				if dig(v, "name") == "data" {
					data = v
				}
			}
			require.NotNil(t, data, "a data volume")
			require.NotNil(t, dig(data, "emptyDir"), "data is an emptyDir: %v", data)
			require.Nil(t, a.status()["storage"], "no claims to report")
			require.Equal(t, 1, num(dig(a.child(t, "PodDisruptionBudget", ""), "spec", "maxUnavailable")))
			a.conditionIs(t, "LimitedDisruptionBudget", "True", "SizeBelowThree")
		}},
		"seed-waiting": {"until the seed's agent reports, the hook waits on it: one replica, the seed intent kept with the time it was first set", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 1, a.replicas(t))
			in, ok := a.intent(0)
			require.True(t, ok)
			require.True(t, in.Seed)
			require.Equal(t, "2026-01-01T11:59:55Z", in.Since, "the first sync's time, not rewritten")
			require.Equal(t, "false", a.configData(t)["bootstrapped"])
			a.conditionIs(t, "Progressing", "True", "Bootstrapping")
		}},
		"seed-reporting": {"once the seed reports, replicas go to the full size, the seed flag is dropped and only demo-1 may join", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "Creating", a.phase())
			require.Equal(t, 3, a.replicas(t))
			require.False(t, claimsAIntent(t, a, 0).Seed)
			require.True(t, claimsAJoinOpen(t, a, 1))
			require.False(t, claimsAJoinOpen(t, a, 2), "one join at a time")
			require.Equal(t, "true", a.configData(t)["bootstrapped"])
			require.Equal(t, "cdf818194e3a8c32", a.configData(t)["cluster-id"])
		}},
		"scale-up-permits-next-ordinal": {"a size raised on a running cluster sets the replicas but permits only the next ordinal (demo-1) to join", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "Scaling", a.phase())
			require.Equal(t, 3, a.replicas(t))
			require.True(t, claimsAJoinOpen(t, a, 1))
			require.False(t, claimsAJoinOpen(t, a, 2), "one join at a time")
			a.conditionIs(t, "Progressing", "True", "MembershipChange")
		}},
		"learner-pending": {"a learner not yet promoted holds the scale-up: demo-1 keeps its window, demo-2 gets none", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "learner", claimsAMember(t, a, "demo-1")["role"])
			require.True(t, claimsAJoinOpen(t, a, 1))
			require.False(t, claimsAJoinOpen(t, a, 2))
			a.messageHas(t, "to be promoted")
		}},
		"learner-promoted-next-join": {"once demo-1 is promoted to voter its join window is withdrawn and demo-2 is permitted next", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "voter", claimsAMember(t, a, "demo-1")["role"])
			require.False(t, claimsAJoinOpen(t, a, 1))
			require.True(t, claimsAJoinOpen(t, a, 2))
			a.messageHas(t, "demo-2 to join")
		}},
		"learner-stuck-removed": {"a learner not promoted in time is removed by a Job (reason stuck-learner) and the step is reported stalled", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, []string{"demo-rm-8e9e05c52164ad91-1"}, a.jobs(""))
			require.Equal(t, "stuck-learner", claimsAJobReason(t, a, "demo-rm-8e9e05c52164ad91-1"))
			require.Equal(t, "learner", claimsAMember(t, a, "demo-3")["role"])
			a.conditionIs(t, "Degraded", "True", "StepStalled")
			a.conditionIs(t, "Progressing", "False", "StepDeadlineExceeded")
		}},
		"scale-down-leave-intent": {"a scale-down asks the highest ordinal to leave and keeps the replicas until it has left", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 5, a.replicas(t))
			require.Equal(t, api.IntentLeave, claimsAIntent(t, a, 4).Kind)
			require.Equal(t, api.IntentMember, claimsAIntent(t, a, 3).Kind, "one leave at a time")
			require.Empty(t, a.jobs(""))
		}},
		"scale-down-member-left": {"once demo-4 has left, the replicas drop to 4 and demo-3 is asked to leave next", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 4, a.replicas(t))
			require.Nil(t, claimsAMemberOrNil(a, "demo-4"), "demo-4 is no longer a member")
			require.Equal(t, api.IntentLeave, claimsAIntent(t, a, 3).Kind)
			require.Equal(t, api.IntentMember, claimsAIntent(t, a, 2).Kind)
		}},
		"scale-down-volume-delete-job": {"once a departed member's pod is gone, a Job deletes its volume (data-demo-4) and its Lease is released", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 3, a.replicas(t))
			require.Equal(t, []string{"demo-pvc-4-1"}, a.jobs(""))
			require.Equal(t, "volume-of-removed-member", claimsAJobReason(t, a, "demo-pvc-4-1"))
			require.Contains(t, claimsAJobCommand(t, a, "demo-pvc-4-1"), "--claim=data-demo-4")
			_, ok := a.intent(4)
			require.False(t, ok, "no Lease for demo-4")
		}},
		"scale-down-volume-deleted": {"a finished scale-down leaves nothing behind: no Job, no Lease past the size, four claims, Running and Stable", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 4, a.replicas(t))
			require.Empty(t, a.jobs(""))
			_, ok := a.intent(4)
			require.False(t, ok)
			require.Equal(t, 4, num(dig(a.status(), "storage", "claims")))
			require.Equal(t, "Running", a.phase())
			a.conditionIs(t, "Progressing", "False", "Stable")
		}},
		"scale-down-agent-dead-remove-job": {"a departing member whose agent is dead is removed by a Job (reason leave) instead of waiting for it to leave", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, api.IntentLeave, claimsAIntent(t, a, 4).Kind)
			require.Equal(t, []string{"demo-rm-8e9e05c52164bea2-1"}, a.jobs(""))
			require.Equal(t, "leave", claimsAJobReason(t, a, "demo-rm-8e9e05c52164bea2-1"))
			require.Contains(t, claimsAJobCommand(t, a, "demo-rm-8e9e05c52164bea2-1"), "--id=8e9e05c52164bea2")
			require.Equal(t, 5, a.replicas(t), "replicas drop once the member is gone")
		}},
		"orphan-member-removed": {"an etcd member no ordinal owns (a foreign peer URL) is removed by a Job with reason orphan", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, []string{"demo-rm-8e9e05c52164ad91-1"}, a.jobs(""))
			require.Equal(t, "orphan", claimsAJobReason(t, a, "demo-rm-8e9e05c52164ad91-1"))
			require.Contains(t, claimsAJobCommand(t, a, "demo-rm-8e9e05c52164ad91-1"), "--peer-url=http://old-etcd-2.legacy.prod.svc:2380")
			require.Equal(t, 3, a.replicas(t))
		}},
		"remove-job-running": {"a removal Job still running is kept as it is: no second attempt, the step still in progress", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, []string{"demo-rm-8e9e05c52164ad91-1"}, a.jobs(""))
			a.conditionIs(t, "Progressing", "True", "MembershipChange")
		}},
		"remove-job-succeeded-dropped": {"once the removal Job succeeded and the member is gone, the Job is dropped and the cluster is Running", func(t *testing.T, a *fxAnswer) {
			require.Empty(t, a.jobs(""))
			require.Nil(t, claimsAMemberOrNil(a, "orphan-8e9e05c52164ad91"))
			require.Equal(t, "Running", a.phase())
			a.conditionIs(t, "Degraded", "False", "AllMembersHealthy")
		}},
		"remove-job-failed-backoff": {"a failed removal Job is kept and not retried before its backoff ends; status says when", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, []string{"demo-rm-8e9e05c52164ad91-1"}, a.jobs(""))
			a.conditionIs(t, "Progressing", "False", "Waiting")
			a.messageHas(t, "retrying the removal", "after 2026-01-01T12:00:20Z")
		}},
		"remove-job-retried": {"after the backoff a failed removal is retried by a new Job with the next attempt number, the failed one kept", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, []string{"demo-rm-8e9e05c52164ad91-1", "demo-rm-8e9e05c52164ad91-2"}, a.jobs(""))
			require.Equal(t, "orphan", claimsAJobReason(t, a, "demo-rm-8e9e05c52164ad91-2"))
			a.messageHas(t, "demo-rm-8e9e05c52164ad91-2")
		}},
		"dead-member-quorum-to-spare": {"a member dead past deadMemberSeconds is removed by a Job (reason dead) when the others keep quorum", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, []string{"demo-rm-8e9e05c521649c80-1"}, a.jobs(""))
			require.Equal(t, "dead", claimsAJobReason(t, a, "demo-rm-8e9e05c521649c80-1"))
			require.Equal(t, false, claimsAMember(t, a, "demo-2")["healthy"])
			a.conditionIs(t, "Available", "True", "QuorumHealthy")
			require.Equal(t, 5, a.replicas(t))
		}},
		"dead-member-no-quorum-to-spare": {"a dead member is not removed when another voter is unhealthy too and removal would break quorum", func(t *testing.T, a *fxAnswer) {
			require.Empty(t, a.jobs(""))
			require.Equal(t, false, claimsAMember(t, a, "demo-1")["healthy"], "the stale report counts as unhealthy")
			a.conditionIs(t, "Progressing", "False", "Waiting")
			a.messageHas(t, "demo-3", "would break quorum")
			require.Equal(t, 4, a.replicas(t))
		}},
		"two-voters-one-dead": {"two voters with one dead have no quorum: QuorumLost, membership frozen, nothing removed", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "QuorumLost", "True", "NoHealthyVoter")
			a.conditionIs(t, "Available", "False", "NoQuorum")
			require.Empty(t, a.jobs(""))
			require.Equal(t, 2, a.replicas(t))
			require.Equal(t, api.IntentMember, claimsAIntent(t, a, 1).Kind)
		}},
		"stale-lease-blocks-scale-up": {"a voter whose Lease is stale counts as unhealthy and holds a scale-up: no join is permitted", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, false, claimsAMember(t, a, "demo-2")["healthy"])
			require.False(t, claimsAJoinOpen(t, a, 3))
			require.False(t, claimsAJoinOpen(t, a, 4))
			a.conditionIs(t, "Progressing", "False", "Waiting")
			a.messageHas(t, "every voter to be healthy before a member joins")
		}},
		"status-wiped": {"a wiped status is rebuilt from what is observed: bootstrapped, cluster ID, Running; no seed is asked to bootstrap again", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, true, a.status()["bootstrapped"])
			require.Equal(t, "cdf818194e3a8c32", a.status()["clusterID"])
			require.Equal(t, "Running", a.phase())
			require.False(t, claimsAIntent(t, a, 0).Seed)
			require.Equal(t, 3, a.replicas(t))
			require.Equal(t, "true", a.configData(t)["bootstrapped"])
		}},
		"split-brain": {"two cluster IDs among the reports stop every membership change: phase Failed, SplitBrain True, no Job", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "Failed", a.phase())
			a.conditionIs(t, "SplitBrain", "True", "ClusterIDMismatch")
			a.conditionIs(t, "Available", "False", "SplitBrain")
			a.messageHas(t, "aaaaaaaaaaaaaaaa")
			require.Empty(t, a.jobs(""))
			require.Equal(t, 3, a.replicas(t))
		}},
		"foreign-data-on-seed": {"a seed whose volume holds another EtcdCluster's data is refused: Failed, ForeignData True, no cluster ID recorded", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "Failed", a.phase())
			a.conditionIs(t, "ForeignData", "True", "VolumeOfAnotherCluster")
			require.Equal(t, "", a.configData(t)["cluster-id"])
			require.Equal(t, "false", a.configData(t)["bootstrapped"])
			require.Equal(t, 1, a.replicas(t))
		}},
		"data-loss-replace-permitted": {"a member whose volume lost its data is permitted to rejoin (join window) while the others keep quorum", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, false, claimsAMember(t, a, "demo-1")["healthy"])
			require.True(t, claimsAJoinOpen(t, a, 1))
			require.False(t, claimsAJoinOpen(t, a, 2))
			require.Empty(t, a.jobs(""), "its member is not removed first")
			a.conditionIs(t, "Available", "True", "QuorumHealthy")
			a.messageHas(t, "demo-1 to join")
		}},
		"kubectl-scaled-statefulset": {"StatefulSet replicas scaled by hand (to 1) are put back to the size the hook computes (3)", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 3, a.replicas(t))
			require.Empty(t, a.jobs(""))
			require.Equal(t, api.IntentMember, claimsAIntent(t, a, 2).Kind, "nobody asked to leave")
		}},
		"upgrade-allowed-partition-reset": {"a version bump starts a roll: new image in the template, partition at replicas (3) so no pod restarts yet, rolling-to set", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "Upgrading", a.phase())
			require.Equal(t, "quay.io/coreos/etcd:v3.6.16", claimsAImage(t, a))
			require.Equal(t, 3, a.partition(t))
			require.Equal(t, claimsATemplateHash(t, a), a.configData(t)["rolling-to"])
			a.conditionIs(t, "Progressing", "True", "RollingUpdate")
		}},
		"upgrade-refused-35-below-20": {"an upgrade to 3.6 from 3.5.19 (below 3.5.20) is refused: InvalidSpec UpgradeRefused, the pods keep v3.5.19", func(t *testing.T, a *fxAnswer) {
			claimsAUpgradeRefused(t, a, "3.5.20", "3.5.19")
		}},
		"upgrade-downgrade-refused": {"a downgrade (3.7.3 to 3.6.10) is refused: InvalidSpec UpgradeRefused, the pods keep v3.7.3", func(t *testing.T, a *fxAnswer) {
			claimsAUpgradeRefused(t, a, "downgrades are not supported", "3.7.3")
		}},
		"upgrade-in-progress-steps": {"a roll goes from the highest ordinal down: demo-2 and demo-1 run 3.6.16, partition 0 lets demo-0 go last", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, 0, a.partition(t))
			require.Equal(t, "3.6.16", claimsAMember(t, a, "demo-2")["version"])
			require.Equal(t, "3.6.16", claimsAMember(t, a, "demo-1")["version"])
			require.Equal(t, "3.5.21", claimsAMember(t, a, "demo-0")["version"])
			require.Equal(t, "3.5.21 3.6.16", a.configData(t)["running-versions"])
			a.messageHas(t, "demo-0 to run the new revision")
		}},
		"upgrade-held-member-down": {"a roll restarts no pod while another member is down: partition held at 3, waiting for quorum to restart demo-2", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "quay.io/coreos/etcd:v3.6.16", claimsAImage(t, a))
			require.Equal(t, 3, a.partition(t))
			require.Equal(t, false, claimsAMember(t, a, "demo-1")["healthy"])
			a.messageHas(t, "quorum to allow restarting demo-2")
		}},
		"bad-image-stuck": {"a new image whose pod never gets healthy holds the roll at demo-2: partition stays 2, no other pod restarted", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "quay.io/coreos/etcd:v3.7.99", claimsAImage(t, a))
			require.Equal(t, 2, a.partition(t))
			require.Equal(t, false, claimsAMember(t, a, "demo-2")["healthy"])
			require.Equal(t, true, claimsAMember(t, a, "demo-1")["healthy"])
			a.conditionIs(t, "Degraded", "True", "MembersUnhealthy")
		}},
		"bad-image-reverted": {"reverting the version mid-roll rolls the broken ordinal back: template v3.7.3 at partition 2, rolling-to the old hash", func(t *testing.T, a *fxAnswer) {
			require.Equal(t, "quay.io/coreos/etcd:v3.7.3", claimsAImage(t, a))
			require.Equal(t, 2, a.partition(t))
			require.Equal(t, "6c097c39f5f41e6c", claimsATemplateHash(t, a), "the template of before the bad image")
			require.Equal(t, "6c097c39f5f41e6c", a.configData(t)["rolling-to"])
			require.Equal(t, "3.7.3", dig(a.status(), "target", "version"))
		}},
		"size-edited-mid-step": {"a size edited while a learner is pending waits for that step: the target stays 5 and Progressing says SpecPending", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "Progressing", "True", "SpecPending")
			require.Equal(t, 5, num(dig(a.status(), "target", "size")))
			require.Equal(t, 5, a.replicas(t))
			require.Equal(t, api.IntentMember, claimsAIntent(t, a, 4).Kind, "no leave before the step ends")
			require.True(t, claimsAJoinOpen(t, a, 3), "the pending learner keeps its window")
		}},
		"all-pods-restarted": {"with every pod restarted and unready no voter is healthy: QuorumLost, membership frozen, no new bootstrap", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "QuorumLost", "True", "NoHealthyVoter")
			require.Empty(t, a.jobs(""))
			require.False(t, claimsAIntent(t, a, 0).Seed, "not bootstrapped again")
			require.Equal(t, "cdf818194e3a8c32", a.configData(t)["cluster-id"])
			require.Equal(t, 3, a.replicas(t))
		}},
		"even-size-running": {"an even size runs and only warns: EvenSize True while Running and not Degraded, a PDB of minAvailable 3", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "EvenSize", "True", "EvenSize")
			require.Equal(t, "Running", a.phase())
			a.conditionIs(t, "Degraded", "False", "")
			require.Equal(t, 3, num(dig(a.child(t, "PodDisruptionBudget", ""), "spec", "minAvailable")))
		}},
		"size-two-disruption-budget": {"size 2 gets a PDB of maxUnavailable 1, not a quorum budget that would block every drain, and says so", func(t *testing.T, a *fxAnswer) {
			pdb := a.child(t, "PodDisruptionBudget", "")
			require.Equal(t, 1, num(dig(pdb, "spec", "maxUnavailable")))
			require.Nil(t, dig(pdb, "spec", "minAvailable"))
			a.conditionIs(t, "LimitedDisruptionBudget", "True", "SizeBelowThree")
			require.Equal(t, "Running", a.phase())
		}},
		"invalid-size-keeps-children": {"an out-of-range size (12) is refused with InvalidSpec InvalidSize while the children keep size 3", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "InvalidSize")
			require.Equal(t, 3, a.replicas(t))
			require.Equal(t, 3, num(dig(a.status(), "target", "size")))
			_, ok := a.intent(3)
			require.False(t, ok, "no Lease past the last valid size")
			require.Equal(t, "Running", a.phase())
		}},
		"invalid-unsafe-option": {"an unsafe option without allowUnsafeOptions is refused (InvalidSpec UnsafeOption) and never reaches etcd", func(t *testing.T, a *fxAnswer) {
			a.conditionIs(t, "InvalidSpec", "True", "UnsafeOption")
			for _, arg := range a.etcdCommand(t) {
				require.NotContains(t, arg, "unsafe-no-fsync")
			}
			require.NotContains(t, a.configData(t)["spec.json"], "unsafe-no-fsync")
			require.Equal(t, "Running", a.phase())
		}},
	})
}

// claimsAUpgradeRefused asserts a version change refused (InvalidSpec UpgradeRefused, its message
// saying why) leaves everything on version: the image, status.target and no roll started.
func claimsAUpgradeRefused(t *testing.T, a *fxAnswer, why, version string) {
	t.Helper()
	a.conditionIs(t, "InvalidSpec", "True", "UpgradeRefused")
	require.Contains(t, a.condition("InvalidSpec")["message"], why)
	require.Equal(t, "quay.io/coreos/etcd:v"+version, claimsAImage(t, a))
	require.Equal(t, version, dig(a.status(), "target", "version"))
	require.Equal(t, "", a.configData(t)["rolling-to"])
}

// claimsAIntent is member i's intent, failing when its Lease is not answered.
func claimsAIntent(t *testing.T, a *fxAnswer, i int) api.Intent {
	t.Helper()
	in, ok := a.intent(i)
	require.True(t, ok, "a Lease for member %d", i)
	return in
}

// claimsAJoinOpen: member i's Lease carries a join permission.
func claimsAJoinOpen(t *testing.T, a *fxAnswer, i int) bool {
	t.Helper()
	return !claimsAIntent(t, a, i).Join.IsZero()
}

// claimsAMemberOrNil is status.members' entry named name (nil when absent).
func claimsAMemberOrNil(a *fxAnswer, name string) map[string]any {
	ms, _ := a.status()["members"].([]any)
	for _, m := range ms {
		if mm, _ := m.(map[string]any); mm["name"] == name {
			return mm
		}
	}
	return nil
}

func claimsAMember(t *testing.T, a *fxAnswer, name string) map[string]any {
	t.Helper()
	m := claimsAMemberOrNil(a, name)
	require.NotNil(t, m, "status.members has %s", name)
	return m
}

func claimsAImage(t *testing.T, a *fxAnswer) string {
	t.Helper()
	s, _ := a.etcdContainer(t)["image"].(string)
	return s
}

func claimsATemplateHash(t *testing.T, a *fxAnswer) string {
	t.Helper()
	s, _ := dig(a.child(t, "StatefulSet", ""), "metadata", "annotations", api.AnnTemplateHash).(string)
	require.NotEmpty(t, s)
	return s
}

// claimsAJobReason and claimsAJobCommand read the Job named name.
func claimsAJobReason(t *testing.T, a *fxAnswer, name string) string {
	t.Helper()
	j, ok := a.children("Job")[name]
	require.True(t, ok, "Job %s", name)
	s, _ := dig(j, "metadata", "annotations", "etcd.io/reason").(string)
	return s
}

func claimsAJobCommand(t *testing.T, a *fxAnswer, name string) string {
	t.Helper()
	j, ok := a.children("Job")[name]
	require.True(t, ok, "Job %s", name)
	l, _ := dig(j, "spec", "template", "spec", "containers", 0, "command").([]any)
	var parts []string
	for _, s := range l {
		parts = append(parts, s.(string))
	}
	return strings.Join(parts, " ")
}
