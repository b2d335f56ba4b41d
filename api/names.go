package api

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Ports every member uses. The agent serves ProbePort and proxies it to etcd's metrics listener on
// EtcdMetricsPort (loopback only), so probes answer during the agent's pre-start as well.
const (
	ClientPort      = 2379
	PeerPort        = 2380
	ProbePort       = 2381
	EtcdMetricsPort = 2382
)

// Paths inside member pods.
const (
	AgentDir        = "/agent"
	AgentBinary     = AgentDir + "/etcdhook"
	ConfigDir       = "/etc/etcdhook"
	AgentConfigPath = ConfigDir + "/" + ConfigKeyAgent
	// TLSDir holds what etcd reads, per plane (TLSPeerDir, TLSClientDir: tls.crt, tls.key, ca.crt),
	// written only by the agent into a memory-backed emptyDir: a built-in key never reaches a disk or the
	// API server, and a user's Secret reaches etcd only after the agent has checked it.
	TLSDir       = "/var/run/etcdhook/tls"
	TLSPeerDir   = TLSDir + "/peer"
	TLSClientDir = TLSDir + "/client"
	// TLSRootDir: the root identity's files (spec.auth), which the agent's own etcd calls present.
	TLSRootDir = TLSDir + "/root"
	// SecretSourceDir is where a user's Secrets are mounted (peer/, client/), for the agent to check.
	SecretSourceDir = "/etc/etcdhook/secrets"
	// ClientTLSDir is where a Job mounts the client certificate Secret.
	ClientTLSDir = "/etc/etcdhook/client-tls"
	// BackupCredentialsDir is where the backup Jobs and a restoring seed mount the store's credentials
	// Secret; BackupMount where they mount the claim of a file:// destination.
	BackupCredentialsDir = "/etc/etcdhook/backup-credentials"
	BackupMount          = "/backup"
	// CopyCredentialsDir is where the backup pods mount spec.backup.copy's credentials Secret.
	CopyCredentialsDir = "/etc/etcdhook/copy-credentials"
	// BackupEncryptionDir is where the backup pods and a restoring seed mount the encryption Secret.
	BackupEncryptionDir = "/etc/etcdhook/backup-encryption"
	DataMount           = "/var/lib/etcd"
	DataDir             = DataMount + "/data"
	EtcdBinary          = "/usr/local/bin/etcd"
	HookBinary          = "/etcdhook"
	MaxSize             = 9
	MaxNameLength       = 40
)

// Labels on every object the hook renders.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelClusterUID ties a member claim to the EtcdCluster that created it, so that only its own
	// claims are ever deleted (a re-created cluster of the same name inherits the old claims).
	LabelClusterUID = "etcd.io/cluster-uid"
	ComponentEtcd   = "etcd"
	ComponentOps    = "ops"
	ComponentBackup = "backup"
	// ComponentBackupWriter: the continuous backup writer's StatefulSet and pod.
	ComponentBackupWriter = "backup-writer"
	// ComponentStandby: a standby's applier StatefulSet and pod (docs/design/21-standby.md §21.2).
	ComponentStandby = "standby"
	ManagedBy        = "etcdhook"
)

// Other annotations.
const (
	AnnTemplateHash = "etcd.io/template-hash"
	AnnJobReason    = "etcd.io/reason"
	// AnnBackupNow on the EtcdCluster asks for one backup per distinct value (any token).
	AnnBackupNow = "etcd.io/backup-now"
	// AnnBackupSuccess and AnnBackupFailure: the backup Jobs' reports on the backup Lease (JSON).
	AnnBackupSuccess = "etcd.io/backup-last-success"
	AnnBackupFailure = "etcd.io/backup-last-failure"
	// AnnBackupContinuous: the continuous backup writer's report on the backup Lease (JSON).
	AnnBackupContinuous = "etcd.io/backup-continuous"
	// AnnBackupCopy: the report of the last pass that kept spec.backup.copy up to date (JSON).
	AnnBackupCopy = "etcd.io/backup-copy"
	// AnnDefragNow on the EtcdCluster asks for one defragmentation pass of every member per distinct
	// value (any token), whatever the thresholds say.
	AnnDefragNow = "etcd.io/defrag-now"
	// AnnRestoreFrom on the EtcdCluster asks for the running cluster's data to be replaced by a snapshot
	// (a URL as spec.restore.from takes it), once per distinct value (docs/design/16-backup-restore.md §16.8).
	AnnRestoreFrom = "etcd.io/restore-from"
	// AnnRestoreTo beside AnnRestoreFrom restores the keyspace at a point rather than the snapshot as it
	// is: a revision (a positive integer) or a time (RFC 3339), as spec.restore.toRevision and toTime
	// take them (issue 27; docs/design/16-backup-restore.md §16.10). The pair is one request: changing
	// either withdraws a restore not yet committed and asks for another.
	AnnRestoreTo = "etcd.io/restore-to"
	// AnnRenewCertificates on the EtcdCluster asks for every built-in certificate (members' and the
	// client Secret's) to be renewed now, for a value never used before (any token): the renewed
	// certificates carry its mark, so a value used again finds them renewed already. Member keys are
	// kept (a restart rotates them); the client Secret gets a new key (docs/design/14-tls.md §14.7).
	AnnRenewCertificates = "etcd.io/renew-certificates"
	// AnnPromote on a standby EtcdCluster promotes it (any token; docs/design/21-standby.md §21.6):
	// the first token is recorded in status.standby.promoted, and a later one changes nothing.
	AnnPromote = "etcd.io/promote"
	// AnnStandbyReport: the standby applier's report on the backup Lease (JSON, StandbyReport).
	AnnStandbyReport = "etcd.io/standby"
)

// RenewalMark is what certificates renewed for an etcd.io/renew-certificates value carry (in their
// subject's organizational unit) and the member Leases ask for: a hash, since the value is any string.
func RenewalMark(value string) string {
	h := sha256.Sum256([]byte(value))
	return hex.EncodeToString(h[:5])
}

// ConfigMap keys.
const (
	ConfigKeyAgent        = "agent.json"
	ConfigKeySpec         = "spec.json"
	ConfigKeyBootstrapped = "bootstrapped"
	ConfigKeyClusterID    = "cluster-id"
	// ConfigKeyRunning records the etcd versions members last reported running (space separated): the
	// floor of the upgrade path when no member reports (all restarting, status wiped).
	ConfigKeyRunning = "running-versions"
	// ConfigKeyFormed records that every member was once healthy: until then a create is in progress
	// and neither Degraded nor QuorumLost is reported.
	ConfigKeyFormed = "formed"
	// ConfigKeyRollingTo records the pod template (its etcd.io/template-hash) a roll is bringing every
	// member to, until every
	// member is a healthy voter on it (empty otherwise): the last pod a roll restarts is on its way back,
	// not degraded, although every pod already carries the new revision.
	ConfigKeyRollingTo = "rolling-to"
	// ConfigKeyDefragNowDone records the last etcd.io/defrag-now value whose pass went over every member:
	// the annotation stays on the parent, and without this record its pass would be due forever and hide
	// the schedule. Absent until a first on-demand pass completes.
	ConfigKeyDefragNowDone = "defrag-now-done"
	// ConfigKeyStandbyPromoted records a standby's promotion (JSON, StandbyPromoted): the applier is
	// gone and the fence lifted for good, whatever later etcd.io/promote tokens or a wiped status say.
	ConfigKeyStandbyPromoted = "standby-promoted"
	// ConfigKeyRestoreInPlace records the in-place restore asked by etcd.io/restore-from (JSON): its
	// request, the cluster IDs it replaces, whether the data was replaced (committed) and whether the
	// restored member runs (done). Absent until a first in-place restore.
	ConfigKeyRestoreInPlace = "restore-in-place"
	// ConfigKeySpaceQuota and ConfigKeySpaceStorage record the quota (bytes) and the claim size
	// (a quantity) spec.maintenance.space raised them to (docs/design/15-maintenance.md §15.6); absent
	// while the spec's are in force. Read back bounded by the spec.
	ConfigKeySpaceQuota = "space-quota"
	// ConfigKeyAuth is spec.auth as the agents apply it (AuthConfig, docs/design/20-auth.md): written by the
	// hook for the agents, which read it through the API; never read back by the hook.
	ConfigKeyAuth         = "auth.json"
	ConfigKeySpaceStorage = "space-storage"
)

// Names derives every object name from the cluster's name and namespace.
type Names struct {
	Cluster   string
	Namespace string
	// TLS makes the URLs https:// (the hook sets it from the spec in force).
	TLS bool
}

// PeerTLSNames are the names a user's peer certificate must cover for member i: its peer host, the
// host of its peer URL.
func (n Names) PeerTLSNames(i int) []string { return []string{n.PeerHost(i)} }

// PeerDNSChecked says whether a peer certificate's DNS SANs let etcd match member i's connections. With
// --peer-client-cert-auth etcd checks a connecting peer's certificate against the connection's source
// address: an IP SAN, a DNS SAN that resolves to it (forward lookup: only exact names resolve), or the
// address's PTR name (<pod>.<peer service>.<ns>.svc.cluster.local) matched exactly or by a wildcard. A
// wildcard for <peer service>.<ns>.svc alone matches none of them, and every peer connection is refused.
func (n Names) PeerDNSChecked(dnsNames []string, i int) bool {
	host := n.PeerHost(i)
	wildcard := "*." + n.PeerService() + "." + n.Namespace + ".svc.cluster.local"
	for _, d := range dnsNames {
		if d == host || d == host+".cluster.local" || d == wildcard {
			return true
		}
	}
	return false
}

// ClientTLSNames are the names a user's client-plane certificate must cover for member i: its
// advertised client host, the client Service (how users connect) and 127.0.0.1 (how its agent does).
func (n Names) ClientTLSNames(i int) []string {
	return []string{n.PeerHost(i), n.ClientService() + "." + n.Namespace + ".svc", "127.0.0.1"}
}

// Secrets of a cluster with built-in TLS (docs/design/14-tls.md §14): the CA, created by the first agent that
// needs it, and the client certificate for users, the agent's Jobs and tests. Never children: the hook
// does not see or answer them, so no answer of it can delete them; they are owned by the EtcdCluster
// (garbage-collected with it).
func (n Names) CASecret() string     { return n.Cluster + "-ca" }
func (n Names) ClientSecret() string { return n.Cluster + "-client-tls" }

// TLSNames are the names a member certificate must cover: its peer host (short and cluster.local), the
// client Service, localhost.
func (n Names) TLSNames(i int) []string {
	svc := n.ClientService() + "." + n.Namespace
	return []string{
		n.PeerHost(i), n.PeerHost(i) + ".cluster.local",
		n.ClientService(), svc, svc + ".svc", svc + ".svc.cluster.local",
		"localhost",
	}
}

func (n Names) StatefulSet() string   { return n.Cluster }
func (n Names) ClientService() string { return n.Cluster }
func (n Names) PeerService() string   { return n.Cluster + "-peer" }
func (n Names) PDB() string           { return n.Cluster }
func (n Names) NetworkPolicy() string { return n.Cluster }
func (n Names) ConfigMap() string     { return n.Cluster + "-config" }
func (n Names) MemberAccount() string { return n.Cluster + "-member" }
func (n Names) OpsAccount() string    { return n.Cluster + "-ops" }

// The names below are built by concatenation, not fmt: the hook builds several per member each sync.
func (n Names) Pod(i int) string   { return n.Cluster + "-" + strconv.Itoa(i) }
func (n Names) Lease(i int) string { return n.Cluster + "-" + strconv.Itoa(i) + "-member" }
func (n Names) PVC(i int) string   { return "data-" + n.Cluster + "-" + strconv.Itoa(i) }
func (n Names) PeerHost(i int) string {
	return n.Cluster + "-" + strconv.Itoa(i) + "." + n.Cluster + "-peer." + n.Namespace + ".svc"
}

// Scheme is https:// when the cluster runs TLS (Names.TLS), http:// otherwise.
func (n Names) Scheme() string {
	if n.TLS {
		return "https://"
	}
	return "http://"
}
func (n Names) PeerURL(i int) string {
	return n.Scheme() + n.Cluster + "-" + strconv.Itoa(i) + "." + n.Cluster + "-peer." + n.Namespace + ".svc:" + strconv.Itoa(PeerPort)
}
func (n Names) ClientURL(i int) string {
	return n.Scheme() + n.Cluster + "-" + strconv.Itoa(i) + "." + n.Cluster + "-peer." + n.Namespace + ".svc:" + strconv.Itoa(ClientPort)
}

// ClientEndpoint is the client Service address, which routes only to ready (voting) members.
func (n Names) ClientEndpoint() string {
	return n.Scheme() + n.ClientService() + "." + n.Namespace + ".svc:" + strconv.Itoa(ClientPort)
}

// RemoveJob names the attempt-th Job removing memberID (docs/design/07-steps.md §7.6: attempt-numbered remove Jobs).
func (n Names) RemoveJob(memberID string, attempt int) string {
	return n.Cluster + "-rm-" + memberID + "-" + strconv.Itoa(attempt)
}

// DeleteVolumeJob names the attempt-th Job deleting the volume of ordinal i (its name keeps "-pvc-": the
// hook reads the Jobs of running clusters by it, docs/design/18-names.md).
func (n Names) DeleteVolumeJob(i, attempt int) string {
	return n.Cluster + "-pvc-" + strconv.Itoa(i) + "-" + strconv.Itoa(attempt)
}

// GrowJob names the attempt-th Job growing the claim of ordinal i to spec.storage.size (docs/design/17-growing-volumes.md §17).
func (n Names) GrowJob(i, attempt int) string {
	return n.Cluster + "-grow-" + strconv.Itoa(i) + "-" + strconv.Itoa(attempt)
}

// TemplateJob names the attempt-th Job that deletes the StatefulSet, keeping its pods and claims, so that
// the hook re-creates it with the grown claim template (docs/design/17-growing-volumes.md §17.3).
func (n Names) TemplateJob(attempt int) string {
	return n.Cluster + "-vct-" + strconv.Itoa(attempt)
}

// BackupName names the backup CronJob, its Lease (where the backup Jobs report) and its account.
func (n Names) BackupName() string { return n.Cluster + "-backup" }

// BackupWriter names the continuous backup writer's StatefulSet (its pod is <name>-backup-writer-0).
func (n Names) BackupWriter() string { return n.Cluster + "-backup-writer" }

// StandbyApplier is a standby's applier StatefulSet (docs/design/21-standby.md §21.2).
func (n Names) StandbyApplier() string { return n.Cluster + "-standby" }

// HookOwnedSecret says whether name is a Secret the hook creates for this cluster (the built-in CA,
// with its key, and the client Secret); HookOwnedClaim whether it is a member's data claim. A
// user-named Secret (credentials, TLS) or claim (a backup's) must not be one: naming data-<cluster>-0
// as the backup claim mounted member 0's data into the backup Job, <cluster>-ca as credentials
// mounted the CA key there. Names of other kinds (the Services, the Leases) do not collide: a Secret
// named <cluster>-peer is the user's own.
func (n Names) HookOwnedSecret(name string) bool {
	return name == n.CASecret() || name == n.ClientSecret() || name == n.RootSecret()
}

// HookOwnedClaim: see HookOwnedSecret.
func (n Names) HookOwnedClaim(name string) bool { return n.PVCOrdinal(name) >= 0 }

// BackupJob names the on-demand backup Job of an etcd.io/backup-now token: a hash, since a token is
// any string, and one name per token so that a token is backed up once however often the hook syncs.
func (n Names) BackupJob(token string) string {
	h := sha256.Sum256([]byte(token))
	return n.Cluster + "-backup-" + hex.EncodeToString(h[:5])
}

// RestoreJob names the Job that restores the etcd.io/restore-from request into ordinal 0's volume: one
// Job per request.
func (n Names) RestoreJob(request string) string {
	h := sha256.Sum256([]byte(request))
	return n.Cluster + "-restore-" + hex.EncodeToString(h[:5])
}

// RestoreVerifyJob names the Job that verifies the snapshot of request while the cluster still serves
// ("-restore-v": a hex hash never starts with v, so it differs from every RestoreJob name).
func (n Names) RestoreVerifyJob(request string) string {
	h := sha256.Sum256([]byte(request))
	return n.Cluster + "-restore-v" + hex.EncodeToString(h[:5])
}

// RestoreToken is the cluster token of data restored in place for request: distinct per request, so
// that the restored cluster's member and cluster IDs (etcd derives them from the token and peer URL)
// never equal those of the cluster it replaces or of an earlier restore.
func RestoreToken(namespace, name, uid, request string) string {
	h := sha256.Sum256([]byte(request))
	return Token(namespace, name, uid) + "-restore-" + hex.EncodeToString(h[:5])
}

// Token is the etcd cluster token: it includes the parent UID so a re-created cluster differs.
func Token(namespace, name, uid string) string { return namespace + "-" + name + "-" + uid }

// OrdinalOf parses "<prefix>-<i><suffix>" and returns i, or -1.
func ordinalOf(name, prefix, suffix string) int {
	if !strings.HasPrefix(name, prefix+"-") || !strings.HasSuffix(name, suffix) {
		return -1
	}
	s := strings.TrimSuffix(strings.TrimPrefix(name, prefix+"-"), suffix)
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || strconv.Itoa(i) != s || i >= MaxSize {
		// An ordinal at or above the maximum size is never one the hook made: evidence of a hand edit
		// or of another cluster's objects, never a reason to render that many children.
		return -1
	}
	return i
}

// LeaseOrdinal returns the ordinal of a member Lease name, or -1.
func (n Names) LeaseOrdinal(name string) int { return ordinalOf(name, n.Cluster, "-member") }

// PodOrdinal returns the ordinal of a member pod name, or -1.
func (n Names) PodOrdinal(name string) int { return ordinalOf(name, n.Cluster, "") }

// PVCOrdinal returns the ordinal of a member data claim, or -1.
func (n Names) PVCOrdinal(name string) int { return ordinalOf(name, "data-"+n.Cluster, "") }

var peerPort = strconv.Itoa(PeerPort)

// PeerURLOrdinal maps a member's peer URL to the ordinal whose peer URL it is, or -1 (an orphan). Either
// scheme is that ordinal's: a member keeps the peer URL it joined with, and the scheme says nothing of
// which pod it is.
func (n Names) PeerURLOrdinal(url string) int {
	scheme := "http://"
	if strings.HasPrefix(url, "https://") {
		scheme = "https://"
	}
	host := strings.TrimPrefix(url, scheme)
	host, _, _ = strings.Cut(host, ":")
	pod, rest, ok := strings.Cut(host, ".")
	if !ok {
		return -1
	}
	i := n.PodOrdinal(pod)
	if i < 0 || rest == "" {
		return -1
	}
	// The URL must be exactly PeerURL(i): compared piece by piece, as this runs for every member of
	// every report on every sync and formatting the URL each time dominated the allocations.
	want := [...]string{scheme, pod, ".", n.Cluster, "-peer.", n.Namespace, ".svc:", peerPort}
	rem := url
	for _, part := range want {
		if !strings.HasPrefix(rem, part) {
			return -1
		}
		rem = rem[len(part):]
	}
	if rem != "" {
		return -1
	}
	return i
}

// Labels are the selector labels of member pods (and so of their PVCs).
func (n Names) Labels() map[string]string {
	return map[string]string{
		LabelName:      "etcd",
		LabelInstance:  n.Cluster,
		LabelComponent: ComponentEtcd,
	}
}

// ObjectLabels are the labels of every child; component distinguishes member from ops objects.
func (n Names) ObjectLabels(component string) map[string]string {
	return map[string]string{
		LabelName:      "etcd",
		LabelInstance:  n.Cluster,
		LabelComponent: component,
		LabelManagedBy: ManagedBy,
	}
}

// Quorum is the number of voters a cluster of n voters needs to commit.
func Quorum(n int) int { return n/2 + 1 }

// The member's readiness probe (sync/render/statefulset.go) and what a drain waits for it (issue 28,
// docs/design/07-steps.md §7.14): the kubelet marks a pod not ready after ReadinessFailures failures
// ReadinessPeriodSeconds apart, and the endpoints need EndpointPropagation more to reach every node's
// proxy.
const (
	ReadinessPeriodSeconds = 1
	ReadinessFailures      = 5
	EndpointPropagation    = 2 * time.Second
)

// DrainWait is how long a member whose pod stays answers not ready before etcd stops on purpose.
const DrainWait = time.Duration(ReadinessPeriodSeconds*ReadinessFailures)*time.Second + EndpointPropagation
