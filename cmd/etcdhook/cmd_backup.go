package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"gocloud.dev/blob"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/membership"
)

// runBackup is the backup Job (scheduled or on demand): one snapshot into the destination, its
// manifest, retention; the outcome is reported on the backup Lease, where the hook reads it for
// status.backup (docs/design/16-backup-restore.md §16).
func runBackup(args []string) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	f := backupJobFlags(fs, backupJobUsage{
		uid:      "its UID (in the manifest; retention drops only this UID's snapshots)",
		keepLast: "keep the newest N snapshots (0: no count limit)",
		maxAge:   "drop snapshots older than this (0: no age limit)",
	})
	token := fs.String("token", "", "the etcd.io/backup-now token this backup answers")
	timeout := fs.Duration("timeout", time.Hour, "give up after this long")
	if err := parseFlags(fs, args, "cluster", "namespace", "endpoints", "destination"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	job, flush, err := f.start()
	if err != nil {
		return err
	}
	defer flush()

	req := f.request(job)
	req.Token = *token
	res, err := backupOnce(ctx, job.log, job.d, *f.fileRoot, *f.credentials, req, f.access)
	now := time.Now().UTC()
	if err != nil && res.Manifest.Key != "" {
		// The snapshot is stored and verified; only retention failed. The backup succeeded (a retry
		// would only store more): success first, then the failure dated after it, so that
		// BackupFailing says retention is failing until the next success.
		job.report(api.AnnBackupSuccess, successReport(job.d, res, now, *token))
		msg := "snapshot stored, but " + err.Error()
		job.report(api.AnnBackupFailure, api.BackupReport{Time: now.Add(time.Millisecond), Message: msg, Token: *token})
		job.events.Event(membership.EventBackupFailed, "Prune", msg, true)
		job.log.Warn("retention failed", "error", err)
		return nil
	}
	if err != nil {
		msg, terminal := err.Error(), backup.Terminal(err)
		job.report(api.AnnBackupFailure, api.BackupReport{Time: now, Message: msg, Token: *token, Terminal: terminal})
		job.events.Event(membership.EventBackupFailed, "Backup", "backup to "+job.d.String()+" failed: "+msg, true)
		if terminal {
			return refusalError{err} // exit 3: the Job's pod failure policy fails it without retrying
		}
		return err
	}
	r := successReport(job.d, res, now, *token)
	job.report(api.AnnBackupSuccess, r)
	note := fmt.Sprintf("snapshot %s stored (revision %d, %d bytes, from %s)", r.Snapshot, r.Revision, r.Size, res.Manifest.Member)
	if len(res.Pruned) > 0 {
		note += fmt.Sprintf("; %d older pruned", len(res.Pruned))
	}
	if len(res.Orphans) > 0 {
		note += fmt.Sprintf("; %d leftovers without a manifest deleted", len(res.Orphans))
	}
	job.events.Event(membership.EventBackupSucceeded, "Backup", note, false)
	if *f.copyTo.destination != "" {
		// The copy after the backup it copies; its failure is its own report, not the backup's.
		job.report(api.AnnBackupCopy, copyOnce(ctx, job.log, job.d, *f.fileRoot, *f.credentials, f.copyTo, *f.namespace, *f.cluster, *f.uid, job.events))
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	return nil
}

// copyOnce opens both stores (the primary first: its credentials, then the copy's) and runs one copy pass.
func copyOnce(ctx context.Context, log *slog.Logger, d backup.Destination, fileRoot, creds string, c copyFlagSet, ns, name, uid string, events membership.Recorder) api.CopyReport {
	fail := func(err error) api.CopyReport {
		return membership.CopyFailed(backup.Redact(*c.destination), err, events)
	}
	b, err := openStore(ctx, d, fileRoot, creds)
	if err != nil {
		return fail(err)
	}
	defer b.Close()
	to, err := c.open(ctx)
	if err != nil {
		return fail(err)
	}
	defer to.Bucket.Close()
	return membership.CopyBackups(ctx, b, *to, ns, name, uid, time.Now(), log, events)
}

func successReport(d backup.Destination, res membership.BackupResult, now time.Time, token string) api.BackupReport {
	m := res.Manifest
	return api.BackupReport{Time: now, Snapshot: d.ObjectURL(m.SnapshotKey()), Revision: m.Revision, Size: m.Size, Token: token}
}

// backupOnce opens the store as the pod sees it and runs one backup.
func backupOnce(ctx context.Context, log *slog.Logger, d backup.Destination, fileRoot, creds string, req membership.BackupRequest, access etcdAccess) (membership.BackupResult, error) {
	b, err := openStore(ctx, d, fileRoot, creds)
	if err != nil {
		return membership.BackupResult{}, err
	}
	defer b.Close()
	return membership.Backup(ctx, access.etcd(log), b, log, req)
}

// openStore opens a destination as the pod sees it (its credentials Secret loaded, a file destination
// under the claim's mount) and checks it, so that a failure names the store's problem.
func openStore(ctx context.Context, d backup.Destination, fileRoot, creds string) (*blob.Bucket, error) {
	if err := backup.LoadCredentials(creds); err != nil {
		return nil, err
	}
	local := d
	if fileRoot != "" {
		local = d.Under(fileRoot)
	}
	b, err := local.Open(ctx)
	if err != nil {
		return nil, err
	}
	if err := backup.Check(ctx, d, b); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// leaseReporter merge-patches one report annotation onto the backup Lease (the backup Jobs' success and
// failure are separate keys, so neither write needs to read the other; the restore Jobs write theirs).
func leaseReporter(ns, lease, manager string, log *slog.Logger) func(key string, r fmt.Stringer) {
	nop := func(key string, r fmt.Stringer) { log.Info("report", "key", key, "report", r.String()) }
	if lease == "" {
		return nop
	}
	kube, err := inClusterKube()
	if err != nil {
		log.Warn("no report on the Lease: no API access", "error", err)
		return nop
	}
	return func(key string, r fmt.Stringer) {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: r.String()}}})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := kube.CoordinationV1().Leases(ns).Patch(ctx, lease, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: manager}); err != nil {
			log.Warn("writing the report", "lease", lease, "key", key, "error", err)
		}
	}
}

// runRestore restores a snapshot into a new data directory by hand (what a restored cluster's seed
// does on its own): for a disaster recovery outside the operator, and for measuring restores. The
// in-place restore's Jobs run it too: --verify-only while the cluster serves, then --replace once its
// members stopped; with --lease each reports its outcome there and posts an Event on the EtcdCluster.
func runRestore(args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	from := fs.String("from", "", "a snapshot URL, or a destination followed by /latest")
	cluster := fs.String("cluster", "", "the EtcdCluster's name (for /latest)")
	ns := fs.String("namespace", "", "its namespace (for /latest)")
	dataDir := fs.String("data-dir", "", "the data directory to create (must not exist, unless --replace)")
	replace := fs.Bool("replace", false, "move an existing data directory aside once the snapshot is restored beside it (etcd must not run on it)")
	verifyOnly := fs.Bool("verify-only", false, "download, check and restore into a scratch directory beside --data-dir, then remove it: touch nothing")
	uid := fs.String("cluster-uid", "", "bind the restored data to this EtcdCluster UID (the agent's binding file, docs/design/08-safety-rules.md §8.9) and refuse a snapshot of another cluster")
	accept := fs.String("accept-cluster", "", "with --cluster-uid: accept a snapshot of this other cluster (its manifest's UID, or <namespace>/<name>)")
	expect := fs.String("expect-sha256", "", "refuse a snapshot whose SHA-256 is not this one (the one a verification passed)")
	name := fs.String("name", "", "the member name etcd will start with")
	peerURL := fs.String("peer-url", "", "the member's peer URL")
	token := fs.String("token", "", "the initial cluster token")
	fileRoot := fs.String("file-root", "", "where a file source's claim is mounted")
	creds := fs.String("credentials-dir", "", "the credentials directory (a mounted Secret)")
	lease := fs.String("lease", "", "the backup Lease to report the outcome on (none: report to stdout only)")
	job := fs.String("job", "", "the Job this runs in, named in the report")
	timeout := fs.Duration("timeout", time.Hour, "give up after this long")
	toRevision := fs.Int64("to-revision", 0, "restore the keyspace at this revision (the newest snapshot at or before it, and the continuous backup's chain after it)")
	toTime := fs.String("to-time", "", "restore the keyspace at this time (RFC 3339): the newest revision the backups hold at or before it")
	encryption := encryptionFlag(fs)
	if err := parseFlags(fs, args, "from", "data-dir", "name", "peer-url"); err != nil {
		return err
	}
	point := backup.Point{Revision: *toRevision}
	if *toTime != "" {
		t, err := time.Parse(time.RFC3339Nano, *toTime)
		if err != nil {
			return usageError{fmt.Errorf("--to-time %q is not an RFC 3339 time: %v", *toTime, err)}
		}
		point.Time = t
	}
	if err := point.Check(); err != nil {
		return usageError{fmt.Errorf("--to-revision/--to-time %v", err)}
	}
	src, err := backup.ParseSource(*from)
	if err != nil {
		return usageError{fmt.Errorf("--from %q %v", backup.Redact(*from), err)}
	}
	keys, err := backup.LoadKeysDir(*encryption)
	if err != nil {
		return err
	}
	if *fileRoot != "" {
		src.Destination = src.Destination.Under(*fileRoot)
	}
	log := jsonLogger().With("cluster", *cluster)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req := membership.RestoreRequest{
		Source: src, Namespace: *ns, Cluster: *cluster, DataDir: *dataDir, Name: *name, PeerURL: *peerURL, Token: *token,
		CredentialsDir: *creds, Replace: *replace, VerifyOnly: *verifyOnly,
		ClusterUID: *uid, AcceptCluster: *accept, ExpectSHA256: *expect, Point: point, Keys: keys,
	}
	if *uid != "" && !*verifyOnly {
		// Bound before the data is in place, as the agent binds its own restore (docs/design/16-backup-restore.md §16.4).
		req.Bind = func(res membership.RestoreResult) error {
			return membership.WriteBinding(*dataDir, membership.Binding{ClusterUID: *uid, PeerURL: *peerURL,
				Restored: &membership.Restored{URL: res.URL, Revision: res.Revision}})
		}
	}
	res, err := membership.Restore(ctx, log, req)
	r := api.RestoreReport{Time: time.Now().UTC(), Job: *job, Outcome: api.RestoreRestored}
	if res.Manifest.Key != "" || res.URL != "" {
		r.Snapshot, r.SHA256, r.Revision, r.Size = res.URL, res.Manifest.SHA256, res.Manifest.Revision, res.Manifest.Size
	}
	if err == nil && res.Revision > 0 {
		r.AtRevision = res.Revision
		if !res.Time.IsZero() {
			at := res.Time.UTC()
			r.AtTime = &at
		}
	}
	if *verifyOnly {
		r.Outcome = api.RestoreVerified
	}
	if err != nil {
		r.Outcome, r.Message = api.RestoreFailed, err.Error()
		if membership.Refused(err) {
			r.Outcome = api.RestoreRefused
			err = refusalError{err}
		}
	}
	if *lease != "" {
		reportRestore(*cluster, *ns, *uid, *lease, r, log)
	}
	if err != nil {
		return err
	}
	// What the result holds (with --verify-only, what it would hold): the dry run of a restore to a point.
	out, _ := json.Marshal(map[string]any{"snapshot": res.URL, "revision": res.Revision, "time": res.Time, "keys": res.Keys,
		"chunks": res.Chunks, "size": res.Manifest.Size, "sha256": res.Manifest.SHA256})
	fmt.Println(string(out))
	return nil
}

// reportRestore writes an in-place restore Job's outcome on the backup Lease, where the hook reads it,
// and posts it as an Event on the EtcdCluster, where kubectl describe shows it.
func reportRestore(cluster, ns, uid, lease string, r api.RestoreReport, log *slog.Logger) {
	events, flush := jobRecorder(cluster, ns, uid, "etcdhook-restore", log)
	defer flush()
	leaseReporter(ns, lease, "etcdhook-restore", log)(api.AnnRestoreReport, r)
	what := "the in-place restore"
	if r.Outcome == api.RestoreVerified {
		what = "the in-place restore's verification"
	}
	switch r.Outcome {
	case api.RestoreVerified:
		events.Event(membership.EventSnapshotVerified, "Verify", fmt.Sprintf("snapshot %s verified (revision %d, %d bytes): the members stop for the restore", r.Snapshot, r.Revision, r.Size), false)
	case api.RestoreRefused:
		events.Event(membership.EventRestoreFailed, "Refuse", what+" refused the snapshot, nothing was changed: "+r.Message, true)
	case api.RestoreFailed:
		events.Event(membership.EventRestoreFailed, "Restore", what+" failed (the Job retries): "+r.Message, true)
	}
}
