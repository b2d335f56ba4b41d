package api

import (
	"encoding/json"
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
}

// ParseBackupReport reads a report annotation; empty is no report.
func ParseBackupReport(s string) (*BackupReport, error) {
	if s == "" {
		return nil, nil
	}
	var r BackupReport
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, err
	}
	if r.Time.IsZero() {
		return nil, fmt.Errorf("no time")
	}
	return &r, nil
}

// String renders the report for its annotation.
func (r BackupReport) String() string {
	// Within the annotation's bound (BoundReportJSON) with room for the other fields and escaping.
	r.Message = Truncate(r.Message, BoundReportJSON.Bytes/8) // JSON escapes a byte into at most 6
	b, _ := json.Marshal(r)                                  // plain fields: cannot fail
	return string(b)
}
