package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup/delta"
	"github.com/etcdhook/etcdhook/membership"
)

// runBackupFollow is the continuous backup writer (spec.backup.continuous, docs/design/16-backup-restore.md
// §16.10): it follows the cluster's revisions after the newest full snapshot and uploads them beside it,
// until SIGTERM (what it holds is uploaded before it exits). Its reports go to the backup Lease, where the
// hook reads the newest restorable point for status.backup.continuous.
func runBackupFollow(args []string) error {
	fs := flag.NewFlagSet("backup-follow", flag.ContinueOnError)
	f := backupJobFlags(fs, backupJobUsage{
		uid:      "its UID (chains start only from this UID's snapshots)",
		keepLast: "retention of the full snapshots this writer takes (0: no count limit)",
		maxAge:   "retention by age of the full snapshots this writer takes (0: none)",
	})
	interval := fs.Duration("chunk-interval", 5*time.Second, "upload what arrived at least this often")
	chunkBytes := fs.Int("chunk-bytes", 4<<20, "upload sooner once this many bytes of keys and values are held (bounds memory)")
	recheck := fs.Duration("recheck", 30*time.Second, "how often to look for a newer full snapshot (a new chain)")
	reportEvery := fs.Duration("report-every", 15*time.Second, "how often to report the restorable point on the Lease")
	if err := parseFlags(fs, args, "cluster", "namespace", "cluster-uid", "endpoints", "destination"); err != nil {
		return err
	}
	if *interval <= 0 || *chunkBytes <= 0 || *recheck <= 0 {
		return usageError{fmt.Errorf("--chunk-interval, --chunk-bytes and --recheck must be positive")}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	job, flush, err := f.start()
	if err != nil {
		return err
	}
	defer flush()

	b, err := openStore(ctx, job.d, *f.fileRoot, *f.credentials)
	if err != nil {
		return err
	}
	defer b.Close()
	copyPass, closeCopy := f.copyTo.passes(b, *f.namespace, *f.cluster, *f.uid, job.log, job.events)
	defer closeCopy()
	membership.Continuous(ctx, f.access.etcd(job.log), b, job.log, membership.ContinuousRequest{
		Backup: f.request(job),
		To:     job.keys.Recipients, ChunkInterval: *interval, ChunkBytes: *chunkBytes, Recheck: *recheck, ReportEvery: *reportEvery,
		Report:     func(r api.ContinuousReport) { job.report(api.AnnBackupContinuous, r) },
		Events:     job.events,
		CopyPass:   copyPass,
		ReportCopy: func(r api.CopyReport) { job.report(api.AnnBackupCopy, r) },
	})
	return nil
}

// runBackupList prints what a cluster's folder of a destination can be restored to (JSON, one
// api.Restorable per snapshot, newest first): what `kubectl etcd backups` runs in a Job beside the
// cluster, where the store and its credentials are.
func runBackupList(args []string) error {
	fs := flag.NewFlagSet("backup-list", flag.ContinueOnError)
	st := storeFlags(fs)
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	if err := parseFlags(fs, args, "cluster", "namespace", "destination"); err != nil {
		return err
	}
	d, keys, err := st.parse()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	b, err := openStore(ctx, d, *st.fileRoot, *st.credentials)
	if err != nil {
		return err
	}
	defer b.Close()
	list, err := membership.ListRestorable(ctx, b, d, *st.namespace, *st.cluster, delta.ReadOptions{Identities: keys.Identities})
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
