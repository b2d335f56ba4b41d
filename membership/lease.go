package membership

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	etcdsync "github.com/etcdhook/etcdhook/sync"
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
	// JoinPermitted and JoinDeadline are the permission's window, zero unless both parse.
	JoinPermitted time.Time
	JoinDeadline  time.Time
	// Report is the agent-owned half as last written (by this pod or its predecessor).
	Report etcdsync.Report
	// Problems: annotations that were present but unusable (reported in the Lease, never fatal).
	Problems []string
}

// maxJoinWindow is the longest join permission the hook writes (etcdsync.MaxLearnerPromotionSeconds, the
// validation bound of spec.timeouts.learnerPromotionSeconds) plus room for clock skew between the hook
// and the API server. A longer window is a hand edit or a bug, and would let a join start long after the
// hook stopped counting it.
const maxJoinWindow = etcdsync.MaxLearnerPromotionSeconds*time.Second + 5*time.Minute

// Permitted says whether a join may start now (by the API server's clock): inside a window the hook
// could have written, whatever the annotations say.
func (i Intent) Permitted(now time.Time) bool {
	ok, _ := i.permit(now)
	return ok
}

func (i Intent) permit(now time.Time) (bool, string) {
	if i.JoinPermitted.IsZero() || i.JoinDeadline.IsZero() {
		return false, ""
	}
	if p := i.windowProblem(); p != "" {
		return false, p
	}
	if i.JoinDeadline.Sub(now) > maxJoinWindow {
		return false, fmt.Sprintf("join permission until %s ends further ahead than any the hook writes: ignored", i.JoinDeadline.Format(time.RFC3339))
	}
	return now.Before(i.JoinDeadline), ""
}

// windowProblem checks the permission's window on its own, without a clock.
func (i Intent) windowProblem() string {
	if i.JoinPermitted.IsZero() || i.JoinDeadline.IsZero() {
		return ""
	}
	switch window := i.JoinDeadline.Sub(i.JoinPermitted); {
	case window <= 0:
		return fmt.Sprintf("join permission ends (%s) before it starts (%s): ignored", i.JoinDeadline.Format(time.RFC3339), i.JoinPermitted.Format(time.RFC3339))
	case window > maxJoinWindow:
		return fmt.Sprintf("join permission of %s is longer than any the hook writes: ignored", window)
	}
	return ""
}

// StartIntent is how the agent acts on an intent annotation. Unknown values (a hand edit, a newer hook)
// act as member: a member that will not start can cost quorum, while one that runs against the hook's
// wish is only removed later, by the hook, through the quorum rule. The problem is reported.
func StartIntent(raw string) (intent, problem string) {
	switch raw {
	case etcdsync.IntentMember, etcdsync.IntentLeave, "":
		return raw, ""
	}
	return etcdsync.IntentMember, fmt.Sprintf("unknown intent %q on the member Lease: acting as %q", raw, etcdsync.IntentMember)
}

// LeaseStore is the agent's Kubernetes side: its own Lease and the cluster IDs the others report.
// The agent never creates a Lease and writes only its own half.
type LeaseStore interface {
	Read(ctx context.Context) (Intent, error)
	// Write renews the Lease (holder, renew time on the API server's clock) and writes the report.
	Write(ctx context.Context, r etcdsync.Report) error
	// ClusterIDs are the cluster IDs any member Lease of this EtcdCluster reports.
	ClusterIDs(ctx context.Context) ([]string, error)
	// Now is the API server's clock.
	Now() time.Time
}

func intentFromAnnotations(ann map[string]string) Intent {
	in := Intent{
		Intent:      ann[etcdsync.AnnIntent],
		IntentSince: ann[etcdsync.AnnIntentSince],
		Seed:        ann[etcdsync.AnnBootstrap] == etcdsync.BootstrapSeed,
	}
	if _, p := StartIntent(in.Intent); p != "" {
		in.Problems = append(in.Problems, p)
	}
	// Both ends must parse, as in the hook (sync/facts.go): a permission the hook does not see as one
	// must not start a join it does not count.
	from, fromSet := ann[etcdsync.AnnJoinPermitted]
	until, untilSet := ann[etcdsync.AnnJoinDeadline]
	if fromSet || untilSet {
		f, err1 := time.Parse(time.RFC3339, from)
		u, err2 := time.Parse(time.RFC3339, until)
		if err1 == nil && err2 == nil {
			in.JoinPermitted, in.JoinDeadline = f, u
		} else {
			in.Problems = append(in.Problems, fmt.Sprintf("join permission %q until %q does not parse: ignored", from, until))
		}
	}
	if p := in.windowProblem(); p != "" {
		in.Problems = append(in.Problems, p)
	}
	in.Report, _ = etcdsync.ParseReport(ann)
	return in
}

// LeaseClusterID picks the cluster ID the Leases report: the lowest valid one, so that every agent picks
// the same. Values that are not member IDs (a hand edit) are skipped and reported, and so is a
// disagreement between Leases, which only a second bootstrap or a hand edit can cause.
func LeaseClusterID(ids []string) (uint64, []string) {
	var problems []string
	valid := map[uint64]bool{}
	for _, s := range ids {
		id, err := etcdsync.ParseID(s)
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
			names = append(names, etcdsync.FormatID(id))
		}
		problems = append(problems, fmt.Sprintf("member Leases report different cluster IDs %s: using %s", strings.Join(names, ", "), names[0]))
	}
	return sorted[0], problems
}
