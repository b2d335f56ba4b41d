package membership

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// Self is the member this agent runs: who it is and how etcd runs (api.AgentConfig, agent.json, is the
// part the hook writes; this is what the agent makes of it with its pod's identity).
type Self struct {
	// Name is the etcd member name (the pod name).
	Name      string
	PeerURL   string
	ClientURL string
	// Endpoints are where voters answer before this member runs (the client Service).
	Endpoints  []string
	DataDir    string
	ClusterUID string
	Adopt      bool
	// LeaseDuration: an unchanged report is renewed every third of it, a healthy voter's every
	// api.HealthyRenewSeconds.
	LeaseDuration time.Duration
	// EtcdCommand is etcd with its static flags; the agent appends the initial-cluster flags.
	EtcdCommand []string
	// Tick is how often a running member is looked at (promote, leave, report); default 2 s.
	Tick time.Duration
	// FastTick is how often a member still on its way to a healthy voter (starting, learner, waiting for
	// its join permission) is looked at, for at most fastWindow; default 250 ms. Every step of a join
	// waits for the agent to look: at 2 s, looking was most of a scale step.
	FastTick time.Duration
	// StopGrace bounds the wait for etcd after SIGTERM before SIGKILL.
	StopGrace time.Duration
	// DrainWait is how long a member stopped on purpose while its pod stays (a restart in place, a
	// removal) answers not ready before etcd stops: long enough for the kubelet to count the readiness
	// failures and the Service's endpoints to drop it (drain.go). TerminatingWait is the same when the
	// pod itself is being deleted (the endpoints drop a terminating pod at once; only their propagation
	// is waited for). Zero: no wait.
	DrainWait, TerminatingWait time.Duration
	// JoinTimeout bounds one join (add, start, promote) before the agent starts over.
	JoinTimeout time.Duration
	// EtcdOutput receives etcd's stdout and stderr (default: the agent's stderr).
	EtcdOutput io.Writer
	// CertLook is how often the certificates are looked at (default certLook).
	CertLook time.Duration
	// NoSpaceAgain bounds how often this member's NOSPACE recovery runs (default noSpaceAgain).
	NoSpaceAgain time.Duration
	// Restore, when set, is the snapshot the seed of a new cluster starts from (DataDir, Name, PeerURL
	// and Token filled in); nil for a cluster bootstrapped empty.
	Restore *RestoreRequest
	// Bootstrap is agent.json's bootstrap (api.StaticBootstrap(N) for a static creation, "" otherwise), and
	// StaticPeers the members of a static creation of n (names and peer URLs, this member's among them).
	Bootstrap   string
	StaticPeers func(n int) []api.Member
	// Retired are cluster IDs an in-place restore replaced: a Lease or member list naming one is not
	// this cluster's, and data of one is moved aside (docs/design/16-backup-restore.md §16.8).
	Retired map[uint64]bool
	// LoadRetired, when set, reads Retired again before each start decision (agent.json as the kubelet
	// refreshes it); a read that fails keeps the last list.
	LoadRetired func() (map[uint64]bool, error)
	// Transition is the scheme a TLS switch leaves ("" none; the pod runs the transition template,
	// docs/design/14-tls.md §14.8): the agent moves its peer URL to the other scheme when its Lease asks.
	Transition string
	// AuthSource reads the declared auth (the ConfigMap's auth.json, docs/design/20-auth.md): nil without
	// spec.auth. Nil: the agent never touches etcd's auth.
	AuthSource func(ctx context.Context) (*api.AuthConfig, error)
	// AuthLook: how often the declared auth is read and etcd's auth revision looked at (default
	// authRead and authLook).
	AuthLook time.Duration
}

// quotaOf is the backend quota etcd runs with under command (its --quota-backend-bytes flag, etcd's
// default without it); 0 when the flag does not parse, which the hook refuses before it renders it.
func quotaOf(command []string) int64 {
	options := map[string]string{}
	if v, ok := etcdFlag(command, "quota-backend-bytes"); ok {
		options["quota-backend-bytes"] = v
	}
	quota, _ := api.QuotaBackendBytes(options)
	return quota
}

// etcdFlag is the value of etcd's flag --name in command (--name=v or --name v; the last one counts,
// as etcd's own flag parsing takes it); false when absent.
func etcdFlag(command []string, name string) (value string, ok bool) {
	for i, arg := range command {
		switch {
		case strings.HasPrefix(arg, "--"+name+"="):
			value, ok = strings.TrimPrefix(arg, "--"+name+"="), true
		case arg == "--"+name && i+1 < len(command):
			value, ok = command[i+1], true
		}
	}
	return value, ok
}
