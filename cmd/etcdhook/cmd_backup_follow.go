package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/internal/backup/delta"
	"github.com/etcdhook/etcdhook/membership"
)

// runBackupFollow is the continuous backup writer (spec.backup.continuous, docs/design/16-backup-restore.md
// §16.10): it follows the cluster's revisions after the newest full snapshot and uploads them beside it,
// until SIGTERM (what it holds is uploaded before it exits). Its reports go to the backup Lease, where the
// hook reads the newest restorable point for status.backup.continuous.
func runBackupFollow(args []string) error {
	fs := flag.NewFlagSet("backup-follow", flag.ContinueOnError)
	st := storeFlags(fs)
	cluster, ns, dest, fileRoot, creds := st.cluster, st.namespace, st.destination, st.fileRoot, st.credentials
	uid := fs.String("cluster-uid", "", "its UID (chains start only from this UID's snapshots)")
	endpoints := fs.String("endpoints", "", "comma-separated client URLs (the client Service)")
	lease := fs.String("lease", "", "the backup Lease to report on (none: report to stderr only)")
	keepLast := fs.Int("keep-last", 0, "retention of the full snapshots this writer takes (0: no count limit)")
	maxAge := fs.Duration("max-age", 0, "retention by age of the full snapshots this writer takes (0: none)")
	tiers := retentionTierFlags(fs)
	copyTo := copyFlags(fs)
	interval := fs.Duration("chunk-interval", 5*time.Second, "upload what arrived at least this often")
	chunkBytes := fs.Int("chunk-bytes", 4<<20, "upload sooner once this many bytes of keys and values are held (bounds memory)")
	recheck := fs.Duration("recheck", 30*time.Second, "how often to look for a newer full snapshot (a new chain)")
	reportEvery := fs.Duration("report-every", 15*time.Second, "how often to report the restorable point on the Lease")
	access := etcdAccessFlags(fs)
	if err := parseFlags(fs, args, "cluster", "namespace", "cluster-uid", "endpoints", "destination"); err != nil {
		return err
	}
	if *interval <= 0 || *chunkBytes <= 0 || *recheck <= 0 {
		return usageError{fmt.Errorf("--chunk-interval, --chunk-bytes and --recheck must be positive")}
	}
	d, err := backup.ParseDestination(*dest)
	if err != nil {
		return usageError{fmt.Errorf("--destination %q %v", *dest, err)}
	}
	keys, err := st.keys()
	if err != nil {
		return err
	}
	log := jsonLogger().With("cluster", *cluster)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	events, flush := jobRecorder(*cluster, *ns, *uid, "etcdhook-backup", log)
	defer flush()
	report := leaseReporter(*ns, *lease, "etcdhook-backup", log)

	b, err := openStore(ctx, d, *fileRoot, *creds)
	if err != nil {
		return err
	}
	defer b.Close()
	copyPass, closeCopy := copyTo.passes(b, *ns, *cluster, *uid, log, events)
	defer closeCopy()
	membership.Continuous(ctx, access.etcd(log), b, log, membership.ContinuousRequest{
		Backup: membership.BackupRequest{
			Endpoints: strings.Split(*endpoints, ","), Destination: d, Namespace: *ns, Cluster: *cluster, ClusterUID: *uid,
			Retention: tiers.retention(*keepLast, *maxAge), Keys: keys,
		},
		To: keys.Recipients, ChunkInterval: *interval, ChunkBytes: *chunkBytes, Recheck: *recheck, ReportEvery: *reportEvery,
		Report:     func(r api.ContinuousReport) { report(api.AnnBackupContinuous, r) },
		Events:     events,
		CopyPass:   copyPass,
		ReportCopy: func(r api.CopyReport) { report(api.AnnBackupCopy, r) },
	})
	return nil
}

// runBackupList prints what a cluster's folder of a destination can be restored to (JSON, one
// api.Restorable per snapshot, newest first): what `kubectl etcd backups` runs in a Job beside the
// cluster, where the store and its credentials are.
func runBackupList(args []string) error {
	fs := flag.NewFlagSet("backup-list", flag.ContinueOnError)
	st := storeFlags(fs)
	cluster, ns, dest, fileRoot, creds := st.cluster, st.namespace, st.destination, st.fileRoot, st.credentials
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	if err := parseFlags(fs, args, "cluster", "namespace", "destination"); err != nil {
		return err
	}
	d, err := backup.ParseDestination(*dest)
	if err != nil {
		return usageError{fmt.Errorf("--destination %q %v", *dest, err)}
	}
	keys, err := st.keys()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	b, err := openStore(ctx, d, *fileRoot, *creds)
	if err != nil {
		return err
	}
	defer b.Close()
	list, err := membership.ListRestorable(ctx, b, d, *ns, *cluster, delta.ReadOptions{Identities: keys.Identities})
	if err != nil {
		return err
	}
	out, err := json.Marshal(list)
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}
