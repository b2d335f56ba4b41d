package sync

import (
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// readBackupReports reads, with the spec chosen, what the backup Jobs reported on the backup Lease, for
// status to render. Without spec.backup the Lease is not read, and an on-demand backup asked anyway is
// named (InputIgnored).
func (p *plan) readBackupReports() {
	if !p.HasSpec {
		return
	}
	f := p.f
	if p.Spec.Backup == nil {
		if token := steps.BackupToken(p.f); token != "" {
			p.distrust("annotation %s=%q asks for a backup, but spec.backup names no destination: ignored", api.AnnBackupNow, token)
		}
		return
	}
	l := f.Observed.Leases[f.Names.BackupName()]
	if l == nil {
		return
	}
	// A report ignored is named with the decision's notes: the facts are not written after reading.
	noted := func(note string) {
		if note != "" {
			p.distrust("%s", note)
		}
	}
	read := func(key string) *api.BackupReport {
		r, note := facts.LeaseReport(f.Now, l, key, api.ParseBackupReport, func(*api.BackupReport) bool { return true },
			func(r *api.BackupReport) time.Time { return r.Time })
		noted(note)
		return r
	}
	p.BackupSuccess, p.BackupFailure = read(api.AnnBackupSuccess), read(api.AnnBackupFailure)
	if p.Spec.Backup.Continuous != nil {
		var note string
		p.BackupContinuous, note = facts.LeaseReport(f.Now, l, api.AnnBackupContinuous, api.ParseContinuousReport, func(r *api.ContinuousReport) bool {
			if r.Snapshot == "" || p.ownSnapshot(r.Snapshot) {
				return true
			}
			p.distrust("Lease %s annotation %s names snapshot %s, not one of this cluster's folder in spec.backup.destination: ignored",
				l.Name, api.AnnBackupContinuous, backup.Redact(r.Snapshot))
			return false
		}, func(r *api.ContinuousReport) time.Time { return r.Time })
		noted(note)
	}
	if c := p.Spec.Backup.Copy; c != nil {
		var note string
		p.BackupCopy, note = facts.LeaseReport(f.Now, l, api.AnnBackupCopy, api.ParseCopyReport, func(r *api.CopyReport) bool {
			if r.Snapshot == "" || inFolder(c.Destination, f.Names, r.Snapshot) {
				return true
			}
			p.distrust("Lease %s annotation %s names snapshot %s, not one of this cluster's folder in spec.backup.copy.destination: ignored",
				l.Name, api.AnnBackupCopy, backup.Redact(r.Snapshot))
			return false
		}, func(r *api.CopyReport) time.Time { return r.Time })
		noted(note)
	}
}

// ownSnapshot says whether url names a snapshot in this cluster's folder of spec.backup.destination,
// as the writer names the snapshot its chain follows (a hand-edited report could name anything).
func (p *plan) ownSnapshot(url string) bool {
	return inFolder(p.Spec.Backup.Destination, p.f.Names, url)
}

// inFolder says whether url names a snapshot in the cluster's folder of destination.
func inFolder(destination string, n api.Names, url string) bool {
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
