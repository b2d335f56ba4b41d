package api

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/etcdhook/etcdhook/internal/backup"
)

// Group, version and kind of the parent resource.
const (
	Group      = "etcd.io"
	Version    = "v1alpha1"
	Kind       = "EtcdCluster"
	APIVersion = Group + "/" + Version
)

// EtcdCluster is the parent object. Its schema lives in manifests/crd.yaml; the two must agree.
type EtcdCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ClusterSpec   `json:"spec"`
	Status            ClusterStatus `json:"status,omitempty"`
}

// ClusterSpec is what the user asks for. Pointers mark fields the CRD defaults; the hook applies the same
// defaults (Defaulted) because objects written before a default existed, and fixtures, may lack them.
type ClusterSpec struct {
	Size              *int32                       `json:"size,omitempty"`
	Version           string                       `json:"version,omitempty"`
	Repository        string                       `json:"repository,omitempty"`
	Storage           StorageSpec                  `json:"storage,omitempty"`
	Resources         *corev1.ResourceRequirements `json:"resources,omitempty"`
	Scheduling        SchedulingSpec               `json:"scheduling,omitempty"`
	Security          SecuritySpec                 `json:"security,omitempty"`
	AdoptExistingData bool                         `json:"adoptExistingData,omitempty"`
	Options           map[string]string            `json:"options,omitempty"`
	// AllowUnsafeOptions lets options set unsafe-* and experimental-* etcd flags (see UnsafeOption).
	AllowUnsafeOptions bool         `json:"allowUnsafeOptions,omitempty"`
	Timeouts           TimeoutsSpec `json:"timeouts,omitempty"`
	// Paused freezes every change the hook would start: no membership step, no roll, no spec change is
	// adopted; steps already in flight finish (docs/design/06-sync-order.md §6.4). Never part of the recorded spec.
	Paused bool `json:"paused,omitempty"`
	// Maintenance: compaction (rendered as etcd flags).
	Maintenance MaintenanceSpec `json:"maintenance,omitempty"`
	// Backup: scheduled and on-demand snapshots (docs/design/16-backup-restore.md §16); nil: none.
	Backup *BackupSpec `json:"backup,omitempty"`
	// Restore: the snapshot a new cluster starts from; set only when the cluster is created.
	Restore *RestoreSpec `json:"restore,omitempty"`
	// Recovery: what the hook does when a quorum of the voters lost their data (docs/design/19-recovery.md).
	Recovery *RecoverySpec `json:"recovery,omitempty"`
	// Auth: etcd's users and roles, declared (docs/design/20-auth.md); nil: the hook leaves etcd's auth alone.
	Auth *AuthSpec `json:"auth,omitempty"`
	// Network: the cluster's NetworkPolicy (docs/design/15-maintenance.md §15.4).
	Network NetworkSpec `json:"network,omitempty"`
	// Standby: this cluster is a warm standby of another one's backups (docs/design/21-standby.md),
	// set only when the cluster is created; nil: a normal cluster.
	Standby *StandbySpec `json:"standby,omitempty"`
}

// NetworkSpec says who may reach the members' ports. The NetworkPolicy admits, to the peer port, the
// cluster's own members only; to the client port, the members, etcdhook's Jobs of this cluster and
// ClientFrom; to the metrics port (2381), the namespace MetricsNamespace.
type NetworkSpec struct {
	// Policy: render the NetworkPolicy. Unset means on for a new cluster; a running cluster keeps the
	// value it was created with (a cluster created before the field existed has none).
	Policy *bool `json:"policy,omitempty"`
	// ClientFrom: who else may reach the client port (2379), as NetworkPolicy peers (podSelector,
	// namespaceSelector, ipBlock). Unset: every pod of the cluster's namespace.
	ClientFrom []networkingv1.NetworkPolicyPeer `json:"clientFrom,omitempty"`
	// MetricsNamespace: the namespace whose pods may scrape the metrics port. Default "monitoring".
	MetricsNamespace string `json:"metricsNamespace,omitempty"`
}

// PolicyOn says whether the NetworkPolicy is rendered (after Defaulted).
func (n NetworkSpec) PolicyOn() bool { return n.Policy != nil && *n.Policy }

// BackupSpec: where snapshots go, when, and how long they are kept.
type BackupSpec struct {
	// Schedule is a cron schedule (five fields, or @hourly, @daily and the like; UTC) for a CronJob;
	// empty: on-demand backups only (annotation etcd.io/backup-now).
	Schedule string `json:"schedule,omitempty"`
	// Destination: s3://bucket/prefix?endpoint=...&region=...&use_path_style=true, gs://bucket/prefix,
	// or file:///dir inside the claim VolumeClaimName.
	Destination string `json:"destination"`
	// CredentialsSecret holds the store's credentials as keys AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
	// (and AWS_SESSION_TOKEN), or service-account.json; empty: the environment's (workload identity).
	CredentialsSecret string `json:"credentialsSecret,omitempty"`
	// VolumeClaimName: the claim a file:// destination lives on (mounted at /backup).
	VolumeClaimName string `json:"volumeClaimName,omitempty"`
	// Retention: how many snapshots, and how old, are kept.
	Retention BackupRetention `json:"retention,omitempty"`
	// RestoreOnQuorumLoss: when a quorum of the members runs without its data, restore the destination's
	// newest snapshot in place (docs/design/16-backup-restore.md §16.9).
	RestoreOnQuorumLoss bool `json:"restoreOnQuorumLoss,omitempty"`
	// Continuous: besides the full snapshots, a writer that follows every revision after the newest
	// one and uploads it every few seconds, for restores to any revision or time
	// (docs/design/16-backup-restore.md §16.10); nil: off.
	Continuous *ContinuousBackupSpec `json:"continuous,omitempty"`
	// Encryption: snapshots and chunks are encrypted at rest with age, with the keys of this Secret
	// (docs/design/16-backup-restore.md §16.11); nil: stored in the clear. In-place restores read with it too.
	Encryption *EncryptionSpec `json:"encryption,omitempty"`
	// Copy: a second destination (another region's bucket) kept up to date with this one's snapshots
	// and chains, with a retention of its own (docs/design/16-backup-restore.md §16.12); nil: none.
	Copy *BackupCopySpec `json:"copy,omitempty"`
	// StoreAccess: opt-ins to reach the store in ways an editor of the namespace should not get by
	// default (the node's rights, the node's own addresses).
	StoreAccess `json:",inline"`
}

// BackupCopySpec is the second destination: an s3:// or gs:// one (a claim is one place, not another
// region), reached with its own credentials, pruned by its own retention (absent: spec.backup's).
type BackupCopySpec struct {
	Destination       string           `json:"destination"`
	CredentialsSecret string           `json:"credentialsSecret,omitempty"`
	Retention         *BackupRetention `json:"retention,omitempty"`
	StoreAccess       `json:",inline"`
}

// RetentionOf is the copy's retention: its own, else spec.backup's.
func (c *BackupCopySpec) RetentionOf(b *BackupSpec) BackupRetention {
	if r := c.Retention; r != nil && (r.KeepLast != nil || r.MaxAge != nil || r.Tiered()) {
		return *r
	}
	if c.Retention != nil {
		// Said, but empty: as spec.backup's default, never an unbounded bucket.
		return BackupRetention{KeepLast: ptr.To(int32(DefaultBackupKeepLast))}
	}
	return b.Retention
}

// EncryptionSpec names the Secret holding the age keys of backups at rest. The hook never reads it: the
// backup pods mount it.
type EncryptionSpec struct {
	// SecretName: a Secret of the cluster's namespace with the key "identity" (age identities,
	// AGE-SECRET-KEY-1..., one per line: the first encrypts, every one decrypts, so a key is rotated by
	// putting the new one first) and optionally "recipients" (more age1... recipients every backup is
	// encrypted to as well: an offline recovery key).
	SecretName string `json:"secretName"`
}

// ContinuousBackupSpec: how often the continuous backup writer uploads, and how far behind it may fall
// before BackupLagging.
type ContinuousBackupSpec struct {
	// ChunkInterval: the revisions received are uploaded at least this often, the most a restore to the
	// newest point loses while the writer runs. Default 5s; 1s to 1m.
	ChunkInterval *metav1.Duration `json:"chunkInterval,omitempty"`
	// MaxLag: BackupLagging (and the alert EtcdBackupLagging) when the newest restorable point is older
	// than this while the cluster runs. Default 1m; 30s to 24h.
	MaxLag *metav1.Duration `json:"maxLag,omitempty"`
}

// StoreAccess holds the explicit opt-ins of a backup destination or a restore source (issue 24 §5).
type StoreAccess struct {
	// AmbientCredentials: without credentialsSecret, the Jobs and the restoring seed use the
	// credentials their environment gives (the node's instance role, a workload identity). Off, an
	// s3:// or gs:// store needs credentialsSecret: ambient credentials are the node's rights, which an
	// editor of one namespace could otherwise turn on other namespaces' buckets.
	AmbientCredentials bool `json:"ambientCredentials,omitempty"`
	// AllowLocalEndpoint: accept an endpoint on a loopback or link-local address (169.254.0.0/16 holds
	// the clouds' metadata services), a host name "localhost", or an unspecified address.
	AllowLocalEndpoint bool `json:"allowLocalEndpoint,omitempty"`
}

// BackupRetention: the newest KeepLast snapshots are kept, and the newest of each of the last
// KeepHourly hours, KeepDaily days, KeepWeekly weeks and KeepMonthly months (UTC) that have one; none
// older than MaxAge, and never fewer than one. A chain of revisions goes with its snapshot.
type BackupRetention struct {
	KeepLast    *int32           `json:"keepLast,omitempty"`
	MaxAge      *metav1.Duration `json:"maxAge,omitempty"`
	KeepHourly  *int32           `json:"keepHourly,omitempty"`
	KeepDaily   *int32           `json:"keepDaily,omitempty"`
	KeepWeekly  *int32           `json:"keepWeekly,omitempty"`
	KeepMonthly *int32           `json:"keepMonthly,omitempty"`
}

// Tiered says whether a calendar tier is set (then an unset KeepLast keeps none by count).
func (r BackupRetention) Tiered() bool {
	return r.KeepHourly != nil || r.KeepDaily != nil || r.KeepWeekly != nil || r.KeepMonthly != nil
}

// RestoreSpec: the snapshot a new cluster's seed restores before it first starts.
type RestoreSpec struct {
	// From: a snapshot URL (as status.backup.lastSnapshot shows it), a destination followed by /latest
	// (the newest complete snapshot of this cluster's name and namespace), or another cluster's folder
	// followed by /latest (<destination>/<namespace>/<name>/latest: that cluster's newest).
	From string `json:"from"`
	// ToRevision or ToTime (one at most): restore the keyspace as it was at that revision, or at that
	// time (the newest revision the backups hold at or before it), from the newest snapshot at or before
	// it and the continuous backup's chain after it (docs/design/16-backup-restore.md §16.10). Neither:
	// a named snapshot as it is, or /latest's newest snapshot and its chain to its end.
	ToRevision        *int64       `json:"toRevision,omitempty"`
	ToTime            *metav1.Time `json:"toTime,omitempty"`
	CredentialsSecret string       `json:"credentialsSecret,omitempty"`
	VolumeClaimName   string       `json:"volumeClaimName,omitempty"`
	// Encryption: the Secret whose identities open encrypted backups (as spec.backup.encryption).
	Encryption  *EncryptionSpec `json:"encryption,omitempty"`
	StoreAccess `json:",inline"`
}

// MaintenanceSpec holds what keeps a long-running etcd healthy.
type MaintenanceSpec struct {
	Compaction CompactionSpec `json:"compaction,omitempty"`
	// Defrag: scheduled defragmentation passes, one member at a time (docs/design/15-maintenance.md §15.5); nil: none
	// scheduled (the annotation etcd.io/defrag-now still asks for one).
	Defrag *DefragSpec `json:"defrag,omitempty"`
	// Space: storage that never fills (docs/design/15-maintenance.md §15.6); nil: defragment at 70% of
	// the quota, never raise it.
	Space *SpaceSpec `json:"space,omitempty"`
}

// DefragSpec: when a pass runs, and which members it defragments.
type DefragSpec struct {
	// Schedule is a cron schedule (five fields or @daily and the like; UTC) of passes.
	Schedule string `json:"schedule"`
	// MinFreePercent: a scheduled pass defragments a member only when at least this share of its
	// database file is free (dbSize - dbSizeInUse). Default 50.
	MinFreePercent *int32 `json:"minFreePercent,omitempty"`
}

// CompactionSpec is etcd's auto-compaction: without it the keyspace history grows until the backend
// quota is reached and etcd turns read-only (NOSPACE).
type CompactionSpec struct {
	// Mode: periodic (keep Retention of history, a duration such as 1h) or revision (keep Retention
	// revisions). Default periodic.
	Mode string `json:"mode,omitempty"`
	// Retention: a duration for periodic (etcd also reads a bare number as hours), a revision count for
	// revision. Default 1h.
	Retention string `json:"retention,omitempty"`
}

// StorageSpec chooses the member data volume: a PVC per member (default) or an emptyDir for throwaway clusters.
type StorageSpec struct {
	StorageClassName *string                      `json:"storageClassName,omitempty"`
	Size             *resource.Quantity           `json:"size,omitempty"`
	EmptyDir         *corev1.EmptyDirVolumeSource `json:"emptyDir,omitempty"`
}

// SchedulingSpec is copied into the pod template.
type SchedulingSpec struct {
	Affinity                  *corev1.Affinity                  `json:"affinity,omitempty"`
	Tolerations               []corev1.Toleration               `json:"tolerations,omitempty"`
	NodeSelector              map[string]string                 `json:"nodeSelector,omitempty"`
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	PriorityClassName         string                            `json:"priorityClassName,omitempty"`
}

// SecuritySpec holds the TLS settings of both planes.
type SecuritySpec struct {
	TLS TLSSpec `json:"tls,omitempty"`
}

// TLSSpec: TLS on the peer plane (member to member) and the client plane (clients to members).
type TLSSpec struct {
	// Enabled: unset means on for a new cluster; a running cluster keeps the value it was created with
	// (the applied spec), so an object written before TLS existed is never switched by a default.
	Enabled *bool `json:"enabled,omitempty"`
	// Peer: the peer plane's certificate; built-in unless a Secret is named.
	Peer PeerTLSSpec `json:"peer,omitempty"`
	// Client: client plane. Auth (default true) makes etcd require a client certificate.
	Client ClientTLSSpec `json:"client,omitempty"`
	// BuiltIn: lifetimes of the certificates the built-in CA issues (docs/design/14-tls.md §14).
	BuiltIn BuiltInTLSSpec `json:"builtIn,omitempty"`
}

// PeerTLSSpec is the peer plane.
type PeerTLSSpec struct {
	// SecretName: a Secret in cert-manager's layout (tls.crt, tls.key, ca.crt) whose certificate every
	// member presents to the others: usages server and client auth, SANs covering every member's peer
	// host (docs/design/14-tls.md §14.5). Empty: the built-in CA.
	SecretName string `json:"secretName,omitempty"`
}

// ClientTLSSpec is the client plane.
type ClientTLSSpec struct {
	// SecretName: a Secret in cert-manager's layout whose certificate the members serve to clients and
	// the agents and Jobs use as their client certificate: usages server and client auth, SANs covering
	// the members' hosts, the client Service names, localhost and 127.0.0.1; its ca.crt is the CA that
	// client certificates must chain to. Empty: the built-in CA.
	SecretName string `json:"secretName,omitempty"`
	// Auth: etcd requires a client certificate signed by the cluster's CA (--client-cert-auth); false
	// asks for none (under spec.auth, clients then log in with a user name and password).
	Auth *bool `json:"auth,omitempty"`
}

// BuiltInTLSSpec: lifetimes of the built-in CA and its certificates. Member and client certificates are
// replaced at 2/3 of their lifetime; the CA is rotated at 2/3 of its lifetime (docs/design/14-tls.md §14.6).
type BuiltInTLSSpec struct {
	CADuration   *metav1.Duration `json:"caDuration,omitempty"`
	CertDuration *metav1.Duration `json:"certDuration,omitempty"`
	// RotationGrace: how long a CA rotation waits, once the client Secret is issued by the new CA,
	// before it drops the old CA, and how long a rotated user's old password login keeps working
	// (default 2m; 0s..1h): clients reading a Secret from a mounted volume see the change only after the
	// kubelet's next sync. Clients that read it through the API need none.
	RotationGrace *metav1.Duration `json:"rotationGrace,omitempty"`
}

// BuiltInNeeded says whether a plane uses the built-in CA (so the agents keep its Secrets).
func (s TLSSpec) BuiltInNeeded() bool {
	return s.TLSOn() && (s.Peer.SecretName == "" || s.Client.SecretName == "")
}

// TLSOn says whether TLS is on in a defaulted spec.
func (s TLSSpec) TLSOn() bool { return s.Enabled != nil && *s.Enabled }

// ClientAuth says whether etcd requires client certificates in a defaulted spec.
func (s TLSSpec) ClientAuth() bool { return s.TLSOn() && (s.Client.Auth == nil || *s.Client.Auth) }

// TimeoutsSpec bounds how long the hook waits for a step before it acts on its own.
type TimeoutsSpec struct {
	// LearnerPromotionSeconds: a learner not promoted this long after its join was permitted is removed.
	LearnerPromotionSeconds *int32 `json:"learnerPromotionSeconds,omitempty"`
	// DeadMemberSeconds: a voter whose Lease has not been renewed this long, and whose pod is not ready,
	// is removed when the quorum rule allows.
	DeadMemberSeconds *int32 `json:"deadMemberSeconds,omitempty"`
	// LeaveSeconds: a member asked to leave that has not left this long after is removed by a Job.
	LeaveSeconds *int32 `json:"leaveSeconds,omitempty"`
}

// ClusterStatus is written by Metacontroller from the hook's response. Every field is declared in the CRD.
type ClusterStatus struct {
	Phase              string             `json:"phase,omitempty"`
	Message            string             `json:"message,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Bootstrapped       bool               `json:"bootstrapped,omitempty"`
	ClusterID          string             `json:"clusterID,omitempty"`
	Leader             string             `json:"leader,omitempty"`
	CurrentVersion     string             `json:"currentVersion,omitempty"`
	ReadyReplicas      int32              `json:"readyReplicas"`
	Replicas           int32              `json:"replicas"`
	Target             *Target            `json:"target,omitempty"`
	Members            []MemberStatus     `json:"members,omitempty"`
	TLS                *TLSStatus         `json:"tls,omitempty"`
	Backup             *BackupStatus      `json:"backup,omitempty"`
	Restore            *RestoreStatus     `json:"restore,omitempty"`
	Storage            *StorageStatus     `json:"storage,omitempty"`
	Space              *SpaceStatus       `json:"space,omitempty"`
	Recovery           *RecoveryStatus    `json:"recovery,omitempty"`
	Auth               *AuthStatus        `json:"auth,omitempty"`
	Standby            *StandbyStatus     `json:"standby,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// BackupStatus is what the backup Jobs reported on the backup Lease.
type BackupStatus struct {
	LastSuccessTime *metav1.Time `json:"lastSuccessTime,omitempty"`
	// LastSnapshot is the newest snapshot's URL, usable as spec.restore.from.
	LastSnapshot string `json:"lastSnapshot,omitempty"`
	Revision     int64  `json:"revision,omitempty"`
	Size         int64  `json:"size,omitempty"`
	// LastFailureTime and LastFailure: the newest failed attempt, kept after later successes.
	LastFailureTime *metav1.Time `json:"lastFailureTime,omitempty"`
	LastFailure     string       `json:"lastFailure,omitempty"`
	// OnDemand: the backup the etcd.io/backup-now annotation asked for.
	OnDemand *OnDemandBackup `json:"onDemand,omitempty"`
	// Continuous: the continuous backup writer's newest restorable point, with spec.backup.continuous.
	Continuous *ContinuousBackupStatus `json:"continuous,omitempty"`
	// Copy: the last pass that kept spec.backup.copy up to date.
	Copy *BackupCopyStatus `json:"copy,omitempty"`
}

// BackupCopyStatus is the second destination as the last copy pass left it.
type BackupCopyStatus struct {
	// Snapshot (its URL in the copy) and Revision: the newest snapshot the copy holds and the newest
	// revision its chain reaches there; a restore from the copy reaches that far.
	Snapshot string `json:"snapshot,omitempty"`
	Revision int64  `json:"revision,omitempty"`
	// Time: the pass (every 30 s with continuous backup, after each backup otherwise).
	Time *metav1.Time `json:"time,omitempty"`
	// Message: why the last pass failed, empty when it succeeded.
	Message string `json:"message,omitempty"`
}

// ContinuousBackupStatus is what the continuous backup writer last reported.
type ContinuousBackupStatus struct {
	// Snapshot (URL) and ChainStart (its revision): the full snapshot the current chain follows.
	Snapshot   string `json:"snapshot,omitempty"`
	ChainStart int64  `json:"chainStart,omitempty"`
	// Revision and Time: the newest restorable point; spec.restore.toRevision and toTime reach up to
	// these.
	Revision int64        `json:"revision,omitempty"`
	Time     *metav1.Time `json:"time,omitempty"`
	// ReportTime: the writer's last report (it reports every 15 s while it runs).
	ReportTime *metav1.Time `json:"reportTime,omitempty"`
	// Message: the writer's last problem, empty while it uploads.
	Message string `json:"message,omitempty"`
}

// OnDemandBackup is one etcd.io/backup-now token and how its Job fared.
type OnDemandBackup struct {
	Token string `json:"token"`
	Job   string `json:"job"`
	// Phase: Running (from the answer that renders the Job), Succeeded or Failed.
	Phase string `json:"phase"`
}

// RestoreStatus: where a restored cluster's data came from.
type RestoreStatus struct {
	Source string `json:"source"`
	// Snapshot and Revision: the snapshot restored and the revision the restored keyspace is at (the
	// snapshot's, or the point's, or the newest its chain reaches), once the seed reports them.
	Snapshot string `json:"snapshot,omitempty"`
	Revision int64  `json:"revision,omitempty"`
	// ToRevision and ToTime: the point asked (spec.restore's, or the etcd.io/restore-to annotation's);
	// Revision is then the revision the restored keyspace is at.
	ToRevision int64        `json:"toRevision,omitempty"`
	ToTime     *metav1.Time `json:"toTime,omitempty"`
	// Phase: Restoring until the seed has restored, then Restored; Failed when the seed reports that the
	// restore cannot succeed as written (RestoreFailed/RestoreRefused names the field).
	Phase string `json:"phase"`
	// Message: why the seed could not restore yet (RestoreFailed), empty otherwise.
	Message string `json:"message,omitempty"`
	// InPlace: the etcd.io/restore-from annotation asked for this restore over a running cluster's
	// data; ReplacedClusterIDs are the cluster IDs it replaced (docs/design/16-backup-restore.md §16.8).
	InPlace            bool     `json:"inPlace,omitempty"`
	ReplacedClusterIDs []string `json:"replacedClusterIDs,omitempty"`
	// LostMembers: the members that ran without their data when spec.backup.restoreOnQuorumLoss started
	// this restore (empty when the annotation asked for it).
	LostMembers []string `json:"lostMembers,omitempty"`
}

// Point is the point asked, as backup.Point (the zero point without one).
func (r *RestoreStatus) Point() backup.Point {
	p := backup.Point{Revision: r.ToRevision}
	if r.ToTime != nil {
		p.Time = r.ToTime.UTC()
	}
	return p
}

// SetPoint shows p as the point asked.
func (r *RestoreStatus) SetPoint(p backup.Point) {
	r.ToRevision, r.ToTime = p.Revision, nil
	if !p.Time.IsZero() {
		r.ToTime = &metav1.Time{Time: p.Time}
	}
}

// StorageStatus: the member claims against spec.storage.size (docs/design/17-growing-volumes.md §17); absent with emptyDir.
type StorageStatus struct {
	// Size is spec.storage.size in force.
	Size string `json:"size"`
	// Claims counts the member claims; AtSize those that ask for and have at least Size.
	Claims int32 `json:"claims"`
	AtSize int32 `json:"atSize"`
	// Growing names the claim being grown, empty when none.
	Growing string `json:"growing,omitempty"`
	// TemplateSize is the StatefulSet's claim template: the size a new member's claim starts with
	// (it is grown after it joins until the template is re-created at Size).
	TemplateSize string `json:"templateSize,omitempty"`
}

// SpaceStatus is where spec.maintenance.space stands (docs/design/15-maintenance.md §15.6): shown once
// the quota or the storage was raised, or while a member's data asks for room.
type SpaceStatus struct {
	// QuotaBytes: the quota the members are rendered with; SpecQuotaBytes: the spec's.
	QuotaBytes     int64 `json:"quotaBytes"`
	SpecQuotaBytes int64 `json:"specQuotaBytes"`
	// Storage: the claim size raised for the quota, empty while spec.storage.size is in force.
	Storage string `json:"storage,omitempty"`
	// Message: the step taken or waited for, or why none can be.
	Message string `json:"message,omitempty"`
}

// Target is the latched (size, version) the hook is working towards.
type Target struct {
	Size    int32  `json:"size"`
	Version string `json:"version"`
}

// MemberStatus is one etcd member as the membership truth shows it.
type MemberStatus struct {
	Name      string `json:"name"`
	ID        string `json:"id"`
	PeerURL   string `json:"peerURL"`
	ClientURL string `json:"clientURL,omitempty"`
	Role      string `json:"role"`
	Healthy   bool   `json:"healthy"`
	Version   string `json:"version,omitempty"`
	// DBSize and DBSizeInUse: the member's backend file and the part of it in use, in bytes, as its
	// agent last reported them (written when they move by a few percent, api.SizeMoved); absent when
	// unknown. The difference is what a defragmentation gives back.
	DBSize      int64 `json:"dbSize,omitempty"`
	DBSizeInUse int64 `json:"dbSizeInUse,omitempty"`
	// LastDefragTime: when the member last completed a defragmentation, as its agent reported it.
	LastDefragTime *metav1.Time `json:"lastDefragTime,omitempty"`
}

// TLSStatus is what the members report of their certificates (absent while TLS is off).
type TLSStatus struct {
	// CAFingerprint: SHA-256 of the CA the members trust, as reported (several during a CA rotation).
	CAFingerprints []string `json:"caFingerprints,omitempty"`
	// CANotAfter: the earliest expiry of a CA the members use.
	CANotAfter *metav1.Time `json:"caNotAfter,omitempty"`
	// CertNotAfter: the earliest expiry of a member certificate in use.
	CertNotAfter *metav1.Time `json:"certNotAfter,omitempty"`
	// Renewal: the etcd.io/renew-certificates request and how many members serve a certificate renewed
	// for it (docs/design/14-tls.md §14.7).
	Renewal *CertRenewal `json:"renewal,omitempty"`
	// CARotation: the CA rotation in progress, or the last one while its etcd.io/rotate-ca value stays
	// (docs/design/14-tls.md §14.6).
	CARotation *CARotation `json:"caRotation,omitempty"`
	// Switch: spec.security.tls.enabled changing on a running cluster, in progress (docs/design/14-tls.md §14.8).
	Switch *TLSSwitch `json:"switch,omitempty"`
}

// CARotation is one replacement of the built-in CA. Members counts the members; Trusting those whose
// etcd trusts the new CA, Issued those serving a certificate it signed. Restarting names the member
// whose etcd restarts now to trust the CAs of the Secret.
type CARotation struct {
	// Request: the etcd.io/rotate-ca value, or "auto" when the CA passed 2/3 of its lifetime.
	Request    string `json:"request"`
	Phase      string `json:"phase"`
	Members    int32  `json:"members"`
	Trusting   int32  `json:"trusting"`
	Issued     int32  `json:"issued"`
	Restarting string `json:"restarting,omitempty"`
	// Waiting: why the next step waits, when it does.
	Waiting string `json:"waiting,omitempty"`
}

// CertRenewal is one etcd.io/renew-certificates request: Renewed of Members serve a member certificate
// issued for it.
type CertRenewal struct {
	Request string `json:"request"`
	Members int32  `json:"members"`
	Renewed int32  `json:"renewed"`
}

// Phases.
const (
	PhaseCreating  = "Creating"
	PhaseRunning   = "Running"
	PhaseScaling   = "Scaling"
	PhaseUpgrading = "Upgrading"
	PhaseDegraded  = "Degraded"
	PhaseFailed    = "Failed"
	PhasePaused    = "Paused"
	// PhaseRestoring: a new cluster whose seed restores its snapshot.
	PhaseRestoring = "Restoring"
)

// Condition types.
const (
	CondAvailable   = "Available"
	CondProgressing = "Progressing"
	CondDegraded    = "Degraded"
	CondQuorumLost  = "QuorumLost"
	CondSplitBrain  = "SplitBrain"
	CondForeignData = "ForeignData"
	CondInvalidSpec = "InvalidSpec"
	CondEvenSize    = "EvenSize"
	// CondInputIgnored names inputs the hook ignored as impossible: a renewTime from the future, a
	// replica count above the maximum size, a hand-edited intent.
	CondInputIgnored = "InputIgnored"
	// CondLimitedDisruptionBudget notes that a cluster of size <= 2 gets maxUnavailable 1, not a quorum budget.
	CondLimitedDisruptionBudget = "LimitedDisruptionBudget"
	// CondPaused: spec.paused is set; the message says what waits.
	CondPaused = "Paused"
	// CondCertificatesExpiring: a certificate in use expires within CertExpiringDays.
	CondCertificatesExpiring = "CertificatesExpiring"
	// CondCertificatesInvalid: a member reports certificates it cannot use (wrong CA, expired, names).
	CondCertificatesInvalid = "CertificatesInvalid"
	// CondBackupFailing: the newest backup attempt failed (the message says why).
	CondBackupFailing = "BackupFailing"
	// CondBackupStale: no backup succeeded for two schedule periods.
	CondBackupStale = "BackupStale"
	// CondBackupLagging: the continuous backup's newest restorable point is older than
	// spec.backup.continuous.maxLag.
	CondBackupLagging = "BackupLagging"
	// CondBackupCopyFailing: the last pass that keeps spec.backup.copy up to date failed.
	CondBackupCopyFailing = "BackupCopyFailing"
	// CondRestoreFailed: the seed cannot restore the snapshot it was given.
	CondRestoreFailed = "RestoreFailed"
	// ReasonRestoreRetrying: CondRestoreFailed's reason while the seed retries a cause that may pass;
	// ReasonRestoreRefused (the Lease reason) is its reason once the restore has ended.
	ReasonRestoreRetrying = "RestoreRetrying"
	// CondDatabaseNearQuota: a member's database file is at or above DatabaseNearQuotaPercent of the
	// backend quota; at the quota etcd raises NOSPACE and refuses writes.
	CondDatabaseNearQuota = "DatabaseNearQuota"
	// CondDatabaseFull: etcd raised the NOSPACE alarm: the cluster serves reads and deletes only.
	CondDatabaseFull = "DatabaseFull"
	// CondDataCorrupt: etcd raised the CORRUPT alarm (its consistency check found members disagreeing).
	CondDataCorrupt = "DataCorrupt"
	// CondNetworkPolicyMissing: spec.network.policy is on but no NetworkPolicy can be rendered (the
	// registration does not declare the kind).
	CondNetworkPolicyMissing = "NetworkPolicyMissing"
	// CondDefragmenting: a defragmentation pass is due; the message names the member defragmenting, or
	// why the pass waits.
	CondDefragmenting = "Defragmenting"
	// CondStandbyLagging: a standby is further behind the primary's newest chunk than
	// spec.standby.maxLag, or its applier reported nothing for as long.
	CondStandbyLagging = "StandbyLagging"
	// CondStandbyStopped: a standby's following stopped for good; the message names the object.
	CondStandbyStopped = "StandbyStopped"
)
