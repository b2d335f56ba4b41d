package sync

import (
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// voterEndpoints are the client URLs of the voters other than skip, for Jobs that talk to etcd.
func (p *plan) voterEndpoints(skip string) string {
	var eps []string
	for _, m := range p.f.members {
		if m.Learner || m.ID == skip {
			continue
		}
		if m.ordinal >= 0 {
			eps = append(eps, p.f.names.ClientURL(m.ordinal))
		} else if m.ClientURL != "" {
			eps = append(eps, m.ClientURL)
		}
	}
	if len(eps) == 0 {
		eps = []string{p.f.names.ClientEndpoint()}
	}
	return strings.Join(eps, ",")
}

func (p *plan) job(name, reason, account string, automount bool, args []string) *batchv1.Job {
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	if p.clientHTTPS() {
		// The client certificate: the built-in client Secret the agents keep, or the user's client-plane
		// Secret (which then has the client auth usage, docs/design/14-tls.md §14.5).
		args = append(args, "--tls-dir="+api.ClientTLSDir)
		volumes = []corev1.Volume{{Name: "client-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: p.clientIdentitySecret(), DefaultMode: ptr(int32(0o444)), // the Job's only user is 65532; without fsGroup 0440 is unreadable
		}}}}
		mounts = []corev1.VolumeMount{{Name: "client-tls", MountPath: api.ClientTLSDir, ReadOnly: true}}
	}
	m := p.meta(name, api.ComponentOps)
	m.Annotations = map[string]string{api.AnnJobReason: reason}
	restricted := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		RunAsNonRoot:             ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: m,
		Spec: batchv1.JobSpec{
			// One try per Job: a failed attempt stays visible and the hook retries under the next number.
			BackoffLimit:          ptr(int32(0)),
			ActiveDeadlineSeconds: ptr(int64(removeJobDeadlineSeconds)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: p.f.names.ObjectLabels(api.ComponentOps)},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					ServiceAccountName:           account,
					AutomountServiceAccountToken: ptr(automount),
					EnableServiceLinks:           ptr(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr(true),
						RunAsUser:      ptr(int64(65532)),
						RunAsGroup:     ptr(int64(65532)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:                     "etcdhook",
						Image:                    p.opts.Image,
						ImagePullPolicy:          p.opts.ImagePullPolicy,
						Command:                  append([]string{api.HookBinary}, args...),
						SecurityContext:          restricted,
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

func (p *plan) removeJob(m *memberView, reason string, attempt int) *batchv1.Job {
	n := p.f.names
	args := []string{"member", "remove",
		"--id=" + m.ID,
		"--peer-url=" + m.PeerURL,
		"--reason=" + reason,
		"--endpoints=" + p.voterEndpoints(m.ID),
		// For its Event on the EtcdCluster (kubectl describe lists events by the object's UID).
		"--cluster-uid=" + p.f.uid,
		fmt.Sprintf("--timeout=%ds", removeJobDeadlineSeconds-30),
	}
	// An API token only to post its Event (MemberRemoved); the removal itself talks to etcd alone.
	j := p.job(n.RemoveJob(m.ID, attempt), reason, n.OpsAccount(), true, args)
	return j
}

func (p *plan) pvcJob(i, attempt int) *batchv1.Job {
	n := p.f.names
	args := []string{"pvc", "delete",
		"--claim=" + n.PVC(i),
		"--namespace=" + n.Namespace,
		"--cluster-uid=" + p.f.uid,
		"--peer-url=" + n.PeerURL(i),
		"--pod=" + n.Pod(i),
		"--endpoints=" + p.voterEndpoints(""),
		fmt.Sprintf("--timeout=%ds", removeJobDeadlineSeconds-30),
	}
	return p.job(n.PVCJob(i, attempt), "volume-of-removed-member", n.OpsAccount(), true, args)
}
