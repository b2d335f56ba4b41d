package membership

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/internal/backup"
)

// TestMembershipStandbySeedKeepsRevisions: a standby's seed (docs/design/21-standby.md §21.1) restores
// the primary's snapshot under its own cluster token without the revision bump: the standby's members
// hold the primary's keyspace at the primary's very revision, its history is not compacted away, the
// next write lands on the next number (where the applier puts the primary's next revision), and it is
// another etcd cluster than the primary.
func TestMembershipStandbySeedKeepsRevisions(t *testing.T) {
	forEachVersion(t, func(t *testing.T, v string) {
		src := bootstrapped(t, v, 1)
		cl := src.client()
		defer cl.Close()
		want := fill(t, cl, 50)
		_, rev := content(t, cl)
		d := fileStore(t).destination(t)
		res, err := src.backupOnce(d, backup.Retention{KeepLast: 2}, time.Now())
		require.NoError(t, err)
		require.Equal(t, rev, res.Manifest.Revision)

		dst := restoredCluster(t, v, 2, d.ObjectURL(res.Manifest.SnapshotKey()))
		dst.keepRevisions = true
		dst.bootstrap(nil, 2)
		dcl := dst.client()
		defer dcl.Close()
		got, drev := content(t, dcl)
		require.Equal(t, want, got)
		require.Equal(t, rev, drev, "the standby holds the primary's revision, not one a billion on")
		_, err = dcl.Get(context.Background(), "k", clientv3.WithRev(rev))
		require.NoError(t, err, "nothing is marked compacted")
		pr, err := dcl.Put(context.Background(), "next", "x")
		require.NoError(t, err)
		require.Equal(t, rev+1, pr.Header.Revision)
		require.NotEqual(t, src.leases.Report(src.slots[0].lease).ClusterID, dst.leases.Report(dst.slots[0].lease).ClusterID,
			"a standby is its own etcd cluster (its own token)")
	})
}
