package render

import (
	"fmt"
	"sort"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// Deadlines and timeouts of the Jobs. Each command's own timeout ends well before its Job's deadline,
// so that it stops between steps rather than being killed in one.
const (
	RemoveJobDeadlineSeconds = 300
	// GrowJobDeadlineSeconds: a cloud volume can take minutes to grow, and the Job waits for it.
	GrowJobDeadlineSeconds = 900
	// GrowRestartAfter: how long a claim may report FileSystemResizePending before its Job restarts the
	// pod (drivers that grow file systems online clear it within seconds).
	GrowRestartAfter = "2m0s"
	// RestoreJobDeadlineSeconds bounds one restore Job: a multi-gigabyte snapshot downloads in minutes;
	// the restore's own timeout ends it restoreJobMarginSeconds before (a download or restore cut short
	// by the timeout stops before the old data is touched; the deadline's kill could land between the
	// last steps).
	RestoreJobDeadlineSeconds = 2 * 3600
	restoreJobMarginSeconds   = 15 * 60
	// restoreScratch is where the verify Job downloads and restores the snapshot.
	restoreScratch = "/scratch"
)

// Jobs renders the Jobs by name, so that a carried Job and a new one list the same whichever sync made
// them; a name asked twice renders once.
func Jobs(d *Desired) []*batchv1.Job {
	type named struct {
		name string
		job  steps.Job
	}
	js := make([]named, len(d.Jobs))
	for i, j := range d.Jobs {
		js[i] = named{j.Name(d.Names), j}
	}
	sort.SliceStable(js, func(a, b int) bool { return js[a].name < js[b].name })
	out := make([]*batchv1.Job, 0, len(js))
	seen := map[string]bool{}
	for _, j := range js {
		if !seen[j.name] {
			seen[j.name] = true
			out = append(out, renderJob(d, j.name, j.job))
		}
	}
	return out
}

// renderJob renders j, named name (j.Name, worked out once by Jobs).
func renderJob(d *Desired, name string, j steps.Job) *batchv1.Job {
	n := d.Names
	switch j.Kind {
	case steps.JobRemove:
		args := []string{"member", "remove",
			"--id=" + j.MemberID,
			"--peer-url=" + j.PeerURL,
			"--reason=" + j.Reason,
			"--endpoints=" + j.Endpoints,
			// For its Event on the EtcdCluster (kubectl describe lists events by the object's UID).
			"--cluster-uid=" + d.ClusterUID,
			fmt.Sprintf("--timeout=%ds", RemoveJobDeadlineSeconds-30),
		}
		// An API token only to post its Event (MemberRemoved); the removal itself talks to etcd alone.
		return opsJob(d, name, j.Reason, n.OpsAccount(), args)
	case steps.JobDeleteVolume:
		args := []string{"pvc", "delete",
			"--claim=" + n.PVC(j.Ordinal),
			"--namespace=" + n.Namespace,
			"--cluster-uid=" + d.ClusterUID,
			"--peer-url=" + n.PeerURL(j.Ordinal),
			"--pod=" + n.Pod(j.Ordinal),
			"--endpoints=" + j.Endpoints,
			fmt.Sprintf("--timeout=%ds", RemoveJobDeadlineSeconds-30),
		}
		return opsJob(d, name, "volume-of-removed-member", n.OpsAccount(), args)
	case steps.JobGrowVolume:
		args := []string{"pvc", "grow",
			"--claim=" + n.PVC(j.Ordinal),
			"--namespace=" + n.Namespace,
			"--cluster-uid=" + d.ClusterUID,
			"--size=" + j.Size.String(),
			"--pod=" + n.Pod(j.Ordinal),
			"--peer-url=" + n.PeerURL(j.Ordinal),
			"--endpoints=" + j.Endpoints,
			"--restart-after=" + GrowRestartAfter,
			fmt.Sprintf("--timeout=%ds", GrowJobDeadlineSeconds-30),
		}
		out := opsJob(d, name, "grow-volume", n.OpsAccount(), args)
		out.Spec.ActiveDeadlineSeconds = ptr(int64(GrowJobDeadlineSeconds))
		failOnRefusal(out)
		return out
	case steps.JobClaimTemplate:
		args := []string{"statefulset", "orphan",
			"--name=" + n.StatefulSet(),
			"--namespace=" + n.Namespace,
			"--uid=" + j.StatefulSetUID,
			"--size=" + j.Size.String(),
			fmt.Sprintf("--timeout=%ds", RemoveJobDeadlineSeconds-30),
		}
		return opsJob(d, name, "claim-template", n.OpsAccount(), args)
	case steps.JobRestoreVerify:
		return verifyJob(d, name, j)
	case steps.JobRestore:
		return restoreJob(d, name, j)
	}
	return carriedJob(d, j.Carried)
}

// failOnRefusal fails j at once when its command exits with api.RestoreExitRefused (a cause another
// attempt would meet again: a snapshot that cannot pass, credentials the store refuses, a claim the
// API will not grow), instead of spending its retries on it; the Job's Failed condition then has the
// reason PodFailurePolicy, by which the hook tells a terminal failure from one that may pass.
func failOnRefusal(j *batchv1.Job) {
	j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action: batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr("etcdhook"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{api.RestoreExitRefused},
		},
	}}}
}

// opsJob is a Job running one etcdhook command (args) under account, with an API token (to post its
// Event), and with the client certificate when the members serve https.
func opsJob(d *Desired, name, reason, account string, args []string) *batchv1.Job {
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	if d.Names.TLS {
		// The client certificate: the built-in client Secret the agents keep, or the user's client-plane
		// Secret (which then has the client auth usage, docs/design/14-tls.md §14.5).
		args = append(args, "--tls-dir="+api.ClientTLSDir)
		if d.Auth != nil && d.Auth.Passwords {
			// etcd takes no user from a certificate it does not require: the Job logs in as root with
			// the root Secret's password (docs/design/20-auth.md §20.2).
			args = append(args, "--password-file="+api.ClientTLSDir+"/"+api.SecretKeyPassword)
		}
		volumes = []corev1.Volume{{Name: "client-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: clientIdentitySecret(d), DefaultMode: ptr(int32(0o444)), // the Job's only user is 65532; without fsGroup 0440 is unreadable
		}}}}
		mounts = []corev1.VolumeMount{{Name: "client-tls", MountPath: api.ClientTLSDir, ReadOnly: true}}
	}
	m := meta(d.Names, name, api.ComponentOps)
	m.Annotations = map[string]string{api.AnnJobReason: reason}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: m,
		Spec: batchv1.JobSpec{
			// One try per Job: a failed attempt stays visible and the hook retries under the next number.
			BackoffLimit:          ptr(int32(0)),
			ActiveDeadlineSeconds: ptr(int64(RemoveJobDeadlineSeconds)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: d.Names.ObjectLabels(api.ComponentOps)},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					ServiceAccountName:           account,
					AutomountServiceAccountToken: ptr(true),
					EnableServiceLinks:           ptr(false),
					SecurityContext:              nonRoot(),
					Containers: []corev1.Container{{
						Name:                     "etcdhook",
						Image:                    d.Image,
						ImagePullPolicy:          d.ImagePullPolicy,
						Command:                  append([]string{api.HookBinary}, args...),
						SecurityContext:          restricted(),
						TerminationMessagePath:   corev1.TerminationMessagePathDefault,
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
						VolumeMounts:             mounts,
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

// carriedJob re-emits an observed Job under the hook's own labels (Jobs are OnDelete children: the
// object only keeps the Job alive, its spec is never updated).
func carriedJob(d *Desired, j *batchv1.Job) *batchv1.Job {
	out := &batchv1.Job{Spec: *j.Spec.DeepCopy()}
	out.APIVersion, out.Kind = "batch/v1", "Job"
	out.ObjectMeta = meta(d.Names, j.Name, api.ComponentOps)
	out.Annotations = map[string]string{api.AnnJobReason: j.Annotations[api.AnnJobReason]}
	return out
}

// restoreJob restores the verified snapshot into ordinal 0's volume while no member runs.
func restoreJob(d *Desired, name string, j steps.Job) *batchv1.Job {
	n, r := d.Names, j.Restore
	args := []string{"--replace", "--data-dir=" + api.DataDir}
	if r.SHA256 != "" {
		// Exactly the snapshot verified: a "latest" that moved on still finds it by its hash.
		args = append(args, "--expect-sha256="+r.SHA256)
	}
	out := restoreJobOf(d, name, r, args)
	c := &out.Spec.Template.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: api.DataMount})
	pod := &out.Spec.Template.Spec
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: n.PVC(0)},
	}})
	// The data volume's files belong to the members' group (the StatefulSet's fsGroup).
	pod.SecurityContext.FSGroup = ptr(int64(65532))
	pod.SecurityContext.FSGroupChangePolicy = ptr(corev1.FSGroupChangeOnRootMismatch)
	// It runs where a member may (dedicated, tainted etcd nodes; a node-local volume binds it to one).
	sc := d.Spec.Scheduling
	pod.NodeSelector, pod.Tolerations, pod.PriorityClassName = sc.NodeSelector, sc.Tolerations, sc.PriorityClassName
	if sc.Affinity != nil && sc.Affinity.NodeAffinity != nil {
		pod.Affinity = &corev1.Affinity{NodeAffinity: sc.Affinity.NodeAffinity.DeepCopy()}
	}
	return out
}

// verifyJob checks the snapshot while the cluster serves: the restore Job's every step but the last,
// into scratch space that goes with its pod.
func verifyJob(d *Desired, name string, j steps.Job) *batchv1.Job {
	out := restoreJobOf(d, name, j.Restore, []string{"--verify-only", "--data-dir=" + restoreScratch + "/data"})
	c := &out.Spec.Template.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "scratch", MountPath: restoreScratch})
	pod := &out.Spec.Template.Spec
	// The snapshot and its restored copy: about twice the database's size on the node's disk.
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	return out
}

// restoreJobOf is what the verify and the restore Job share: the source and its store, the cluster the
// snapshot must belong to, the report on the backup Lease (and the Event) under the backup account, and
// a pod failure policy that ends the Job at once when the snapshot is refused (damaged, missing,
// changed, another cluster's): only a store's or the volume's hiccup is worth another attempt.
func restoreJobOf(d *Desired, name string, r *steps.RestoreJob, more []string) *batchv1.Job {
	n := d.Names
	args := append([]string{"restore",
		"--from=" + r.Request,
		"--cluster=" + n.Cluster,
		"--namespace=" + n.Namespace,
		"--cluster-uid=" + d.ClusterUID,
		"--name=" + n.Pod(0),
		"--peer-url=" + n.PeerURL(0),
		"--token=" + api.RestoreToken(n.Namespace, n.Cluster, d.ClusterUID, r.Key),
		"--lease=" + n.BackupName(),
		"--job=" + name,
		fmt.Sprintf("--timeout=%ds", RestoreJobDeadlineSeconds-restoreJobMarginSeconds),
	}, more...)
	if r.AcceptCluster != "" {
		args = append(args, "--accept-cluster="+r.AcceptCluster)
	}
	if r.Point.Revision > 0 {
		args = append(args, fmt.Sprintf("--to-revision=%d", r.Point.Revision))
	} else if !r.Point.Time.IsZero() {
		args = append(args, "--to-time="+r.Point.Value())
	}
	reason := "restore-from"
	if r.OnQuorumLoss {
		reason = "restore-on-quorum-loss"
	}
	// The backup account: it may patch only the backup Lease (the report) and post Events.
	j := opsJob(d, name, reason, n.BackupName(), nil)
	// No client certificate: the Jobs talk to no member.
	j.Spec.Template.Spec.Volumes, j.Spec.Template.Spec.Containers[0].VolumeMounts = nil, nil
	j.Spec.BackoffLimit = ptr(int32(2))
	j.Spec.ActiveDeadlineSeconds = ptr(int64(RestoreJobDeadlineSeconds))
	failOnRefusal(j)
	c := &j.Spec.Template.Spec.Containers[0]
	c.Command = append([]string{api.HookBinary}, args...)
	var store Store
	if b := d.Spec.Backup; b != nil {
		store = Store{b.CredentialsSecret, b.VolumeClaimName, encryptionName(b.Encryption)}
	}
	if src, err := backup.ParseSource(r.Request); err == nil && src.Destination.Scheme != "file" {
		store.Claim = ""
	}
	claim := store.Claim
	vols, mounts, storeArgs := BackupStore(store)
	c.Command = append(c.Command, storeArgs...)
	c.VolumeMounts = append(c.VolumeMounts, mounts...)
	pod := &j.Spec.Template.Spec
	pod.Volumes = append(pod.Volumes, vols...)
	if claim != "" {
		// The backup claim's files belong to the backup user's group.
		pod.SecurityContext.FSGroup = ptr(int64(65532))
	}
	return j
}
