package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
)

// A restore's dry run (issue 27): what the result would hold (snapshot, revision, time, keys), before
// anything is touched. `etcdhook restore --verify-only` does every step of a restore into scratch
// space; it runs in a Job of its own, built from the pod of the cluster's continuous backup writer (or
// its backup CronJob): the store is reached with the credentials and flags the cluster's backups use,
// from inside the cluster. Not in the writer's pod: a replay holds the keyspace's index in memory,
// which the writer's limit is not sized for, and the writer must not be the one killed.

// dryRunScratch is where the dry run's Job restores (an emptyDir of its own).
const dryRunScratch = "/scratch"

// DryRunResult is what `etcdhook restore --verify-only` prints on its last line.
type DryRunResult struct {
	Snapshot string    `json:"snapshot"`
	Revision int64     `json:"revision"`
	Time     time.Time `json:"time"`
	Keys     int64     `json:"keys"`
	Chunks   int       `json:"chunks"`
	Size     int64     `json:"size"`
}

// storeTemplate is the pod template whose container reaches the cluster's backup store: the continuous
// backup writer's, else the backup CronJob's.
func storeTemplate(ctx context.Context, c *Clients, cluster string) (*corev1.PodTemplateSpec, error) {
	n := api.Names{Cluster: cluster, Namespace: c.Namespace}
	sts, err := c.Kube.AppsV1().StatefulSets(c.Namespace).Get(ctx, n.BackupWriter(), metav1.GetOptions{})
	if err == nil {
		return &sts.Spec.Template, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	cj, err := c.Kube.BatchV1().CronJobs(c.Namespace).Get(ctx, n.BackupName(), metav1.GetOptions{})
	if err == nil {
		return &cj.Spec.JobTemplate.Spec.Template, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	return nil, fmt.Errorf("%s/%s has neither a continuous backup writer (%s) nor a backup CronJob (%s): a dry run reads the store as the cluster's backups do (spec.backup with continuous or a schedule)",
		c.Namespace, cluster, n.BackupWriter(), n.BackupName())
}

// storeFlag is the value of flag (--destination and the like) on a backup pod's command, "" if absent.
func storeFlag(command []string, flag string) string {
	for _, a := range command {
		if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
			return v
		}
	}
	return ""
}

// dryRunJob is the Job that runs the dry run: the template's pod (its account, image, security context
// and store volumes), its command replaced, without its memory limit, with scratch space. Labelled as
// none of the cluster's children (no controller adopts it), deleted by the plugin when done and by its
// TTL otherwise.
func dryRunJob(t *corev1.PodTemplateSpec, name, cluster string, cmd []string, deadline time.Duration) *batchv1.Job {
	pod := *t.Spec.DeepCopy()
	pod.RestartPolicy = corev1.RestartPolicyNever
	ct := &pod.Containers[0]
	ct.Command = cmd
	ct.Resources = corev1.ResourceRequirements{}
	ct.Env = nil
	ct.VolumeMounts = append(ct.VolumeMounts, corev1.VolumeMount{Name: "dry-run-scratch", MountPath: dryRunScratch})
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "dry-run-scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	labels := map[string]string{"app.kubernetes.io/managed-by": "kubectl-etcd", "etcd.io/restore-dry-run": cluster}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To(int32(0)),
			ActiveDeadlineSeconds:   ptr.To(int64(deadline.Seconds())),
			TTLSecondsAfterFinished: ptr.To(int32(600)),
			Template:                corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
		},
	}
}

// dryRun runs the restore of from (to the point, if any) as a dry run with cluster's store access,
// waits for it, and prints what the result would hold. uid and accept, for an in-place restore, make it
// refuse another cluster's snapshot as the restore would.
func (o *restoreOpts) runDryRun(ctx context.Context, env Env, c *Clients, cluster, uid string) error {
	t, err := storeTemplate(ctx, c, cluster)
	if err != nil {
		return fmt.Errorf("restore --dry-run: %w", err)
	}
	if o.from == "" {
		d := storeFlag(t.Spec.Containers[0].Command, "destination")
		if d == "" {
			return fmt.Errorf("restore --dry-run: %s/%s's backup pod names no destination: name the snapshot with --from", c.Namespace, cluster)
		}
		if o.from, err = latestOf(d); err != nil {
			return fmt.Errorf("restore --dry-run: %s/%s's backup destination %w", c.Namespace, cluster, err)
		}
	}
	cmd := []string{api.HookBinary, "restore", "--verify-only", "--from=" + o.from, "--cluster=" + cluster, "--namespace=" + c.Namespace,
		"--data-dir=" + dryRunScratch + "/data", "--name=dry-run", "--peer-url=http://127.0.0.1:2380", fmt.Sprintf("--timeout=%s", o.timeout)}
	if uid != "" {
		cmd = append(cmd, "--cluster-uid="+uid)
	}
	if o.acceptCluster != "" {
		cmd = append(cmd, "--accept-cluster="+o.acceptCluster)
	}
	if o.toRevision > 0 {
		cmd = append(cmd, fmt.Sprintf("--to-revision=%d", o.toRevision))
	}
	if o.toTime != "" {
		cmd = append(cmd, "--to-time="+o.toTime)
	}
	for _, f := range []string{"credentials-dir", "file-root", "encryption-dir"} {
		if v := storeFlag(t.Spec.Containers[0].Command, f); v != "" {
			cmd = append(cmd, "--"+f+"="+v)
		}
	}
	name := fmt.Sprintf("%s-restore-dry-run-%s", cluster, rand.String(5))
	jobs := c.Kube.BatchV1().Jobs(c.Namespace)
	if _, err := jobs.Create(ctx, dryRunJob(t, name, cluster, cmd, o.timeout), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("restore --dry-run: creating Job %s: %w", name, err)
	}
	fmt.Fprintf(env.Err, "dry run of the restore of %s in Job %s/%s (nothing of %s is touched)\n", o.from, c.Namespace, name, cluster)
	defer func() {
		// Its pod's logs go with it; the TTL removes it if this delete does not happen.
		_ = jobs.Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	}()
	var job *batchv1.Job
	err = wait.PollUntilContextTimeout(ctx, env.PollInterval, o.timeout, true, func(ctx context.Context) (bool, error) {
		j, err := jobs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		job = j
		return j.Status.Succeeded > 0 || j.Status.Failed > 0, nil
	})
	if err != nil {
		return fmt.Errorf("restore --dry-run: Job %s/%s did not finish: %w", c.Namespace, name, err)
	}
	logs, err := o.jobLogs(ctx, c, name)
	if err != nil {
		return fmt.Errorf("restore --dry-run: Job %s/%s finished, its logs could not be read: %w", c.Namespace, name, err)
	}
	last := lastLine(logs)
	if job.Status.Succeeded == 0 {
		return fmt.Errorf("restore --dry-run: the restore would be refused or fail: %s", dryRunError(last))
	}
	var r DryRunResult
	if err := json.Unmarshal([]byte(last), &r); err != nil || r.Revision == 0 {
		return fmt.Errorf("restore --dry-run: Job %s/%s printed no result (%q)", c.Namespace, name, last)
	}
	fmt.Fprintf(env.Out, "a restore of %s would hold:\n  snapshot  %s\n  revision  %d\n  time      %s\n  keys      %d\n  chunks    %d replayed after the snapshot\n",
		o.from, r.Snapshot, r.Revision, r.Time.UTC().Format(time.RFC3339Nano), r.Keys, r.Chunks)
	return nil
}

// jobLogs is the logs of the Job's pod.
func (o *restoreOpts) jobLogs(ctx context.Context, c *Clients, job string) (string, error) {
	pods, err := c.Kube.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil {
		return "", err
	}
	if len(pods.Items) == 0 {
		return "", fmt.Errorf("no pod of Job %s", job)
	}
	return c.Logs(ctx, c.Namespace, pods.Items[0].Name, pods.Items[0].Spec.Containers[0].Name)
}

// latestOf is destination's newest point as a restore source (<destination>/latest).
func latestOf(destination string) (string, error) {
	d, err := backup.ParseDestination(destination)
	if err != nil {
		return "", err
	}
	return d.ObjectURL(backup.Latest), nil
}

// lastLine is s's last non-empty line.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// dryRunError is the reason a failed dry run logged: its JSON log line's error, or the line itself.
func dryRunError(line string) string {
	var l struct {
		Msg   string `json:"msg"`
		Error string `json:"error"`
	}
	if json.Unmarshal([]byte(line), &l) == nil && (l.Error != "" || l.Msg != "") {
		return strings.TrimSpace(l.Msg + ": " + l.Error)
	}
	return strings.TrimPrefix(line, "etcdhook restore: ")
}
