package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"strings"
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

// tierFlags are retention's calendar tiers (--keep-hourly and the like), shared by the backup Job and
// the continuous backup writer (whose own full snapshots are pruned alike).
type tierFlags struct{ hourly, daily, weekly, monthly *int }

func retentionTierFlags(fs *flag.FlagSet) tierFlags { return prefixedTierFlags(fs, "") }

// prefixedTierFlags are the tier flags under a prefix ("copy-": the second destination's).
func prefixedTierFlags(fs *flag.FlagSet, prefix string) tierFlags {
	return tierFlags{
		hourly:  fs.Int(prefix+"keep-hourly", 0, "keep the newest snapshot of each of the last N hours that have one"),
		daily:   fs.Int(prefix+"keep-daily", 0, "keep the newest snapshot of each of the last N days that have one"),
		weekly:  fs.Int(prefix+"keep-weekly", 0, "keep the newest snapshot of each of the last N ISO weeks that have one"),
		monthly: fs.Int(prefix+"keep-monthly", 0, "keep the newest snapshot of each of the last N months that have one"),
	}
}

// copyFlagSet is spec.backup.copy as the backup Job and the writer take it (§16.12).
type copyFlagSet struct {
	destination, credentials *string
	keepLast                 *int
	maxAge                   *time.Duration
	tiers                    tierFlags
}

func copyFlags(fs *flag.FlagSet) copyFlagSet {
	return copyFlagSet{
		destination: fs.String("copy-destination", "", "a second destination kept up to date with this one (s3:// or gs://)"),
		credentials: fs.String("copy-credentials-dir", "", "the second destination's mounted credentials Secret"),
		keepLast:    fs.Int("copy-keep-last", 0, "the second destination's retention: keep the newest N snapshots"),
		maxAge:      fs.Duration("copy-max-age", 0, "the second destination's retention: drop snapshots older than this"),
		tiers:       prefixedTierFlags(fs, "copy-"),
	}
}

// passes is the writer's copy pass (nil without --copy-destination): the second destination is opened at
// the first pass, and again after a failure, so that a copy that cannot be reached is reported and tried
// again without ever stopping the chain. close closes what is open.
func (c copyFlagSet) passes(b *blob.Bucket, ns, name, uid string, log *slog.Logger, events membership.Recorder) (pass func(context.Context) api.CopyReport, close func()) {
	if *c.destination == "" {
		return nil, func() {}
	}
	var to *membership.BackupCopy
	closeTo := func() {
		if to != nil {
			to.Bucket.Close()
			to = nil
		}
	}
	return func(ctx context.Context) api.CopyReport {
		if to == nil {
			var err error
			if to, err = c.open(ctx); err != nil {
				return membership.CopyFailed(backup.Redact(*c.destination), err, events)
			}
		}
		r := membership.CopyBackups(ctx, b, *to, ns, name, uid, time.Now(), log, events)
		if r.Message != "" {
			closeTo()
		}
		return r
	}, closeTo
}

// open is the second destination, opened with its own credentials (after the primary: see
// backup.Destination.OpenWith); nil without --copy-destination.
func (c copyFlagSet) open(ctx context.Context) (*membership.BackupCopy, error) {
	if *c.destination == "" {
		return nil, nil
	}
	d, err := backup.ParseDestination(*c.destination)
	if err != nil {
		return nil, usageError{fmt.Errorf("--copy-destination %q %v", backup.Redact(*c.destination), err)}
	}
	b, err := d.OpenWith(ctx, *c.credentials)
	if err != nil {
		return nil, fmt.Errorf("the copy's destination: %w", err)
	}
	if err := backup.Check(ctx, d, b); err != nil {
		b.Close()
		return nil, fmt.Errorf("the copy's destination: %w", err)
	}
	return &membership.BackupCopy{Bucket: b, Destination: d, Retention: c.tiers.retention(*c.keepLast, *c.maxAge)}, nil
}

func (t tierFlags) retention(keepLast int, maxAge time.Duration) backup.Retention {
	return backup.Retention{KeepLast: keepLast, MaxAge: maxAge, Hourly: *t.hourly, Daily: *t.daily, Weekly: *t.weekly, Monthly: *t.monthly}
}

// storeFlagSet is how the backup commands name their cluster's folder in a destination and reach it
// as the pod mounts it (the backup Job, the continuous writer, backup-list).
type storeFlagSet struct{ cluster, namespace, destination, fileRoot, credentials, encryption *string }

func storeFlags(fs *flag.FlagSet) storeFlagSet {
	return storeFlagSet{
		cluster:     fs.String("cluster", "", "the EtcdCluster's name (the snapshots' folder)"),
		namespace:   fs.String("namespace", "", "its namespace"),
		destination: fs.String("destination", "", "s3://bucket/prefix?…, gs://bucket/prefix or file:///dir"),
		fileRoot:    fs.String("file-root", "", "where a file destination's claim is mounted"),
		credentials: fs.String("credentials-dir", "", "the mounted credentials Secret"),
		encryption:  encryptionFlag(fs),
	}
}

// encryptionFlag is where the encryption Secret is mounted (spec.backup.encryption).
func encryptionFlag(fs *flag.FlagSet) *string {
	return fs.String("encryption-dir", "", "the mounted encryption Secret: its "+backup.KeyIdentity+" (age identities: the first encrypts, all decrypt) and optional "+backup.KeyRecipients+" (more recipients to encrypt to)")
}

// parse is the destination and the encryption keys the flags name (no keys: in the clear).
func (s storeFlagSet) parse() (backup.Destination, backup.Keys, error) {
	d, err := backup.ParseDestination(*s.destination)
	if err != nil {
		return backup.Destination{}, backup.Keys{}, usageError{fmt.Errorf("--destination %q %v", *s.destination, err)}
	}
	keys, err := backup.LoadKeysDir(*s.encryption)
	return d, keys, err
}

// backupJobFlagSet is what the backup Job and the continuous writer both take: the store, the cluster's
// UID and client URLs, the Lease they report on, the retention of the full snapshots they take, the
// copy, and how they reach etcd.
type backupJobFlagSet struct {
	storeFlagSet
	uid, endpoints, lease *string
	keepLast              *int
	maxAge                *time.Duration
	tiers                 tierFlags
	copyTo                copyFlagSet
	access                etcdAccess
}

// backupJobUsage is the help of the flags whose meaning differs between the backup Job and the writer.
type backupJobUsage struct{ uid, keepLast, maxAge string }

func backupJobFlags(fs *flag.FlagSet, u backupJobUsage) backupJobFlagSet {
	return backupJobFlagSet{
		storeFlagSet: storeFlags(fs),
		uid:          fs.String("cluster-uid", "", u.uid),
		endpoints:    fs.String("endpoints", "", "comma-separated client URLs (the client Service)"),
		lease:        fs.String("lease", "", "the backup Lease to report on (none: report to stderr only)"),
		keepLast:     fs.Int("keep-last", 0, u.keepLast),
		maxAge:       fs.Duration("max-age", 0, u.maxAge),
		tiers:        retentionTierFlags(fs),
		copyTo:       copyFlags(fs),
		access:       etcdAccessFlags(fs),
	}
}

// backupJob is what a backup Job's parsed flags open: its destination and keys, its log, the Events it
// posts on the EtcdCluster and the reports it writes on the backup Lease.
type backupJob struct {
	d      backup.Destination
	keys   backup.Keys
	log    *slog.Logger
	events membership.Recorder
	report func(key string, r fmt.Stringer)
}

// start opens the Job's destination, keys, log, Events and reports; flush posts the Events recorded.
func (f backupJobFlagSet) start() (backupJob, func(), error) {
	d, keys, err := f.parse()
	if err != nil {
		return backupJob{}, nil, err
	}
	log := jsonLogger().With("cluster", *f.cluster)
	events, flush := jobRecorder(*f.cluster, *f.namespace, *f.uid, "etcdhook-backup", log)
	report := leaseReporter(*f.namespace, *f.lease, "etcdhook-backup", log)
	return backupJob{d: d, keys: keys, log: log, events: events, report: report}, flush, nil
}

// request is the backup the flags describe (the backup Job adds the token it answers).
func (f backupJobFlagSet) request(job backupJob) membership.BackupRequest {
	return membership.BackupRequest{
		Endpoints: strings.Split(*f.endpoints, ","), Destination: job.d, Namespace: *f.namespace, Cluster: *f.cluster,
		ClusterUID: *f.uid, Retention: f.tiers.retention(*f.keepLast, *f.maxAge), Keys: job.keys,
	}
}
