package membership

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// ErrNoLease: the member Lease does not exist yet (the hook creates it; the agent never does).
var ErrNoLease = errors.New("member Lease not found")

// Intent is the hook's half of the member Lease, read live. Annotations can be edited by hand, so every
// field is what the agent may act on, and Problems says what it could not use as written.
type Intent struct {
	// Intent is the annotation as written; StartIntent says how the agent acts on it.
	Intent      string
	IntentSince string
	Seed        bool
	// Static: the member count of a static creation the Lease asks this member to start with (0 none).
	Static int
	// Join is the permission's window, zero unless usable (api.ParseJoinWindow).
	Join api.JoinWindow
	// Defrag: the defragmentation pass this member is asked to execute ("" none).
	Defrag string
	// Renewal: the renewal mark the member's built-in certificates must carry ("" none; §14.7).
	Renewal string
	// CARotation and CARestart: the CA rotation step asked for, and the CAs this member may restart its
	// etcd to trust (docs/design/14-tls.md §14.6); zero when none or not as the hook writes them.
	CARotation api.CARotationIntent
	CARestart  string
	// PeerScheme: the scheme this member may move its peer URL to now ("http", "https"; "" none).
	PeerScheme string
	// Recover: this member's part in a recovery from the freshest survivor (zero: none).
	Recover api.RecoverIntent
	// AuthDeclared: the hash of the declared auth the hook hints at ("" none).
	AuthDeclared string
	// Report is the agent-owned half as last written (by this pod or its predecessor).
	Report api.Report
	// Problems: annotations that were present but unusable (reported in the Lease, never fatal).
	Problems []string
}

// Permitted says whether a join may start now (by the API server's clock): inside a window the hook
// could have written, whatever the annotations say.
func (i Intent) Permitted(now time.Time) bool {
	ok, _ := i.Join.OpenAt(now)
	return ok
}

// StartIntent is how the agent acts on an intent annotation. Unknown values (a hand edit, a newer hook)
// act as member: a member that will not start can cost quorum, while one that runs against the hook's
// wish is only removed later, by the hook, through the quorum rule. The problem is reported.
func StartIntent(raw string) (intent, problem string) {
	switch raw {
	case api.IntentMember, api.IntentLeave, "":
		return raw, ""
	}
	return api.IntentMember, fmt.Sprintf("unknown intent %q on the member Lease: acting as %q", raw, api.IntentMember)
}

// LeaseStore is the agent's Kubernetes side: its own Lease and the cluster IDs the others report.
// The agent never creates a Lease and writes only its own half.
type LeaseStore interface {
	Read(ctx context.Context) (Intent, error)
	// Write renews the Lease (holder, renew time on the API server's clock) and writes the report.
	Write(ctx context.Context, r api.Report) error
	// ClusterIDs are the cluster IDs any member Lease of this EtcdCluster reports.
	ClusterIDs(ctx context.Context) ([]string, error)
	// Peers are the reports of this EtcdCluster's member Leases that are fresh (renewed within their
	// duration by the API server's clock): what the other agents say now.
	Peers(ctx context.Context) ([]api.Report, error)
	// Now is the API server's clock.
	Now() time.Time
}

func intentFromAnnotations(ann map[string]string) Intent {
	parsed, problems := api.ParseIntent(ann)
	in := Intent{
		Intent: parsed.Kind, IntentSince: parsed.Since, Seed: parsed.Seed, Static: parsed.Static, Join: parsed.Join, Defrag: parsed.Defrag,
		Renewal: parsed.Renewal, CARotation: parsed.CARotation, CARestart: parsed.CARestart, PeerScheme: parsed.PeerScheme,
		Recover: parsed.Recover, AuthDeclared: parsed.Auth,
		Problems: problems,
	}
	if _, p := StartIntent(in.Intent); p != "" {
		in.Problems = append(in.Problems, p)
	}
	in.Report, _ = api.ParseReport(ann)
	return in
}

// LeaseClusterID picks the cluster ID the Leases report: the lowest valid one, so that every agent picks
// the same. Values that are not member IDs (a hand edit) are skipped and reported, and so is a
// disagreement between Leases, which only a second bootstrap or a hand edit can cause.
func LeaseClusterID(ids []string) (uint64, []string) {
	var problems []string
	valid := map[uint64]bool{}
	for _, s := range ids {
		id, err := api.ParseID(s)
		if err != nil || id == 0 {
			problems = append(problems, fmt.Sprintf("cluster ID %q on a member Lease is not an etcd cluster ID: ignored", s))
			continue
		}
		valid[id] = true
	}
	var sorted []uint64
	for id := range valid {
		sorted = append(sorted, id)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	if len(sorted) == 0 {
		return 0, problems
	}
	if len(sorted) > 1 {
		var names []string
		for _, id := range sorted {
			names = append(names, api.FormatID(id))
		}
		problems = append(problems, fmt.Sprintf("member Leases report different cluster IDs %s: using %s", strings.Join(names, ", "), names[0]))
	}
	return sorted[0], problems
}
