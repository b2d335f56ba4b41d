package api

import (
	"fmt"
	"time"
)

// BackupReport is one backup attempt as a backup Job reports it on the backup Lease: the newest
// success under AnnBackupSuccess, the newest failure under AnnBackupFailure (docs/design/16-backup-restore.md §16.5).
type BackupReport struct {
	Time time.Time `json:"time"`
	// Snapshot (URL), Revision and Size: a success's.
	Snapshot string `json:"snapshot,omitempty"`
	Revision int64  `json:"revision,omitempty"`
	Size     int64  `json:"size,omitempty"`
	// Message: a failure's.
	Message string `json:"message,omitempty"`
	// Token: the etcd.io/backup-now token the Job answered, empty for a scheduled one.
	Token string `json:"token,omitempty"`
	// Terminal: a failure another attempt would meet again (the store refused the credentials, no such
	// bucket, no key): the Job stopped at once instead of retrying.
	Terminal bool `json:"terminal,omitempty"`
}

// ParseBackupReport reads a report annotation; empty is no report.
func ParseBackupReport(s string) (*BackupReport, error) {
	return parseReport(s, func(r *BackupReport) error {
		if r.Time.IsZero() {
			return fmt.Errorf("no time")
		}
		return nil
	})
}

// String renders the report for its annotation.
func (r BackupReport) String() string {
	r.Message = reportMessage(r.Message)
	return reportJSON(r)
}

// ContinuousReport is what the continuous backup writer (issue 27, docs/design/16-backup-restore.md
// §16.10) reports on the backup Lease under AnnBackupContinuous: the newest restorable point of the
// chain it writes, and its last problem.
type ContinuousReport struct {
	// Time is when the writer wrote the report (its heartbeat: a report that stops moving is a writer
	// that stopped).
	Time time.Time `json:"time"`
	// Snapshot is the URL of the full snapshot the chain starts from, ChainStart its manifest's revision.
	Snapshot   string `json:"snapshot,omitempty"`
	ChainStart int64  `json:"chainStart,omitempty"`
	// Revision and RevisionTime: the chain holds every revision up to Revision, and nothing else was
	// written until RevisionTime. A restore to any time up to RevisionTime is possible.
	Revision     int64      `json:"revision,omitempty"`
	RevisionTime *time.Time `json:"revisionTime,omitempty"`
	// Message: the writer's last problem (a gap, a compaction, a store failing), empty once it writes again.
	Message string `json:"message,omitempty"`
}

// ParseContinuousReport reads the annotation; empty is no report.
func ParseContinuousReport(s string) (*ContinuousReport, error) {
	return parseReport(s, func(r *ContinuousReport) error {
		switch {
		case r.Time.IsZero():
			return fmt.Errorf("no time")
		case r.Revision < 0 || r.ChainStart < 0 || r.Revision > 0 && r.Revision < r.ChainStart:
			return fmt.Errorf("revision %d is not in the chain from %d", r.Revision, r.ChainStart)
		case r.Revision > 0 && r.RevisionTime == nil:
			return fmt.Errorf("revision %d without its time", r.Revision)
		case r.RevisionTime != nil && r.RevisionTime.After(r.Time):
			return fmt.Errorf("restorable point %s after the report's own time %s", r.RevisionTime.Format(time.RFC3339), r.Time.Format(time.RFC3339))
		}
		return nil
	})
}

// String renders the report for its annotation.
func (r ContinuousReport) String() string {
	r.Message = reportMessage(r.Message)
	return reportJSON(r)
}

// CopyReport is what the pod that keeps spec.backup.copy up to date (the continuous backup writer, or
// the backup Job without one) reports on the backup Lease under AnnBackupCopy after each pass
// (docs/design/16-backup-restore.md §16.12).
type CopyReport struct {
	Time time.Time `json:"time"`
	// Snapshot is the newest snapshot the copy holds (its URL there), Revision the newest revision its
	// chain reaches there.
	Snapshot string `json:"snapshot,omitempty"`
	Revision int64  `json:"revision,omitempty"`
	// Copied and Pruned: the snapshots and chunks this pass copied, the snapshots the copy's retention
	// dropped.
	Copied int `json:"copied,omitempty"`
	Pruned int `json:"pruned,omitempty"`
	// Message: why the pass failed (the copy is behind), empty when it succeeded.
	Message string `json:"message,omitempty"`
}

// ParseCopyReport reads the annotation; empty is no report.
func ParseCopyReport(s string) (*CopyReport, error) {
	return parseReport(s, func(r *CopyReport) error {
		switch {
		case r.Time.IsZero():
			return fmt.Errorf("no time")
		case r.Revision < 0 || r.Copied < 0 || r.Pruned < 0:
			return fmt.Errorf("negative counts")
		}
		return nil
	})
}

// String renders the report for its annotation.
func (r CopyReport) String() string {
	r.Message = reportMessage(r.Message)
	return reportJSON(r)
}

// Restorable is one full snapshot and the chain of revisions after it, as `etcdhook backup-list` prints
// them and `kubectl etcd backups` shows them: a restore can end anywhere from the snapshot's revision to
// the chain's last.
type Restorable struct {
	Snapshot      string    `json:"snapshot"`
	Time          time.Time `json:"time"`
	Revision      int64     `json:"revision"`
	Size          int64     `json:"size"`
	EtcdClusterID string    `json:"etcdClusterID"`
	ClusterUID    string    `json:"clusterUID,omitempty"`
	// Chain: the revisions stored after the snapshot, nil without continuous backup.
	Chain *RestorableChain `json:"chain,omitempty"`
}

// RestorableChain is a chain's span: its first and last revisions and when the writer received them.
type RestorableChain struct {
	Chunks    int       `json:"chunks"`
	First     int64     `json:"first"`
	Last      int64     `json:"last"`
	FirstTime time.Time `json:"firstTime"`
	LastTime  time.Time `json:"lastTime"`
	// Problem: why the chain cannot be replayed past Last (a gap, a chunk that does not read).
	Problem string `json:"problem,omitempty"`
}
