package membership

// Event reasons the agent and the Jobs post on their EtcdCluster (docs/operations.md, Events), in
// UpperCamelCase as Kubernetes writes reasons. Each is posted when the thing happens, never per tick.
const (
	EventClusterBootstrapped = "ClusterBootstrapped"
	EventMemberAdded         = "MemberAdded"
	EventMemberPromoted      = "MemberPromoted"
	EventMemberRemoved       = "MemberRemoved"
	EventMemberLeft          = "MemberLeft"
	EventDataLossDetected    = "DataLossDetected"
	EventDataMovedAside      = "DataMovedAside"
	// EventRecoveryForced: the survivor of a recovery restarts on its data as a one-member cluster.
	EventRecoveryForced = "RecoveryForced"
	// EventAuthChanged: etcd's users and roles were brought to what spec.auth declares; EventAuthReverted
	// (warning): a hand edit of them was put back.
	EventAuthChanged         = "AuthChanged"
	EventAuthReverted        = "AuthReverted"
	EventClaimDeleted        = "ClaimDeleted"
	EventCACreated           = "CACreated"
	EventCertificateIssued   = "CertificateIssued"
	EventCertificateRenewed  = "CertificateRenewed"
	EventCertificatesInvalid = "CertificatesInvalid"
	EventCrashLoop           = "CrashLoop"
	EventSnapshotRestored    = "SnapshotRestored"
	EventRestoreFailed       = "RestoreFailed"
	EventSnapshotVerified    = "SnapshotVerified"
	EventBackupSucceeded     = "BackupSucceeded"
	EventBackupFailed        = "BackupFailed"
	// The continuous backup writer's: a chain that cannot go on (a gap, a compaction), and the full
	// snapshot that starts the next.
	EventBackupChainBroken  = "BackupChainBroken"
	EventBackupChainStarted = "BackupChainStarted"
	EventDefragmented       = "Defragmented"
	EventAlarmRaised        = "AlarmRaised"
	EventAlarmDisarmed      = "AlarmDisarmed"
	EventDefragFailed       = "DefragFailed"
	EventVolumeGrown        = "VolumeGrown"
	// EventQuotaChanged: this member's etcd started with another backend quota than the Lease last
	// reported (spec.maintenance.space raised it, or the spec changed it).
	EventQuotaChanged   = "QuotaChanged"
	EventPeerURLUpdated = "PeerURLUpdated"
)

// Recorder posts an Event on the member's EtcdCluster. reason is one of the Event* constants, action
// what was done (events.k8s.io/v1 requires it; client-go also folds repeats of the same reason and
// action into one Event with a count, so distinct things get distinct actions), note names the member
// and says why. warning makes it a Warning instead of a Normal event. Implementations must not block:
// the agent calls it between etcd calls.
type Recorder interface {
	Event(reason, action, note string, warning bool)
}

// NopRecorder drops every event: tests, and callers that have no API access.
type NopRecorder struct{}

// Event does nothing.
func (NopRecorder) Event(string, string, string, bool) {}

// recorderOr is r, or a NopRecorder when r is nil, so that every field holding a Recorder is optional.
func recorderOr(r Recorder) Recorder {
	if r == nil {
		return NopRecorder{}
	}
	return r
}
