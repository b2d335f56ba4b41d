package api

import "time"

// DefaultLeaseDurationSeconds is the member Lease duration the agent is configured with: a report that is
// not a healthy voter's is renewed every third of it.
const DefaultLeaseDurationSeconds = 30

// HealthyRenewSeconds is how often an agent renews an unchanged report of a healthy voter. Every Lease
// write wakes the hook (Leases are children), and nine members renewing every 10 s kept an idle cluster
// at about one sync a second. A healthy voter's liveness is its pod's Ready condition instead: the
// kubelet probes the agent every second and the pod changes, and so wakes the hook, only when readiness
// does. Any change of a report is written at once, whatever the interval (docs/design/03-member-lease.md §3.5).
const HealthyRenewSeconds = 180

// RenewInterval is how often an agent renews a report that has not changed: HealthyRenewSeconds for a
// healthy voter with nothing to report, a third of the Lease duration (at least 5 s) for anything else
// (starting, joining, unhealthy, parked), where the hook judges the agent by its renewals.
func RenewInterval(r Report, leaseDuration time.Duration) time.Duration {
	if r.IsVoter() && r.Healthy && r.Error == "" {
		return HealthyRenewSeconds * time.Second
	}
	if d := leaseDuration / 3; d > 5*time.Second {
		return d
	}
	return 5 * time.Second
}

// AgentConfig is the agent's static configuration, mounted from the ConfigMap. Everything that changes
// during a cluster's life (intent, join permission, bootstrap) is read live from the Lease instead.
type AgentConfig struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	// ClusterUID keeps its first JSON key: ConfigMaps of running clusters carry it (docs/design/18-names.md).
	ClusterUID           string `json:"parentUID"`
	PeerService          string `json:"peerService"`
	ClientPort           int    `json:"clientPort"`
	PeerPort             int    `json:"peerPort"`
	ProbePort            int    `json:"probePort"`
	EtcdMetricsPort      int    `json:"etcdMetricsPort"`
	DataDir              string `json:"dataDir"`
	Token                string `json:"token"`
	LeaseDurationSeconds int    `json:"leaseDurationSeconds"`
	AdoptExistingData    bool   `json:"adoptExistingData"`
	// TLS is set when the cluster runs TLS: the agent then issues its member certificate into TLSDir.
	TLS *AgentTLS `json:"tls,omitempty"`
	// Restore is set for a cluster created from a snapshot: the seed restores it before its first start.
	Restore *AgentRestore `json:"restore,omitempty"`
	// Bootstrap is StaticBootstrap(N) for a cluster created statically, "" for one bootstrapped by a
	// seed: an agent starts from the static initial cluster only when its Lease says the same, so that
	// one hand edit cannot make members of one creation start two ways (docs/design/07-steps.md §7.1).
	Bootstrap string `json:"bootstrap,omitempty"`
	// RetiredClusters are the cluster IDs an in-place restore replaced (docs/design/16-backup-restore.md §16.8): data of
	// one of them is moved aside, and a report or member list naming one is not this cluster's.
	RetiredClusters []string `json:"retiredClusters,omitempty"`
}

// AgentRestore is spec.restore as the agent needs it.
type AgentRestore struct {
	// From is spec.restore.from; FileRoot is where a file source's claim is mounted ("" for others).
	From string `json:"from"`
	// ToRevision and ToTime: spec.restore's point, if any.
	ToRevision     int64      `json:"toRevision,omitempty"`
	ToTime         *time.Time `json:"toTime,omitempty"`
	FileRoot       string     `json:"fileRoot,omitempty"`
	CredentialsDir string     `json:"credentialsDir,omitempty"`
	// EncryptionDir is where spec.restore.encryption's Secret is mounted ("" without one).
	EncryptionDir string `json:"encryptionDir,omitempty"`
	// KeepRevisions: a standby's seed (spec.standby, docs/design/21-standby.md §21.1) restores the
	// primary's snapshot with its revisions as they are, without the revision bump.
	KeepRevisions bool `json:"keepRevisions,omitempty"`
}

// AgentTLS is the TLS configuration as the agent needs it.
type AgentTLS struct {
	// PeerSource and ClientSource: the directory where the user's Secret for that plane is mounted;
	// empty for a plane on the built-in CA.
	PeerSource   string `json:"peerSource,omitempty"`
	ClientSource string `json:"clientSource,omitempty"`
	CASecret     string `json:"caSecret"`
	ClientSecret string `json:"clientSecret"`
	// CADuration and CertDuration are Go durations (metav1.Duration's form).
	CADuration   string `json:"caDuration"`
	CertDuration string `json:"certDuration"`
	ClientAuth   bool   `json:"clientAuth"`
	// RotationGrace: spec.security.tls.builtIn.rotationGrace (a Go duration), absent for the default.
	RotationGrace string `json:"rotationGrace,omitempty"`
}
