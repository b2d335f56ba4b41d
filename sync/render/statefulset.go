package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	json "github.com/go-json-experiment/json/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/etcdhook/etcdhook/api"
)

const terminationGracePeriodSeconds = 60

// EtcdArgs are the static etcd flags of a member; the agent appends --initial-cluster and
// --initial-cluster-state, which only it can decide. With TLS both planes are https with the member's
// certificate (written by its agent into api.TLSDir); the metrics listener stays plain HTTP on loopback,
// where the probes read it (it exposes no keys). transition ("" none) is the scheme a TLS switch leaves
// (docs/design/14-tls.md §14.8): the client port then serves both schemes (etcd tells them apart on one
// listener), the URLs advertised keep that scheme, and the agent sets the peer listener's scheme from
// the member's own peer URL in the member list. s carries the TLS to render (certificates in the
// transition, whichever way it goes).
func EtcdArgs(n api.Names, uid string, s api.ClusterSpec, transition string) []string {
	tls, options := s.Security.TLS, s.Options
	n.TLS = tls.TLSOn()
	host := fmt.Sprintf("$(POD_NAME).%s.%s.svc", n.PeerService(), n.Namespace)
	scheme := n.Scheme()
	listenClient := fmt.Sprintf("%s0.0.0.0:%d", scheme, api.ClientPort)
	if transition != "" {
		scheme = transition + "://"
		listenClient = fmt.Sprintf("http://0.0.0.0:%d,https://0.0.0.0:%d", api.ClientPort, api.ClientPort)
	}
	args := []string{
		"--name=$(POD_NAME)",
		"--data-dir=" + api.DataDir,
		fmt.Sprintf("--listen-peer-urls=%s0.0.0.0:%d", scheme, api.PeerPort),
		"--listen-client-urls=" + listenClient,
		fmt.Sprintf("--listen-metrics-urls=http://127.0.0.1:%d", api.EtcdMetricsPort),
		fmt.Sprintf("--advertise-client-urls=%s%s:%d", scheme, host, api.ClientPort),
		fmt.Sprintf("--initial-advertise-peer-urls=%s%s:%d", scheme, host, api.PeerPort),
		"--initial-cluster-token=" + api.Token(n.Namespace, n.Cluster, uid),
	}
	if n.TLS {
		c, p := api.TLSClientDir+"/", api.TLSPeerDir+"/"
		args = append(args, "--cert-file="+c+"tls.crt", "--key-file="+c+"tls.key")
		if tls.ClientAuth() {
			// etcd asks every client for a certificate whenever it has a trusted CA file, whatever
			// --client-cert-auth says: without client auth (password logins, docs/design/20-auth.md §20.4)
			// a client without a certificate must get through the handshake.
			args = append(args, "--trusted-ca-file="+c+"ca.crt")
		}
		args = append(args,
			fmt.Sprintf("--client-cert-auth=%t", tls.ClientAuth()),
			"--peer-cert-file="+p+"tls.crt", "--peer-key-file="+p+"tls.key", "--peer-trusted-ca-file="+p+"ca.crt",
			"--peer-client-cert-auth=true",
		)
	}
	// Compaction is always on (docs/design/15-maintenance.md §15.1): without it history grows until NOSPACE.
	c := s.Maintenance.Compaction
	args = append(args, "--auto-compaction-mode="+c.Mode, "--auto-compaction-retention="+c.Retention)
	keys := make([]string, 0, len(options))
	for k := range options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, fmt.Sprintf("--%s=%s", k, options[k]))
	}
	return args
}

// PodTemplate is the members' pod template. The decision hashes it (TemplateHash) to tell which pods
// run it: it reads only the spec, the names and Template.TLS and Transition, never the hash itself.
func PodTemplate(d *Desired) corev1.PodTemplateSpec {
	s, n := d.Spec, d.Names
	s.Security.TLS = d.Template.TLS
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: path, Port: intstr.FromInt32(api.ProbePort), Scheme: corev1.URISchemeHTTP,
			}},
			PeriodSeconds: period, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: failures,
		}
	}
	command := []string{api.AgentBinary, "agent", "--config=" + api.AgentConfigPath}
	transition := d.Template.Transition
	if transition != "" {
		command = append(command, api.AgentFlagTLSTransition+transition)
	}
	command = append(append(command, "--", api.EtcdBinary), EtcdArgs(n, d.ClusterUID, s, transition)...)
	etcd := corev1.Container{
		Name:            "etcd",
		Image:           fmt.Sprintf("%s:v%s", s.Repository, s.Version),
		ImagePullPolicy: d.ImagePullPolicy,
		Command:         command,
		Env: []corev1.EnvVar{
			fieldEnv("POD_NAME", "metadata.name"),
			fieldEnv("POD_NAMESPACE", "metadata.namespace"),
			fieldEnv("POD_UID", "metadata.uid"),
		},
		Ports: []corev1.ContainerPort{
			{Name: "client", ContainerPort: api.ClientPort, Protocol: corev1.ProtocolTCP},
			{Name: "peer", ContainerPort: api.PeerPort, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: api.ProbePort, Protocol: corev1.ProtocolTCP},
		},
		// /livez answers on leader, follower and learner and does not need quorum; /readyz keeps
		// learners and members without quorum out of the client Service (docs/design/08-safety-rules.md §8.14). No
		// startup probe: until etcd has answered once the agent answers /livez itself (a long WAL
		// replay or join is never killed), and a startup probe's period held back readiness, and so
		// every step, by up to 10 s. Readiness is probed every second: the hook waits for it before
		// each next step (docs/design/07-steps.md §7.4).
		LivenessProbe:            probe("/livez", 10, 3),
		ReadinessProbe:           probe("/readyz", api.ReadinessPeriodSeconds, api.ReadinessFailures),
		SecurityContext:          restricted(),
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts: []corev1.VolumeMount{
			{Name: "data", MountPath: api.DataMount},
			{Name: "agent", MountPath: api.AgentDir, ReadOnly: true},
			{Name: "config", MountPath: api.ConfigDir, ReadOnly: true},
		},
	}
	if s.Security.TLS.TLSOn() {
		// The pod IP goes into the member certificate: clients that dial a pod directly verify it.
		// Only with TLS, so that a plaintext cluster's template (and its pods) stay as they were.
		etcd.Env = append(etcd.Env, fieldEnv("POD_IP", "status.podIP"))
		etcd.VolumeMounts = append(etcd.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: api.TLSDir})
		// A user's Secrets are mounted for the agent to check, never where etcd reads (docs/design/14-tls.md §14.5).
		for _, sec := range userSecretsOf(s.Security.TLS) {
			etcd.VolumeMounts = append(etcd.VolumeMounts, corev1.VolumeMount{Name: sec.volume, MountPath: sec.dir, ReadOnly: true})
		}
	}
	if s.Resources != nil {
		etcd.Resources = *s.Resources.DeepCopy()
	}
	// A restored cluster's seed, or a standby's, reads the snapshot with these (docs/design/16-backup-restore.md
	// §16.4); spec.restore and spec.standby are set at creation, so this never rolls a running cluster.
	var restoreVolumes []corev1.Volume
	if r, _ := s.SeedRestore(); r != nil {
		vols, mounts, _ := BackupStore(Store{r.CredentialsSecret, r.VolumeClaimName, encryptionName(r.Encryption)})
		restoreVolumes = vols
		etcd.VolumeMounts = append(etcd.VolumeMounts, mounts...)
	}
	install := corev1.Container{
		Name:                     "install-agent",
		Image:                    d.Image,
		ImagePullPolicy:          d.ImagePullPolicy,
		Command:                  []string{api.HookBinary, "install", api.AgentBinary},
		SecurityContext:          restricted(),
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts:             []corev1.VolumeMount{{Name: "agent", MountPath: api.AgentDir}},
	}
	volumes := []corev1.Volume{
		{Name: "agent", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: n.ConfigMap()},
			Items:                []corev1.KeyToPath{{Key: api.ConfigKeyAgent, Path: api.ConfigKeyAgent}},
			DefaultMode:          ptr(int32(0o444)),
		}}},
	}
	if s.Security.TLS.TLSOn() {
		// Memory-backed: the member's private key never reaches a disk.
		volumes = append(volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("1Mi")),
		}}})
		for _, sec := range userSecretsOf(s.Security.TLS) {
			volumes = append(volumes, corev1.Volume{Name: sec.volume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: sec.name, DefaultMode: ptr(int32(0o440)),
			}}})
		}
	}
	volumes = append(volumes, restoreVolumes...)
	if s.Storage.EmptyDir != nil {
		volumes = append(volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: s.Storage.EmptyDir.DeepCopy()}})
	}
	sc := s.Scheduling
	affinity := sc.Affinity
	if affinity == nil {
		// Soft spreading: one member per node when the cluster has the nodes, never unschedulable.
		affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100,
				PodAffinityTerm: corev1.PodAffinityTerm{
					LabelSelector: &metav1.LabelSelector{MatchLabels: n.Labels()},
					TopologyKey:   "kubernetes.io/hostname",
				},
			}},
		}}
	}
	labels := n.Labels()
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			ServiceAccountName:            n.MemberAccount(),
			AutomountServiceAccountToken:  ptr(true),
			EnableServiceLinks:            ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(terminationGracePeriodSeconds)),
			RestartPolicy:                 corev1.RestartPolicyAlways,
			DNSPolicy:                     corev1.DNSClusterFirst,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:        ptr(true),
				RunAsUser:           ptr(int64(65532)),
				RunAsGroup:          ptr(int64(65532)),
				FSGroup:             ptr(int64(65532)),
				FSGroupChangePolicy: ptr(corev1.FSGroupChangeOnRootMismatch),
				SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			InitContainers:            []corev1.Container{install},
			Containers:                []corev1.Container{etcd},
			Volumes:                   volumes,
			Affinity:                  affinity,
			Tolerations:               sc.Tolerations,
			NodeSelector:              sc.NodeSelector,
			TopologySpreadConstraints: sc.TopologySpreadConstraints,
			PriorityClassName:         sc.PriorityClassName,
		},
	}
}

// TemplateHash names a pod template's revision: the first 8 bytes of the SHA-256 of its JSON.
func TemplateHash(t corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(t) // typed struct: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// StatefulSet is the members' StatefulSet, on the template Template.Hash names.
func StatefulSet(d *Desired) *appsv1.StatefulSet {
	s, n := d.Spec, d.Names
	sts := &appsv1.StatefulSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name: n.StatefulSet(), Namespace: n.Namespace,
			Labels:      n.ObjectLabels(api.ComponentEtcd),
			Annotations: map[string]string{api.AnnTemplateHash: d.Template.Hash},
		},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr(d.Replicas),
			Selector:            &metav1.LabelSelector{MatchLabels: n.Labels()},
			ServiceName:         n.PeerService(),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr(d.Partition)},
			},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			RevisionHistoryLimit: ptr(int32(10)),
			Template:             PodTemplate(d),
		},
	}
	if a := d.Template.SwitchAnnotation; a != "" {
		sts.Annotations[api.AnnTLSSwitch] = a
	}
	if d.Bootstrap != "" {
		sts.Annotations[api.AnnBootstrap] = d.Bootstrap
	}
	if s.Storage.EmptyDir == nil {
		claimLabels := n.Labels()
		claimLabels[api.LabelClusterUID] = d.ClusterUID
		sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: claimLabels},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: s.Storage.StorageClassName,
				VolumeMode:       ptr(corev1.PersistentVolumeFilesystem),
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceStorage: s.Storage.Size.DeepCopy(),
				}},
			},
		}}
	}
	// Immutable fields come from the live object: an update that changed them would fail forever.
	if obs := d.Live; obs != nil {
		sts.Spec.VolumeClaimTemplates = obs.Spec.VolumeClaimTemplates
		sts.Spec.ServiceName = obs.Spec.ServiceName
		sts.Spec.Selector = obs.Spec.Selector
		sts.Spec.PodManagementPolicy = obs.Spec.PodManagementPolicy
	}
	return sts
}
