// Package render turns the decision's output (Desired) into the children of one EtcdCluster. Every
// function here is a pure function of a Desired value: it decides nothing (which step, which member,
// which Job) and reads nothing but its argument. The decision (package sync) fills Desired and may call
// PodTemplate to hash the template, as Kubernetes' StatefulSet controller calls newRevision; this
// package never imports the decision. One file per child kind; the status (Status, status*.go) is
// rendered alike, from the facts and the decision's value (steps.Decision).
package render

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// Desired is one sync's whole decision as data: what every child must be.
type Desired struct {
	// Names name every child; Names.TLS is the scheme every member serves on its client port now (the
	// Jobs' and agents' endpoints). ClusterUID is the EtcdCluster's metadata.uid.
	Names      api.Names
	ClusterUID string
	// Spec is the spec the children are rendered from (the applied one, not always the parent's, with
	// a quota and claim size spec.maintenance.space raised); SpecRecord is the applied one as written,
	// which the ConfigMap records.
	Spec       api.ClusterSpec
	SpecRecord api.ClusterSpec
	// Image and ImagePullPolicy are the hook's own (the agent and the Jobs run its binary).
	Image           string
	ImagePullPolicy corev1.PullPolicy

	Template Template
	// Replicas and Partition: the StatefulSet's, as the membership protocol steps them.
	Replicas  int32
	Partition int32
	// Live is the observed StatefulSet, nil before it exists: its immutable fields are kept.
	Live *appsv1.StatefulSet
	// Bootstrap is the record of a static creation (api.StaticBootstrap), "" for a cluster a seed
	// bootstrapped: the StatefulSet and agent.json carry it for the cluster's life.
	Bootstrap string

	// PDBSize is the member count the quorum budget is computed on (never below the voters).
	PDBSize int
	// Leases: the hook's half of each member Lease, by ordinal.
	Leases []MemberLease
	Config Config
	// Backup: the backup children, nil without spec.backup.
	Backup *Backup
	// Standby: a standby's children, nil when not a standby.
	Standby *Standby
	// NetworkPolicy: spec.network.policy is on and the registration declares the kind.
	NetworkPolicy bool
	// Jobs: the membership and volume Jobs, new and carried (a name listed twice renders once).
	Jobs []steps.Job
	// Auth: the auth config the agents apply (the ConfigMap's auth.json), nil without spec.auth; the
	// Jobs then present the root identity, and the member Role may keep the users' Secrets.
	Auth *api.AuthConfig
}

// Template is how the pod template renders TLS, and what the StatefulSet says about a TLS switch.
type Template struct {
	// TLS is the TLS the template and the agent configuration are rendered from (in a switch's
	// transition, the spec's settings with TLS on).
	TLS api.TLSSpec
	// Transition is the scheme a TLS switch leaves ("" none): the client port serves both.
	Transition string
	// AgentTLS: the agent configuration and the member role keep the TLS settings (also through a
	// switch off, until every pod runs the plaintext template).
	AgentTLS bool
	// Hash is the template's hash (TemplateHash of PodTemplate), SwitchAnnotation the TLS switch's
	// step on the StatefulSet ("" none).
	Hash             string
	SwitchAnnotation string
}

// MemberLease is one member's Lease: the hook writes only the intent annotations.
type MemberLease struct {
	Ordinal int
	Intent  api.Intent
}

// Config is the ConfigMap's records beside the agent configuration and the applied spec.
type Config struct {
	Bootstrapped bool
	ClusterID    string
	// Running: the versions the members run, as recorded (api.ConfigKeyRunning).
	Running   string
	Formed    bool
	RollingTo string
	// DefragNowDone and RestoreInPlace are written only when set.
	DefragNowDone  string
	RestoreInPlace string
	// RetiredClusters: the cluster IDs in-place restores replaced, as the agents get them.
	RetiredClusters []string
	// SpaceQuota and SpaceStorage: the raised quota and claim size, written only when set.
	SpaceQuota, SpaceStorage string
	// StandbyPromoted: the standby's promotion record (JSON), written only when set.
	StandbyPromoted string
}

// Standby is what a standby's children render from (spec.standby is Desired.Spec.Standby).
type Standby struct {
	// Applier: render the applier (a formed standby not yet promoted), with Replicas: 1 while it
	// follows, 0 while a promotion stops it.
	Applier  bool
	Replicas int32
}

// Backup is what the backup children render from (spec.backup is Desired.Spec.Backup).
type Backup struct {
	// Schedule: render the CronJob (a schedule is set and the registration declares CronJobs);
	// Suspended while an in-place restore has the members down.
	Schedule  bool
	Suspended bool
	// Writer: render the continuous backup writer (spec.backup.continuous, a cluster that has formed,
	// its members not down on purpose).
	Writer bool
	// Runs are the on-demand backup Jobs: this token's and earlier ones still running.
	Runs []BackupRun
}

// BackupRun is one on-demand backup Job.
type BackupRun struct{ Name, Token string }
