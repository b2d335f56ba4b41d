package sync

import (
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// Backup children (docs/design/16-backup-restore.md §16): the CronJob of a schedule, one Job per etcd.io/backup-now
// token, the backup Lease the Jobs report on, and the account they run as. All are rendered from the
// applied spec, so a backup change waits for a step in flight like any other, and an invalid one
// changes nothing.

// backupJobDeadlineSeconds bounds one backup attempt: a multi-gigabyte database streams in minutes.
const backupJobDeadlineSeconds = 2 * 3600

// backupToken is the etcd.io/backup-now token asked for, "" when none.
func (p *plan) backupToken() string {
	return strings.TrimSpace(p.f.parent.Annotations[api.AnnBackupNow])
}

// backupObjects are the backup children, none without spec.backup.
func (p *plan) backupObjects() []any {
	b := p.spec.Backup
	if b == nil {
		return nil
	}
	n := p.f.names
	var out []any
	out = append(out, p.backupRBAC()...)
	// The Lease carries no hook fields: the Jobs merge-patch their reports into its annotations.
	out = append(out, &coordv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: p.meta(n.BackupName(), api.ComponentBackup),
	})
	if b.Schedule != "" && p.f.obs.CronJobsDeclared {
		job := p.backupJob(n.BackupName(), "")
		var suspend *bool
		if p.restoring {
			// The members are down on purpose (inplace.go): a run would only fail.
			suspend = ptr(true)
		}
		out = append(out, &batchv1.CronJob{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
			ObjectMeta: job.ObjectMeta,
			Spec: batchv1.CronJobSpec{
				Schedule: b.Schedule,
				Suspend:  suspend,
				// The schedule is UTC whatever the controller manager's zone.
				TimeZone: ptr("Etc/UTC"),
				// One backup at a time; a missed run is started up to 5 minutes late, else skipped.
				ConcurrencyPolicy:          batchv1.ForbidConcurrent,
				StartingDeadlineSeconds:    ptr(int64(300)),
				SuccessfulJobsHistoryLimit: ptr(int32(1)),
				FailedJobsHistoryLimit:     ptr(int32(1)),
				JobTemplate: batchv1.JobTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: job.Labels},
					Spec:       job.Spec,
				},
			},
		})
	}
	token := p.backupToken()
	if token != "" {
		// Kept while the annotation holds the token: one Job, hence one backup, per token. Finished
		// Jobs stay (their outcome is the status), and go with the next token.
		out = append(out, p.backupJob(n.BackupJob(token), token))
	}
	// An earlier token's Job still running is kept until it finishes: a new token must not kill a
	// backup half-way (its snapshot would be left without a manifest).
	for _, name := range sortedKeys(p.f.obs.Jobs) {
		j := p.f.obs.Jobs[name]
		old := jobArg(j, "--token=")
		if old == "" || old == token || name != n.BackupJob(old) {
			continue
		}
		if state, _ := jobStatus(j); state == jobActive {
			out = append(out, p.backupJob(name, old))
		}
	}
	return out
}

// jobArg is the value of a --flag= argument of a Job's container command, "" when absent.
func jobArg(j *batchv1.Job, prefix string) string {
	cs := j.Spec.Template.Spec.Containers
	if len(cs) == 0 {
		return ""
	}
	for _, a := range cs[0].Command {
		if v, ok := strings.CutPrefix(a, prefix); ok {
			return v
		}
	}
	return ""
}

// backupJob is one backup run: the scheduled template (token "") or an on-demand Job.
func (p *plan) backupJob(name, token string) *batchv1.Job {
	n, b := p.f.names, p.spec.Backup
	args := []string{"backup",
		"--cluster=" + n.Cluster,
		"--namespace=" + n.Namespace,
		"--cluster-uid=" + p.f.uid,
		"--endpoints=" + n.ClientEndpoint(),
		"--destination=" + b.Destination,
		"--lease=" + n.BackupName(),
		fmt.Sprintf("--timeout=%ds", backupJobDeadlineSeconds-60),
	}
	if k := b.Retention.KeepLast; k != nil {
		args = append(args, "--keep-last="+strconv.Itoa(int(*k)))
	}
	if a := b.Retention.MaxAge; a != nil {
		args = append(args, "--max-age="+a.Duration.String())
	}
	if token != "" {
		args = append(args, "--token="+token)
	}
	j := p.job(name, "backup", n.BackupName(), true, nil)
	reason := "scheduled-backup"
	if token != "" {
		reason = "backup-now"
	}
	j.Labels = n.ObjectLabels(api.ComponentBackup)
	j.Annotations = map[string]string{api.AnnJobReason: reason}
	j.Spec.Template.Labels = n.ObjectLabels(api.ComponentBackup)
	// A store's hiccup is retried by the Job (with the Job controller's backoff); each attempt
	// reports on the backup Lease.
	j.Spec.BackoffLimit = ptr(int32(2))
	j.Spec.ActiveDeadlineSeconds = ptr(int64(backupJobDeadlineSeconds))
	c := &j.Spec.Template.Spec.Containers[0]
	c.Command = append(c.Command[:1], append(args, c.Command[1:]...)...)
	vols, mounts, more := backupStore(b.CredentialsSecret, b.VolumeClaimName)
	c.Command = append(c.Command, more...)
	c.VolumeMounts = append(c.VolumeMounts, mounts...)
	pod := &j.Spec.Template.Spec
	pod.Volumes = append(pod.Volumes, vols...)
	if b.VolumeClaimName != "" {
		// The claim's files belong to the backup user's group.
		pod.SecurityContext.FSGroup = ptr(int64(65532))
	}
	return j
}

// backupStore is what a pod needs to reach a store: the credentials Secret and a file destination's
// claim, as volumes, mounts and the flags that point the command at them.
func backupStore(secret, claim string) (vols []corev1.Volume, mounts []corev1.VolumeMount, args []string) {
	if secret != "" {
		args = append(args, "--credentials-dir="+api.BackupCredentialsDir)
		vols = append(vols, corev1.Volume{Name: "backup-credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: secret, DefaultMode: ptr(int32(0o444)), // read by 65532 only, as the client Secret
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "backup-credentials", MountPath: api.BackupCredentialsDir, ReadOnly: true})
	}
	if claim != "" {
		args = append(args, "--file-root="+api.BackupMount)
		vols = append(vols, corev1.Volume{Name: "backup-volume", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: "backup-volume", MountPath: api.BackupMount})
	}
	return vols, mounts, args
}

// backupRBAC: the backup Jobs patch only their Lease and post Events; etcd is reached with the
// client certificate, the store with the credentials Secret (mounted, never read through the API).
func (p *plan) backupRBAC() []any {
	n := p.f.names
	name := n.BackupName()
	return []any{
		&corev1.ServiceAccount{
			TypeMeta:                     metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta:                   p.meta(name, api.ComponentBackup),
			AutomountServiceAccountToken: ptr(false),
		},
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: p.meta(name, api.ComponentBackup),
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
				// A merge patch of two annotations: no read needed.
				ResourceNames: []string{name}, Verbs: []string{"patch"},
			}, eventsRule},
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: p.meta(name, api.ComponentBackup),
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: n.Namespace}},
		},
	}
}
