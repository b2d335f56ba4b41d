package render

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// BackupWriter is the continuous backup writer (docs/design/16-backup-restore.md §16.10): `etcdhook
// backup-follow` in a one-replica StatefulSet. A StatefulSet rather than a Deployment: it never runs
// two pods of the same ordinal, even while a node is unreachable (a Deployment starts the replacement
// at once), and two writers of one chain would each upload the same revisions under their own times;
// and StatefulSets are a child kind the registration already declares.
func BackupWriter(d *Desired) *appsv1.StatefulSet {
	n, b := d.Names, d.Spec.Backup
	c := b.Continuous
	// The full snapshots it takes itself (no chain yet, a gap, a compaction) follow the backups' retention.
	args := storeArgs(d, "backup-follow", "--chunk-interval="+c.Interval().String(), "--report-every="+api.ContinuousReportEvery.String())
	job := opsJob(d, n.BackupWriter(), "backup-writer", n.BackupName(), nil)
	pod := job.Spec.Template.Spec
	pod.RestartPolicy = corev1.RestartPolicyAlways
	// What it holds is uploaded on SIGTERM: one chunk, well within the default grace.
	ct := &pod.Containers[0]
	ct.Command = append(ct.Command[:1], append(args, ct.Command[1:]...)...)
	vols, mounts, more := BackupStore(Store{b.CredentialsSecret, b.VolumeClaimName, encryptionName(b.Encryption)})
	cvols, cmounts, cmore := CopyStore(b)
	ct.Command = append(append(ct.Command, more...), cmore...)
	ct.VolumeMounts = append(append(ct.VolumeMounts, mounts...), cmounts...)
	pod.Volumes = append(append(pod.Volumes, vols...), cvols...)
	if b.VolumeClaimName != "" {
		pod.SecurityContext.FSGroup = ptr(int64(65532))
	}
	// Memory is bounded by the chunk size (4 MiB of keys and values held at most), not the database's.
	// GOMEMLIMIT keeps the Go heap near that bound after a full snapshot's stream (measured: anonymous
	// memory 132 MiB after a snapshot without it, 60 MiB with it; docs/performance.md).
	followerResources(ct)
	return followerSet(n, n.BackupWriter(), api.ComponentBackupWriter, 1, pod)
}

// followerResources: a pod that follows a stream (the writer, a standby's applier) holds one chunk at a
// time, bounded by the chunk size (4 MiB of keys and values), not the database's.
func followerResources(ct *corev1.Container) {
	ct.Env = append(ct.Env, corev1.EnvVar{Name: "GOMEMLIMIT", Value: "64MiB"})
	ct.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
}

// followerSet is a one-pod StatefulSet of an ops pod.
func followerSet(n api.Names, name, component string, replicas int32, pod corev1.PodSpec) *appsv1.StatefulSet {
	labels := n.ObjectLabels(component)
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: meta(n, name, component),
		Spec: appsv1.StatefulSetSpec{
			Replicas:       ptr(replicas),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
			// The peer Service's selector is the members': the pod gets no DNS record there.
			ServiceName: n.PeerService(),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       pod,
			},
		},
	}
}
