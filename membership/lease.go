package membership

import (
	"context"
	"errors"
	"time"

	etcdsync "github.com/etcdhook/etcdhook/sync"
)

// ErrNoLease: the member Lease does not exist yet (the hook creates it; the agent never does).
var ErrNoLease = errors.New("member Lease not found")

// Intent is the hook's half of the member Lease, read live.
type Intent struct {
	Intent        string
	IntentSince   string
	Seed          bool
	JoinPermitted string
	JoinDeadline  time.Time
	// Report is the agent-owned half as last written (by this pod or its predecessor).
	Report etcdsync.Report
}

// Permitted says whether a join may start now (by the API server's clock).
func (i Intent) Permitted(now time.Time) bool {
	return i.JoinPermitted != "" && now.Before(i.JoinDeadline)
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
		Intent:        ann[etcdsync.AnnIntent],
		IntentSince:   ann[etcdsync.AnnIntentSince],
		Seed:          ann[etcdsync.AnnBootstrap] == etcdsync.BootstrapSeed,
		JoinPermitted: ann[etcdsync.AnnJoinPermitted],
	}
	if t, err := time.Parse(time.RFC3339, ann[etcdsync.AnnJoinDeadline]); err == nil {
		in.JoinDeadline = t
	} else {
		in.JoinPermitted = ""
	}
	in.Report, _ = etcdsync.ParseReport(ann)
	return in
}
