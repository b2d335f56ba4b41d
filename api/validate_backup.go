package api

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/etcdhook/etcdhook/internal/backup"
)

// cronParser reads spec.backup.schedule the way the CronJob controller does (robfig/cron, five fields
// and the @hourly-style descriptors), so a schedule the hook accepts is one Kubernetes runs.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule reads a schedule (spec.backup.schedule, spec.maintenance.defrag.schedule) as the
// CronJob controller does.
func ParseSchedule(s string) (cron.Schedule, error) { return cronParser.Parse(s) }

// namedSchedules are the descriptors a schedule may be (robfig/cron's and the CronJob's, without @every).
// With five fields, they make every accepted schedule fire at most once a minute.
var namedSchedules = map[string]bool{"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true, "@daily": true, "@midnight": true, "@hourly": true}

// Bounds of spec.backup.retention and spec.backup.continuous.
const (
	maxKeepLast      = 1000
	minMaxAge        = time.Hour
	minChunkInterval = time.Second
	maxChunkInterval = time.Minute
	minMaxLag        = 30 * time.Second
	maxMaxLag        = 24 * time.Hour
)

// Defaults of spec.backup.continuous, and how often its writer reports while nothing else changes
// (each report is a write of the backup Lease, and so a sync of the EtcdCluster).
const (
	DefaultChunkInterval  = 5 * time.Second
	DefaultMaxLag         = time.Minute
	ContinuousReportEvery = 15 * time.Second
)

// Interval is the chunk interval in force.
func (c ContinuousBackupSpec) Interval() time.Duration {
	if c.ChunkInterval != nil {
		return c.ChunkInterval.Duration
	}
	return DefaultChunkInterval
}

// Lag is the lag bound in force.
func (c ContinuousBackupSpec) Lag() time.Duration {
	if c.MaxLag != nil {
		return c.MaxLag.Duration
	}
	return DefaultMaxLag
}

// scheduleProblem says why a cron schedule (UTC, as the CronJob and the defragmentation passes run it)
// is refused, "" when it is usable.
func ScheduleProblem(schedule string) string {
	if up := strings.ToUpper(schedule); strings.HasPrefix(up, "TZ=") || strings.HasPrefix(up, "CRON_TZ=") {
		// The CronJob sets timeZone: Etc/UTC, and Kubernetes refuses a zone in both places.
		return "a time zone prefix is not allowed (the schedule runs in UTC)"
	}
	if d, _, _ := strings.Cut(strings.TrimSpace(schedule), " "); strings.HasPrefix(d, "@") && !namedSchedules[d] {
		// robfig/cron also reads "@every <duration>", which is no cron schedule: "@every 1s" rendered a
		// backup CronJob firing every second, and a defragmentation pass token that moved at every sync.
		return "only five fields or one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly (at most once a minute)"
	}
	sched, err := cronParser.Parse(schedule)
	if err != nil {
		return err.Error() + " (five fields, or @hourly, @daily, @weekly, @monthly)"
	}
	if sched.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return "never fires (a day that does not exist in its months)"
	}
	return ""
}

// validateBackup checks spec.backup and spec.restore on their own (docs/design/16-backup-restore.md §16). Each problem
// names its field.
func validateBackup(s ClusterSpec) []Problem {
	var ps []Problem
	add := func(reason, format string, args ...any) {
		ps = append(ps, Problem{reason, fmt.Sprintf(format, args...)})
	}
	if b := s.Backup; b != nil {
		d, err := backup.ParseDestination(b.Destination)
		if err != nil {
			add("InvalidBackup", "spec.backup.destination %q %v", backup.Redact(b.Destination), err)
		} else {
			checkClaim(add, "InvalidBackup", "spec.backup", d, b.VolumeClaimName)
			CheckStoreAccess(add, "InvalidBackup", "spec.backup", d, b.CredentialsSecret, b.StoreAccess)
		}
		if b.Schedule != "" {
			if msg := ScheduleProblem(b.Schedule); msg != "" {
				add("InvalidBackup", "spec.backup.schedule %q: %s", b.Schedule, msg)
			}
		}
		checkSecretName(add, "InvalidBackup", "spec.backup.credentialsSecret", b.CredentialsSecret)
		checkEncryption(add, "InvalidBackup", "spec.backup.encryption", b.Encryption)
		checkRetention(add, "spec.backup.retention", b.Retention)
		if c := b.Copy; c != nil {
			checkCopy(add, c, b.Destination)
		}
		if c := b.Continuous; c != nil {
			if i := c.ChunkInterval; i != nil && (i.Duration < minChunkInterval || i.Duration > maxChunkInterval) {
				add("InvalidBackup", "spec.backup.continuous.chunkInterval %s is outside %s..%s", i.Duration, minChunkInterval, maxChunkInterval)
			}
			if l := c.MaxLag; l != nil && (l.Duration < minMaxLag || l.Duration > maxMaxLag) {
				add("InvalidBackup", "spec.backup.continuous.maxLag %s is outside %s..%s", l.Duration, minMaxLag, maxMaxLag)
			} else if l != nil && l.Duration < c.Interval()+ContinuousReportEvery {
				add("InvalidBackup", "spec.backup.continuous.maxLag %s is below chunkInterval %s plus the writer's report period %s: it would always lag", l.Duration, c.Interval(), ContinuousReportEvery)
			}
		}
		if b.RestoreOnQuorumLoss && s.Storage.EmptyDir != nil {
			add("InvalidBackup", "spec.backup.restoreOnQuorumLoss needs volumes: storage.emptyDir has none to restore into")
		}
	}
	if r := s.Restore; r != nil {
		src, err := backup.ParseSource(r.From)
		if err != nil {
			add("InvalidRestore", "spec.restore.from %q %v", backup.Redact(r.From), err)
		} else {
			checkClaim(add, "InvalidRestore", "spec.restore", src.Destination, r.VolumeClaimName)
			CheckStoreAccess(add, "InvalidRestore", "spec.restore", src.Destination, r.CredentialsSecret, r.StoreAccess)
		}
		checkSecretName(add, "InvalidRestore", "spec.restore.credentialsSecret", r.CredentialsSecret)
		checkEncryption(add, "InvalidRestore", "spec.restore.encryption", r.Encryption)
		switch {
		case r.ToRevision != nil && r.ToTime != nil:
			add("InvalidRestore", "spec.restore.toRevision and spec.restore.toTime: one point only")
		case r.ToRevision != nil && *r.ToRevision < 1:
			add("InvalidRestore", "spec.restore.toRevision %d: revisions start at 1", *r.ToRevision)
		}
	}
	return ps
}

// checkStoreAccess: an object store is reached with the credentials the spec names, at an address
// that is not the node's own, unless the spec opts in (StoreAccess). Without these an editor of
// one namespace could act with the node's rights (the SDKs' default chain reads the instance's
// metadata service) or point a Job at that service.
func CheckStoreAccess(add func(string, string, ...any), reason, field string, d backup.Destination, secret string, a StoreAccess) {
	if d.Scheme != "file" && secret == "" && !a.AmbientCredentials {
		add(reason, "%s.credentialsSecret is required for %s:// (or set %s.ambientCredentials: true to use the credentials of the pods' environment: the node's role or a workload identity)", field, d.Scheme, field)
	}
	if why := d.LocalEndpoint(); why != "" && !a.AllowLocalEndpoint {
		add(reason, "%s: %s (set %s.allowLocalEndpoint: true if the store really is there)", field, why, field)
	}
}

// checkClaim: a file destination lives on a claim, and only a file destination names one.
func checkClaim(add func(string, string, ...any), reason, field string, d backup.Destination, claim string) {
	switch {
	case d.Scheme == "file" && claim == "":
		add(reason, "%s.volumeClaimName is required for a file:// destination (the directory is on that claim)", field)
	case d.Scheme != "file" && claim != "":
		add(reason, "%s.volumeClaimName is only for file:// destinations, not %s://", field, d.Scheme)
	case claim != "":
		checkSecretName(add, reason, field+".volumeClaimName", claim)
	}
}

// checkRetention: counts within bounds, an age no shorter than the smallest a schedule can keep.
func checkRetention(add func(string, string, ...any), field string, r BackupRetention) {
	if k := r.KeepLast; k != nil && (*k < 1 || *k > maxKeepLast) {
		add("InvalidBackup", "%s.keepLast %d is outside 1..%d", field, *k, maxKeepLast)
	}
	for _, tier := range []struct {
		field string
		v     *int32
	}{{"keepHourly", r.KeepHourly}, {"keepDaily", r.KeepDaily}, {"keepWeekly", r.KeepWeekly}, {"keepMonthly", r.KeepMonthly}} {
		if tier.v != nil && (*tier.v < 1 || *tier.v > maxKeepLast) {
			add("InvalidBackup", "%s.%s %d is outside 1..%d", field, tier.field, *tier.v, maxKeepLast)
		}
	}
	if a := r.MaxAge; a != nil && a.Duration < minMaxAge {
		add("InvalidBackup", "%s.maxAge %s is below %s", field, a.Duration, minMaxAge)
	}
}

// checkCopy: the second destination is another store (s3:// or gs://, not the primary's folder),
// reached as the primary's rules say, with a retention that holds.
func checkCopy(add func(string, string, ...any), c *BackupCopySpec, primary string) {
	d, err := backup.ParseDestination(c.Destination)
	switch {
	case err != nil:
		add("InvalidBackup", "spec.backup.copy.destination %q %v", backup.Redact(c.Destination), err)
		return
	case d.Scheme == "file":
		add("InvalidBackup", "spec.backup.copy.destination %q: a copy goes to another store (s3:// or gs://), not a claim", backup.Redact(c.Destination))
		return
	}
	if p, err := backup.ParseDestination(primary); err == nil && p.String() == d.String() {
		add("InvalidBackup", "spec.backup.copy.destination is spec.backup.destination itself: a copy must be elsewhere")
	}
	CheckStoreAccess(add, "InvalidBackup", "spec.backup.copy", d, c.CredentialsSecret, c.StoreAccess)
	checkSecretName(add, "InvalidBackup", "spec.backup.copy.credentialsSecret", c.CredentialsSecret)
	if c.Retention != nil {
		checkRetention(add, "spec.backup.copy.retention", *c.Retention)
	}
}

// checkEncryption: an encryption block names its Secret.
func checkEncryption(add func(string, string, ...any), reason, field string, e *EncryptionSpec) {
	switch {
	case e == nil:
	case e.SecretName == "":
		add(reason, "%s.secretName is required (the Secret with the age identity)", field)
	default:
		checkSecretName(add, reason, field+".secretName", e.SecretName)
	}
}

func checkSecretName(add func(string, string, ...any), reason, field, name string) {
	if name == "" {
		return
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		add(reason, "%s %q is not a valid object name: %s", field, name, errs[0])
	}
}

// validateRestoreChange: a restore is where a cluster's data starts, so it is set when the cluster is
// created and never later (the CRD says the same; the hook does not trust it).
func validateRestoreChange(applied *ClusterSpec, next ClusterSpec) []Problem {
	if applied == nil {
		return nil
	}
	a, b := applied.Restore, next.Restore
	if a == nil && b == nil || a != nil && b != nil && equality.Semantic.DeepEqual(*a, *b) {
		return nil
	}
	if a == nil {
		return []Problem{{"RestoreImmutable", "spec.restore can only be set when the cluster is created: this cluster runs on its own data (restore into a new EtcdCluster instead)"}}
	}
	return []Problem{{"RestoreImmutable", "spec.restore cannot change or be removed after creation"}}
}
