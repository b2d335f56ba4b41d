package membership

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
)

// TestMembershipBackupCopy: the continuous backup writer keeps a second destination up to date beside
// its chain (MinIO to the GCS emulator, real etcd, §16.12): the copy reaches the chain's newest
// revision, a restore from the copy alone equals etcd's `get --rev`, and the copy keeps to its own
// retention (one snapshot) while the primary keeps its own (several).
func TestMembershipBackupCopy(t *testing.T) {
	ctx := context.Background()
	d := startMinIO(t, "etcd-primary").destination(t)
	b := openBucket(t, d)
	cd := startFakeGCS(t, "etcd-copy").destination(t)
	cb, err := cd.OpenWith(ctx, "")
	require.NoError(t, err)
	defer cb.Close()
	src := bootstrapped(t, newestEtcd, 1)
	cl := src.client()
	defer cl.Close()

	var mu sync.Mutex
	var last api.CopyReport
	run := &continuousRun{t: t, c: src, b: b, d: d, events: &MemRecorder{}}
	run.copyPass = func(ctx context.Context) api.CopyReport {
		return CopyBackups(ctx, b, BackupCopy{Bucket: cb, Destination: cd, Retention: backup.Retention{KeepLast: 1}}, "ns", "src", src.parent, time.Now(), src.log, run.events)
	}
	run.reportCopy = func(r api.CopyReport) { mu.Lock(); last = r; mu.Unlock() }
	copied := func() api.CopyReport { mu.Lock(); defer mu.Unlock(); return last }
	run.start()
	defer func() { run.stop() }()
	rng := rand.New(rand.NewPCG(5, 27))
	run.waitCovered(1)
	_, err = src.backupOnce(d, backup.Retention{KeepLast: 20}, time.Now())
	require.NoError(t, err)
	mid := workload(t, cl, rng, 200)
	end := workload(t, cl, rng, 100)
	run.waitCovered(end)
	require.Eventually(t, func() bool { return copied().Revision >= end }, time.Minute, 50*time.Millisecond,
		"the copy to reach revision %d (last pass %+v)", end, copied())
	require.Empty(t, copied().Message)
	run.stop()

	primary, _, err := backup.List(ctx, b, "ns", "src")
	require.NoError(t, err)
	require.Len(t, primary, 2, "the primary's retention keeps both snapshots")
	inCopy, _, err := backup.List(ctx, cb, "ns", "src")
	require.NoError(t, err)
	require.Len(t, inCopy, 1, "the copy keeps one, by its own retention")
	require.Equal(t, primary[0].Snapshot, inCopy[0].Snapshot)
	require.Equal(t, cd.ObjectURL(inCopy[0].SnapshotKey()), copied().Snapshot)

	for _, rev := range []int64{mid, end} {
		res, got := restoreTo(t, cd, backup.Point{Revision: rev})
		require.Equal(t, rev, res.Revision)
		require.Equal(t, keyspaceAt(t, cl, rev), got, "the keyspace at revision %d, from the copy", rev)
	}
}
