package api

// DefaultLeaseDurationSeconds is the member Lease duration the agent is configured with; it renews every
// third of it.
const DefaultLeaseDurationSeconds = 30

// AgentConfig is the agent's static configuration, mounted from the ConfigMap. Everything that changes
// during a cluster's life (intent, join permission, bootstrap) is read live from the Lease instead.
type AgentConfig struct {
	Cluster              string `json:"cluster"`
	Namespace            string `json:"namespace"`
	ParentUID            string `json:"parentUID"`
	PeerService          string `json:"peerService"`
	ClientPort           int    `json:"clientPort"`
	PeerPort             int    `json:"peerPort"`
	ProbePort            int    `json:"probePort"`
	EtcdMetricsPort      int    `json:"etcdMetricsPort"`
	DataDir              string `json:"dataDir"`
	Token                string `json:"token"`
	LeaseDurationSeconds int    `json:"leaseDurationSeconds"`
	AdoptExistingData    bool   `json:"adoptExistingData"`
}
