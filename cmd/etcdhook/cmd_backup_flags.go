package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"gocloud.dev/blob"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/membership"
)

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
