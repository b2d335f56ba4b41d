package sync

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// backupStatus is status.backup from the backup Lease's reports (readBackupReports: one that does not
// parse or claims a time ahead of the hook's clock is ignored and named there, since the Lease is
// writable by the backup Jobs and by hand) and the on-demand Job, nil without spec.backup.
func (p *plan) backupStatus() *api.BackupStatus {
	if !p.HasSpec || p.Spec.Backup == nil {
		return nil
	}
	f, n := p.f, p.f.Names
	st := &api.BackupStatus{}
	if r := p.BackupSuccess; r != nil {
		st.LastSuccessTime = &metav1.Time{Time: r.Time.UTC()}
		st.LastSnapshot, st.Revision, st.Size = r.Snapshot, r.Revision, r.Size
	}
	if r := p.BackupFailure; r != nil {
		st.LastFailureTime = &metav1.Time{Time: r.Time.UTC()}
		st.LastFailure = r.Message
	}
	if token := steps.BackupToken(p.f); token != "" {
		name := n.BackupJob(token)
		// Running from the answer that renders the Job: its creation is not a new fact.
		od := &api.OnDemandBackup{Token: token, Job: name, Phase: "Running"}
		if j := f.Observed.Jobs[name]; j != nil {
			switch state, _ := facts.JobStatus(j); state {
			case facts.JobSucceeded:
				od.Phase = "Succeeded"
			case facts.JobFailed:
				od.Phase = "Failed"
			}
		}
		st.OnDemand = od
	}
	if r := p.BackupContinuous; r != nil {
		c := &api.ContinuousBackupStatus{Snapshot: r.Snapshot, ChainStart: r.ChainStart, Revision: r.Revision,
			ReportTime: &metav1.Time{Time: r.Time.UTC()}, Message: r.Message}
		if r.RevisionTime != nil {
			c.Time = &metav1.Time{Time: r.RevisionTime.UTC()}
		}
		st.Continuous = c
	}
	if r := p.BackupCopy; r != nil {
		st.Copy = &api.BackupCopyStatus{Snapshot: r.Snapshot, Revision: r.Revision, Time: &metav1.Time{Time: r.Time.UTC()}, Message: r.Message}
	}
	return st
}

// copyConditions: BackupCopyFailing while the last copy pass failed (its message); the next pass that
// succeeds clears it.
func (p *plan) copyConditions(st *api.BackupStatus, add func(string, bool, string, string)) {
	if st == nil || st.Copy == nil || p.Spec.Backup == nil || p.Spec.Backup.Copy == nil || st.Copy.Message == "" {
		return
	}
	add(api.CondBackupCopyFailing, true, "CopyFailed", st.Copy.Message+" (the next pass tries again; the primary's backups are not affected)")
}

// continuousConditions: BackupLagging when the continuous backup's newest restorable point is older
// than maxLag while the cluster runs, or the writer never reported within maxLag of its StatefulSet's
// creation. The writer reports its point every 15 s even when nothing is written, so an old point is a
// writer stopped, failing or behind, not an idle cluster.
func (p *plan) continuousConditions(st *api.BackupStatus, add func(string, bool, string, string)) {
	b := p.Spec.Backup
	if st == nil || b == nil || b.Continuous == nil || !p.f.Bootstrapped || p.Restoring {
		return
	}
	lag := b.Continuous.Lag()
	now := p.f.Now
	c := st.Continuous
	if c == nil || c.Time == nil {
		w := p.f.Observed.StatefulSets[p.f.Names.BackupWriter()]
		if w == nil || w.CreationTimestamp.IsZero() || now.Sub(w.CreationTimestamp.Time) <= lag {
			return // not yet rendered, or given maxLag to report
		}
		msg := fmt.Sprintf("the continuous backup writer (StatefulSet %s, created %s) has not reported a restorable point within spec.backup.continuous.maxLag %s",
			w.Name, w.CreationTimestamp.UTC().Format(time.RFC3339), lag)
		if c != nil && c.Message != "" {
			msg += ": " + c.Message
		}
		add(api.CondBackupLagging, true, "NoRestorablePoint", msg)
		return
	}
	if age := now.Sub(c.Time.Time); age > lag {
		msg := fmt.Sprintf("the newest restorable point (revision %d at %s) is %s old, over spec.backup.continuous.maxLag %s",
			c.Revision, c.Time.UTC().Format(time.RFC3339), age.Round(time.Second), lag)
		if c.Message != "" {
			msg += "; the writer reports: " + c.Message
		}
		add(api.CondBackupLagging, true, "Lagging", msg)
	}
}

// backupConditions: BackupFailing when the newest attempt failed; BackupStale when a schedule has
// had no success for two of its periods (counted from when backups were configured until the first
// success).
func (p *plan) backupConditions(st *api.BackupStatus, add func(string, bool, string, string)) {
	b := p.Spec.Backup
	if st == nil || b == nil {
		return
	}
	if b.Schedule != "" && !p.f.Observed.CronJobsDeclared {
		add(api.CondBackupFailing, true, "CronJobsNotRegistered",
			"spec.backup.schedule is set but the CompositeController does not declare batch/v1 cronjobs as children: apply the current metacontroller/ registration")
	} else if st.LastFailureTime != nil && (st.LastSuccessTime == nil || st.LastFailureTime.After(st.LastSuccessTime.Time)) {
		if r := p.BackupFailure; r != nil && r.Terminal {
			add(api.CondBackupFailing, true, "BackupRefused", st.LastFailure+" (not retried by its Job: fix the cause; the next scheduled run or a new etcd.io/backup-now token tries again)")
		} else {
			add(api.CondBackupFailing, true, "BackupFailed", st.LastFailure)
		}
	} else if st.OnDemand != nil && st.OnDemand.Phase == "Failed" {
		add(api.CondBackupFailing, true, "OnDemandFailed", fmt.Sprintf("Job %s for token %q failed", st.OnDemand.Job, st.OnDemand.Token))
	}
	if b.Schedule == "" {
		return
	}
	sched, err := api.ParseSchedule(b.Schedule)
	if err != nil {
		return // validated before adoption
	}
	// Until the first success, counted from when backups were configured: the backup Lease's creation
	// (not yet observed: just configured, nothing is due).
	l := p.f.Observed.Leases[p.f.Names.BackupName()]
	if st.LastSuccessTime == nil && (l == nil || l.CreationTimestamp.IsZero()) {
		return
	}
	var since time.Time
	what := ""
	if l != nil {
		since, what = l.CreationTimestamp.Time, "since backups were configured ("+l.CreationTimestamp.UTC().Format(time.RFC3339)+")"
	}
	if st.LastSuccessTime != nil {
		since, what = st.LastSuccessTime.Time, "since "+st.LastSuccessTime.UTC().Format(time.RFC3339)
	}
	// Two runs after the last success (or creation) the schedule should have produced a new one.
	due := sched.Next(sched.Next(since.UTC())) // the CronJob runs in UTC (Etc/UTC)
	if due.IsZero() {
		return // a schedule that never fires (refused by validation)
	}
	if p.f.Now.After(due) {
		add(api.CondBackupStale, true, "NoRecentBackup", fmt.Sprintf("no backup succeeded %s; schedule %q ran at least twice since (due by %s)", what, b.Schedule, due.UTC().Format(time.RFC3339)))
	}
}

// restoreStatus is status.restore of a cluster created from a snapshot: the seed's Lease report says
// whether and what it restored, or why it cannot.
func (p *plan) restoreStatus(add func(string, bool, string, string)) *api.RestoreStatus {
	if !p.HasSpec || p.Spec.Restore == nil {
		return nil
	}
	f := p.f
	rs := &api.RestoreStatus{Source: p.Spec.Restore.From, Phase: "Restoring", ToTime: p.Spec.Restore.ToTime.DeepCopy()}
	if r := p.Spec.Restore.ToRevision; r != nil {
		rs.ToRevision = *r
	}
	if f.Bootstrapped {
		rs.Phase = "Restored"
	}
	for _, lv := range f.SortedLeases() {
		r := lv.Report
		if r.RestoredFrom != "" {
			rs.Snapshot = r.RestoredFrom
			rs.Revision, _ = strconv.ParseInt(r.RestoredRevision, 10, 64)
			rs.Phase = "Restored"
		}
		if f.Bootstrapped {
			continue
		}
		switch reason := r.Reason(); reason {
		case api.ReasonRestoreFailed, api.ReasonRestoreRefused:
			msg := strings.TrimSpace(strings.TrimPrefix(r.Error, reason+":"))
			rs.Message = msg
			cond := api.ReasonRestoreRetrying // a cause that may pass: the seed retries, for an hour at most
			if reason == api.ReasonRestoreRefused {
				cond, rs.Phase = api.ReasonRestoreRefused, "Failed"
			}
			add(api.CondRestoreFailed, true, cond, fmt.Sprintf("%s: %s", f.Names.Pod(lv.Ordinal), msg))
		}
	}
	return rs
}
