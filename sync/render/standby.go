package render

import (
	appsv1 "k8s.io/api/apps/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// StandbyObjects are a standby's children (docs/design/21-standby.md §21.2): its applier while it runs,
// and, without spec.backup (whose children include them), the backup Lease the applier reports on and
// the account it runs as. The Lease stays after promotion: its last report is status.standby's record
// of where the standby ended.
func StandbyObjects(d *Desired) []any {
	if d.Standby == nil || d.Spec.Standby == nil {
		return nil
	}
	var out []any
	if d.Spec.Backup == nil || d.Backup == nil {
		n := d.Names
		out = append(out, backupRBAC(n)...)
		out = append(out, &coordv1.Lease{
			TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			ObjectMeta: meta(n, n.BackupName(), api.ComponentBackup),
		})
	}
	if d.Standby.Applier {
		out = append(out, StandbyApplier(d))
	}
	return out
}

// StandbyApplier is `etcdhook standby-follow` in a one-replica StatefulSet: never two pods, since two
// appliers would apply one revision twice (the second landing one higher stops the standby for good).
// It reaches the standby as root (the client identity opsJob mounts under auth), the primary's store
// with spec.standby's credentials, and reports on the backup Lease.
func StandbyApplier(d *Desired) *appsv1.StatefulSet {
	n, sb := d.Names, d.Spec.Standby
	args := []string{"standby-follow",
		"--cluster=" + n.Cluster,
		"--namespace=" + n.Namespace,
		"--endpoints=" + n.ClientEndpoint(),
		"--from=" + sb.From,
		"--lease=" + n.BackupName(),
	}
	job := opsJob(d, n.StandbyApplier(), "standby", n.BackupName(), nil)
	pod := job.Spec.Template.Spec
	pod.RestartPolicy = corev1.RestartPolicyAlways
	ct := &pod.Containers[0]
	ct.Command = append(ct.Command[:1], append(args, ct.Command[1:]...)...)
	vols, mounts, more := BackupStore(Store{sb.CredentialsSecret, "", encryptionName(sb.Encryption)})
	ct.Command = append(ct.Command, more...)
	ct.VolumeMounts = append(ct.VolumeMounts, mounts...)
	pod.Volumes = append(pod.Volumes, vols...)
	followerResources(ct)
	return followerSet(n, n.StandbyApplier(), api.ComponentStandby, d.Standby.Replicas, pod)
}
