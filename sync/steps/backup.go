package steps

import (
	"fmt"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// BackupToken is the etcd.io/backup-now token asked for, "" when none.
func BackupToken(f *facts.Facts) string {
	return strings.TrimSpace(f.Parent.Annotations[api.AnnBackupNow])
}

// BackupInput is what BackupReports reads of the decisions before it: the spec chosen.
type BackupInput struct {
	HasSpec bool
	Spec    api.ClusterSpec
}

// BackupReportsState is the backup Lease's reports as status renders them (Decision.Backup).
type BackupReportsState struct {
	// Success, Failure: the last backup Job's; Continuous: the continuous writer's; Copy: the last copy
	// pass's (spec.backup.copy).
	Success, Failure *api.BackupReport
	Continuous       *api.ContinuousReport
	Copy             *api.CopyReport
}

// BackupDecision is the backup reports' part of the decision.
type BackupDecision struct {
	Reports BackupReportsState
	// Distrusted: reports ignored, and an on-demand backup asked without spec.backup (added to
	// Decision.Distrusted).
	Distrusted []string
}

// BackupReports reads, with the spec chosen, what the backup Jobs reported on the backup Lease, for
// status to render. Without spec.backup the Lease is not read, and an on-demand backup asked anyway is
// named (InputIgnored).
func BackupReports(f *facts.Facts, in BackupInput) BackupDecision {
	var d BackupDecision
	if !in.HasSpec {
		return d
	}
	distrust := func(format string, args ...any) { d.Distrusted = append(d.Distrusted, fmt.Sprintf(format, args...)) }
	if in.Spec.Backup == nil {
		if token := BackupToken(f); token != "" {
			distrust("annotation %s=%q asks for a backup, but spec.backup names no destination: ignored", api.AnnBackupNow, token)
		}
		return d
	}
	l := f.Observed.Leases[f.Names.BackupName()]
	if l == nil {
		return d
	}
	// A report ignored is named with the decision's notes: the facts are not written after reading.
	noted := func(note string) {
		if note != "" {
			distrust("%s", note)
		}
	}
	// inFolder accepts a report naming no snapshot, or one in this cluster's folder of destination (as
	// the writer names it: a hand-edited report could name anything); field names the destination.
	inFolder := func(key, field, destination string) func(string) bool {
		return func(snapshot string) bool {
			if snapshot == "" || inClusterFolder(destination, f.Names, snapshot) {
				return true
			}
			distrust("Lease %s annotation %s names snapshot %s, not one of this cluster's folder in %s: ignored",
				l.Name, key, backup.Redact(snapshot), field)
			return false
		}
	}
	read := func(key string) *api.BackupReport {
		r, note := facts.LeaseReport(f.Now, l, key, api.ParseBackupReport, func(*api.BackupReport) bool { return true },
			func(r *api.BackupReport) time.Time { return r.Time })
		noted(note)
		return r
	}
	d.Reports.Success, d.Reports.Failure = read(api.AnnBackupSuccess), read(api.AnnBackupFailure)
	if in.Spec.Backup.Continuous != nil {
		own := inFolder(api.AnnBackupContinuous, "spec.backup.destination", in.Spec.Backup.Destination)
		var note string
		d.Reports.Continuous, note = facts.LeaseReport(f.Now, l, api.AnnBackupContinuous, api.ParseContinuousReport,
			func(r *api.ContinuousReport) bool { return own(r.Snapshot) }, func(r *api.ContinuousReport) time.Time { return r.Time })
		noted(note)
	}
	if c := in.Spec.Backup.Copy; c != nil {
		own := inFolder(api.AnnBackupCopy, "spec.backup.copy.destination", c.Destination)
		var note string
		d.Reports.Copy, note = facts.LeaseReport(f.Now, l, api.AnnBackupCopy, api.ParseCopyReport,
			func(r *api.CopyReport) bool { return own(r.Snapshot) }, func(r *api.CopyReport) time.Time { return r.Time })
		noted(note)
	}
	return d
}

// inClusterFolder says whether url names a snapshot in the cluster's folder of destination.
func inClusterFolder(destination string, n api.Names, url string) bool {
	d, err := backup.ParseDestination(destination)
	if err != nil {
		return false
	}
	src, err := backup.ParseSource(url)
	if err != nil || src.Snapshot == "" {
		return false
	}
	return d.ObjectURL(backup.ClusterDir(n.Namespace, n.Cluster)+src.Snapshot) == url
}
