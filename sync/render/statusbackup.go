package render

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// backupStatus is status.backup from the backup Lease's reports (read by the decision,
// sync/backupreports.go: one that does not parse or claims a time ahead of the hook's clock is ignored
// and named there, since the Lease is writable by the backup Jobs and by hand) and the on-demand Job,
// nil without spec.backup.
func backupStatus(f *facts.Facts, d *steps.Decision) *api.BackupStatus {
	if !d.HasSpec || d.Spec.Backup == nil {
		return nil
	}
	n := f.Names
	st := &api.BackupStatus{}
	if r := d.Backup.Success; r != nil {
		st.LastSuccessTime = &metav1.Time{Time: r.Time.UTC()}
		st.LastSnapshot, st.Revision, st.Size = r.Snapshot, r.Revision, r.Size
	}
	if r := d.Backup.Failure; r != nil {
		st.LastFailureTime = &metav1.Time{Time: r.Time.UTC()}
		st.LastFailure = r.Message
	}
	if token := steps.BackupToken(f); token != "" {
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
	if r := d.Backup.Continuous; r != nil {
		c := &api.ContinuousBackupStatus{Snapshot: r.Snapshot, ChainStart: r.ChainStart, Revision: r.Revision,
			ReportTime: &metav1.Time{Time: r.Time.UTC()}, Message: r.Message}
		if r.RevisionTime != nil {
			c.Time = &metav1.Time{Time: r.RevisionTime.UTC()}
		}
		st.Continuous = c
	}
	if r := d.Backup.Copy; r != nil {
		st.Copy = &api.BackupCopyStatus{Snapshot: r.Snapshot, Revision: r.Revision, Time: &metav1.Time{Time: r.Time.UTC()}, Message: r.Message}
	}
	return st
}

// copyConditions: BackupCopyFailing while the last copy pass failed (its message); the next pass that
// succeeds clears it.
func copyConditions(d *steps.Decision, st *api.BackupStatus, add func(string, bool, string, string)) {
	if st == nil || st.Copy == nil || d.Spec.Backup == nil || d.Spec.Backup.Copy == nil || st.Copy.Message == "" {
		return
	}
	add(api.CondBackupCopyFailing, true, "CopyFailed", st.Copy.Message+" (the next pass tries again; the primary's backups are not affected)")
}

// continuousConditions: BackupLagging when the continuous backup's newest restorable point is older
// than maxLag while the cluster runs, or the writer never reported within maxLag of its StatefulSet's
// creation. The writer reports its point every 15 s even when nothing is written, so an old point is a
// writer stopped, failing or behind, not an idle cluster.
func continuousConditions(f *facts.Facts, d *steps.Decision, st *api.BackupStatus, add func(string, bool, string, string)) {
	b := d.Spec.Backup
	if st == nil || b == nil || b.Continuous == nil || !f.Bootstrapped || d.Restoring {
		return
	}
	lag := b.Continuous.Lag()
	now := f.Now
	c := st.Continuous
	if c == nil || c.Time == nil {
		w := f.Observed.StatefulSets[f.Names.BackupWriter()]
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
func backupConditions(f *facts.Facts, d *steps.Decision, st *api.BackupStatus, add func(string, bool, string, string)) {
	b := d.Spec.Backup
	if st == nil || b == nil {
		return
	}
	if b.Schedule != "" && !f.Observed.CronJobsDeclared {
		add(api.CondBackupFailing, true, "CronJobsNotRegistered",
			"spec.backup.schedule is set but the CompositeController does not declare batch/v1 cronjobs as children: apply the current metacontroller/ registration")
	} else if st.LastFailureTime != nil && (st.LastSuccessTime == nil || st.LastFailureTime.After(st.LastSuccessTime.Time)) {
		if r := d.Backup.Failure; r != nil && r.Terminal {
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
	l := f.Observed.Leases[f.Names.BackupName()]
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
	if f.Now.After(due) {
		add(api.CondBackupStale, true, "NoRecentBackup", fmt.Sprintf("no backup succeeded %s; schedule %q ran at least twice since (due by %s)", what, b.Schedule, due.UTC().Format(time.RFC3339)))
	}
}
