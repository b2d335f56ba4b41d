package render

import (
	"fmt"
	"strconv"

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

// BackupObjects are the backup children, none without spec.backup.
func BackupObjects(d *Desired) []any {
	b := d.Spec.Backup
	if b == nil || d.Backup == nil {
		return nil
	}
	n := d.Names
	var out []any
	out = append(out, backupRBAC(n)...)
	// The Lease carries no hook fields: the Jobs merge-patch their reports into its annotations.
	out = append(out, &coordv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: meta(n, n.BackupName(), api.ComponentBackup),
	})
	if d.Backup.Schedule {
		job := backupJob(d, n.BackupName(), "")
		var suspend *bool
		if d.Backup.Suspended {
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
	if d.Backup.Writer {
		out = append(out, BackupWriter(d))
	}
	for _, r := range d.Backup.Runs {
		// Kept while the annotation holds the token, or while an earlier token's Job still runs (the
		// decision lists them).
		out = append(out, backupJob(d, r.Name, r.Token))
	}
	return out
}

// backupJob is one backup run: the scheduled template (token "") or an on-demand Job.
func backupJob(d *Desired, name, token string) *batchv1.Job {
	n, b := d.Names, d.Spec.Backup
	args := storeArgs(d, "backup", fmt.Sprintf("--timeout=%ds", backupJobDeadlineSeconds-60))
	if token != "" {
		args = append(args, "--token="+token)
	}
	j := opsJob(d, name, "backup", n.BackupName(), nil)
	reason := "scheduled-backup"
	if token != "" {
		reason = "backup-now"
	}
	j.Labels = n.ObjectLabels(api.ComponentBackup)
	j.Annotations = map[string]string{api.AnnJobReason: reason}
	j.Spec.Template.Labels = n.ObjectLabels(api.ComponentBackup)
	// A store's hiccup is retried by the Job (with the Job controller's backoff); each attempt
	// reports on the backup Lease. A terminal cause (credentials refused, no bucket, no key) fails it
	// at once: the next schedule or token tries again.
	j.Spec.BackoffLimit = ptr(int32(2))
	failOnRefusal(j)
	j.Spec.ActiveDeadlineSeconds = ptr(int64(backupJobDeadlineSeconds))
	c := &j.Spec.Template.Spec.Containers[0]
	c.Command = append(c.Command[:1], append(args, c.Command[1:]...)...)
	vols, mounts, more := BackupStore(Store{b.CredentialsSecret, b.VolumeClaimName, encryptionName(b.Encryption)})
	cvols, cmounts, cmore := CopyStore(b)
	c.Command = append(append(c.Command, more...), cmore...)
	c.VolumeMounts = append(append(c.VolumeMounts, mounts...), cmounts...)
	pod := &j.Spec.Template.Spec
	pod.Volumes = append(append(pod.Volumes, vols...), cvols...)
	if b.VolumeClaimName != "" {
		// The claim's files belong to the backup user's group.
		pod.SecurityContext.FSGroup = ptr(int64(65532))
	}
	return j
}

// storeArgs is a command that reaches the cluster and its destination and reports on the backup Lease
// (the backup Jobs, the continuous backup writer): its own flags after the shared ones, retention last
// (the snapshots either takes are pruned alike).
func storeArgs(d *Desired, cmd string, own ...string) []string {
	n, b := d.Names, d.Spec.Backup
	args := append([]string{cmd,
		"--cluster=" + n.Cluster,
		"--namespace=" + n.Namespace,
		"--cluster-uid=" + d.ClusterUID,
		"--endpoints=" + n.ClientEndpoint(),
		"--destination=" + b.Destination,
		"--lease=" + n.BackupName(),
	}, own...)
	args = append(args, retentionArgs("--", b.Retention)...)
	if c := b.Copy; c != nil {
		args = append(args, "--copy-destination="+c.Destination)
		args = append(args, retentionArgs("--copy-", c.RetentionOf(b))...)
	}
	return args
}

// retentionArgs are r's flags under prefix ("--", or "--copy-" for the second destination).
func retentionArgs(prefix string, r api.BackupRetention) []string {
	var args []string
	if k := r.KeepLast; k != nil {
		args = append(args, prefix+"keep-last="+strconv.Itoa(int(*k)))
	}
	if a := r.MaxAge; a != nil {
		args = append(args, prefix+"max-age="+a.Duration.String())
	}
	for _, tier := range []struct {
		flag string
		v    *int32
	}{{"keep-hourly=", r.KeepHourly}, {"keep-daily=", r.KeepDaily}, {"keep-weekly=", r.KeepWeekly}, {"keep-monthly=", r.KeepMonthly}} {
		if tier.v != nil {
			args = append(args, prefix+tier.flag+strconv.Itoa(int(*tier.v)))
		}
	}
	return args
}

// CopyStore is what a pod needs to reach spec.backup.copy: its credentials Secret, mounted apart from
// the primary's.
func CopyStore(b *api.BackupSpec) (vols []corev1.Volume, mounts []corev1.VolumeMount, args []string) {
	if c := b.Copy; c != nil && c.CredentialsSecret != "" {
		return secretMount(nil, nil, nil, "copy-credentials", c.CredentialsSecret, api.CopyCredentialsDir, "--copy-credentials-dir")
	}
	return nil, nil, nil
}

// secretMount adds a Secret mounted read-only at dir, and the flag that names dir. Mode 0444: the
// files are read by the pod's user (65532) only, as the client Secret's; a file, never an environment
// variable (which a pod's description shows).
func secretMount(vols []corev1.Volume, mounts []corev1.VolumeMount, args []string, name, secret, dir, flag string) ([]corev1.Volume, []corev1.VolumeMount, []string) {
	vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: secret, DefaultMode: ptr(int32(0o444)),
	}}})
	mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: dir, ReadOnly: true})
	return vols, mounts, append(args, flag+"="+dir)
}

// Store is how a pod reaches a store: the credentials Secret, a file destination's claim, and the
// encryption Secret (spec.backup.encryption), each "" when there is none.
type Store struct{ Credentials, Claim, Encryption string }

// encryptionName is e's Secret, "" for none.
func encryptionName(e *api.EncryptionSpec) string {
	if e == nil {
		return ""
	}
	return e.SecretName
}

// BackupStore is what a pod needs to reach a store: the credentials Secret, a file destination's
// claim and the encryption keys, as volumes, mounts and the flags that point the command at them.
func BackupStore(s Store) (vols []corev1.Volume, mounts []corev1.VolumeMount, args []string) {
	if s.Credentials != "" {
		vols, mounts, args = secretMount(vols, mounts, args, "backup-credentials", s.Credentials, api.BackupCredentialsDir, "--credentials-dir")
	}
	if claim := s.Claim; claim != "" {
		args = append(args, "--file-root="+api.BackupMount)
		vols = append(vols, corev1.Volume{Name: "backup-volume", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: "backup-volume", MountPath: api.BackupMount})
	}
	if s.Encryption != "" {
		vols, mounts, args = secretMount(vols, mounts, args, "backup-encryption", s.Encryption, api.BackupEncryptionDir, "--encryption-dir")
	}
	return vols, mounts, args
}

// backupRBAC: the backup Jobs patch only their Lease and post Events; etcd is reached with the
// client certificate, the store with the credentials Secret (mounted, never read through the API).
func backupRBAC(n api.Names) []any {
	name := n.BackupName()
	return []any{
		&corev1.ServiceAccount{
			TypeMeta:                     metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta:                   meta(n, name, api.ComponentBackup),
			AutomountServiceAccountToken: ptr(false),
		},
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: meta(n, name, api.ComponentBackup),
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
				// A merge patch of two annotations: no read needed.
				ResourceNames: []string{name}, Verbs: []string{"patch"},
			}, EventsRule},
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: meta(n, name, api.ComponentBackup),
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: n.Namespace}},
		},
	}
}
