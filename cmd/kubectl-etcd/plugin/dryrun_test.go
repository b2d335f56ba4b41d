package plugin

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/etcdhook/etcdhook/api"
)

// dryRunWorld is a cluster with a continuous backup writer, and a Job controller that finishes the dry
// run's Job (succeeded or failed) with log as its pod's output.
func dryRunWorld(t *testing.T, succeed bool, log string) (*testEnv, *fake.Clientset, *[]*batchv1.Job) {
	t.Helper()
	writer := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "demo-backup-writer", Namespace: "prod"},
		Spec: appsv1.StatefulSetSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/component": "backup-writer"}},
			Spec: corev1.PodSpec{ServiceAccountName: "demo-backup", Containers: []corev1.Container{{Name: "etcdhook", Image: "etcdhook:dev",
				Command: []string{api.HookBinary, "backup-follow", "--cluster=demo", "--namespace=prod", "--cluster-uid=u1",
					"--destination=s3://b/p?endpoint=http://minio:9000", "--lease=demo-backup", "--credentials-dir=/var/run/etcdhook/backup-credentials"},
				Env:          []corev1.EnvVar{{Name: "GOMEMLIMIT", Value: "64MiB"}},
				Resources:    corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "backup-credentials", MountPath: "/var/run/etcdhook/backup-credentials"}}}},
				Volumes: []corev1.Volume{{Name: "backup-credentials"}}},
		}}}
	kube := fake.NewClientset(writer)
	var created []*batchv1.Job
	kube.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		j := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job)
		created = append(created, j.DeepCopy())
		done := j.DeepCopy()
		if succeed {
			done.Status.Succeeded = 1
		} else {
			done.Status.Failed = 1
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-x7k2p", Namespace: "prod", Labels: map[string]string{"job-name": j.Name}},
			Spec: j.Spec.Template.Spec}
		require.NoError(t, kube.Tracker().Add(pod))
		return true, done, kube.Tracker().Create(a.GetResource(), done, "prod")
	})
	cluster := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": api.APIVersion, "kind": api.Kind,
		"metadata": map[string]any{"name": "demo", "namespace": "prod", "uid": "u1"},
		"spec":     map[string]any{"size": int64(3), "backup": map[string]any{"destination": "s3://b/p?endpoint=http://minio:9000"}},
		"status":   map[string]any{"backup": map[string]any{"lastSnapshot": "s3://b/p/prod/demo/20260101T110000Z-r4242.db?endpoint=http://minio:9000"}},
	}}
	te := newTestEnv(newDynamic(cluster), kube)
	te.clients.Logs = func(ctx context.Context, ns, pod, container string) (string, error) {
		require.True(t, strings.HasPrefix(pod, "demo-restore-dry-run-"), pod)
		return log, nil
	}
	return te, kube, &created
}

// restore --dry-run runs the restore into scratch space in a Job with the writer's store access, prints
// what the result would hold, and touches nothing of the cluster: no annotation, its Job deleted.
func TestRestoreDryRun(t *testing.T) {
	te, kube, created := dryRunWorld(t, true, `{"level":"INFO","msg":"restored"}
{"snapshot":"s3://b/p/prod/demo/20260101T110000Z-r4242.db?endpoint=http://minio:9000","revision":9876,"time":"2026-01-01T11:42:00.5Z","keys":1234,"chunks":12,"size":2097152,"sha256":"ab"}
`)
	require.Equal(t, 0, te.run("restore", "demo", "--in-place", "--dry-run", "--to-time", "2026-01-01T12:42:00+01:00"), te.err.String())
	require.Len(t, *created, 1)
	j := (*created)[0]
	require.True(t, strings.HasPrefix(j.Name, "demo-restore-dry-run-"))
	require.NotContains(t, j.Labels, "app.kubernetes.io/component", "labelled as none of the cluster's children")
	pod := j.Spec.Template.Spec
	require.Equal(t, "demo-backup", pod.ServiceAccountName, "the writer's account")
	ct := pod.Containers[0]
	require.Equal(t, []string{api.HookBinary, "restore", "--verify-only", "--from=s3://b/p/latest?endpoint=http://minio:9000", "--cluster=demo", "--namespace=prod",
		"--data-dir=/scratch/data", "--name=dry-run", "--peer-url=http://127.0.0.1:2380", "--timeout=30m0s", "--cluster-uid=u1",
		"--to-time=2026-01-01T11:42:00Z", "--credentials-dir=/var/run/etcdhook/backup-credentials"}, ct.Command)
	require.Empty(t, ct.Resources.Limits, "a replay is not held to the writer's memory limit")
	require.Empty(t, ct.Env)
	require.Contains(t, ct.VolumeMounts, corev1.VolumeMount{Name: "dry-run-scratch", MountPath: "/scratch"})
	require.Contains(t, ct.VolumeMounts, corev1.VolumeMount{Name: "backup-credentials", MountPath: "/var/run/etcdhook/backup-credentials"})
	require.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
	out := te.out.String()
	require.Contains(t, out, "revision  9876")
	require.Contains(t, out, "time      2026-01-01T11:42:00.5Z")
	require.Contains(t, out, "keys      1234")
	require.Contains(t, out, "chunks    12")
	jobs, err := kube.BatchV1().Jobs("prod").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, jobs.Items, "the dry run's Job is deleted")
	obj, err := te.clients.Dynamic.Resource(GVR).Namespace("prod").Get(context.Background(), "demo", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, obj.GetAnnotations(), "nothing asked of the cluster")
}

// A dry run whose restore would be refused says why, from the Job's log.
func TestRestoreDryRunRefused(t *testing.T) {
	te, _, _ := dryRunWorld(t, false, "etcdhook restore: no snapshot: the backups reach revision 5000 after snapshot x (revision 4242), not 7000 (its end)\n")
	require.Equal(t, 1, te.run("restore", "demo", "--in-place", "--dry-run", "--to-revision", "7000"))
	require.Contains(t, te.err.String(), "the restore would be refused or fail: no snapshot: the backups reach revision 5000")
	require.Empty(t, te.out.String())
}

// Without a writer or a backup CronJob, nothing in the cluster reaches the store: said, no Job created.
func TestRestoreDryRunWithoutBackupPods(t *testing.T) {
	cluster := &unstructured.Unstructured{Object: map[string]any{"apiVersion": api.APIVersion, "kind": api.Kind,
		"metadata": map[string]any{"name": "demo", "namespace": "prod"}, "spec": map[string]any{}}}
	kube := fake.NewClientset()
	te := newTestEnv(newDynamic(cluster), kube)
	require.Equal(t, 1, te.run("restore", "demo", "--in-place", "--dry-run", "--from", "s3://b/p/prod/demo/x-r1.db"))
	require.Contains(t, te.err.String(), "neither a continuous backup writer (demo-backup-writer) nor a backup CronJob (demo-backup)")
	jobs, _ := kube.BatchV1().Jobs("prod").List(context.Background(), metav1.ListOptions{})
	require.Empty(t, jobs.Items)
}
