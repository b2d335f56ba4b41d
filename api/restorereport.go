package api

import (
	"errors"
	"time"
)

// An in-place restore (docs/design/16-backup-restore.md §16.8) runs two Jobs: one verifies the snapshot while the
// cluster still serves, the other restores it once the members have stopped. Each reports its outcome
// on the backup Lease under AnnRestoreReport, and the hook reads only the report of the Job it waits
// for (Job): the Lease is writable by every backup Job and by hand.

// AnnRestoreReport is the in-place restore Jobs' report on the backup Lease (JSON, RestoreReport).
const AnnRestoreReport = "etcd.io/restore-report"

// AnnRestoreForeignCluster on the EtcdCluster accepts, for the next etcd.io/restore-from value, a
// snapshot of another cluster: its value must name that cluster as the snapshot's manifest does (its
// UID, or <namespace>/<name> for a manifest without one). Without it a snapshot of another cluster is
// refused before any member stops.
const AnnRestoreForeignCluster = "etcd.io/restore-foreign-cluster"

// RestoreOutcome is what a restore Job reports.
type RestoreOutcome string

const (
	// RestoreVerified: the snapshot downloaded, matched its manifest and etcd's hash, and etcd's
	// library restored it into a scratch directory.
	RestoreVerified RestoreOutcome = "Verified"
	// RestoreRestored: the snapshot replaced member 0's data.
	RestoreRestored RestoreOutcome = "Restored"
	// RestoreRefused: the snapshot is damaged, missing, changed since its verification, or another
	// cluster's; another attempt would not change that, and nothing was touched.
	RestoreRefused RestoreOutcome = "Refused"
	// RestoreFailed: anything else (the store, the volume); the Job's attempts may still succeed.
	RestoreFailed RestoreOutcome = "Failed"
)

// RestoreExitRefused is the exit code of a Job command that met a cause another attempt would meet
// again (a restore Job's RestoreRefused, a backup Job's refused credentials or missing bucket, a claim
// the API will not grow): its pod failure policy fails the Job at once instead of retrying, and the
// Job's Failed condition (reason PodFailurePolicy) tells the hook the failure is terminal.
const RestoreExitRefused = 3

// RestoreReport is one restore Job attempt's outcome.
type RestoreReport struct {
	Time    time.Time      `json:"time"`
	Job     string         `json:"job"`
	Outcome RestoreOutcome `json:"outcome"`
	// Snapshot (URL), SHA256, Revision and Size: the snapshot the source resolved to, when it did.
	Snapshot string `json:"snapshot,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
	Revision int64  `json:"revision,omitempty"`
	Size     int64  `json:"size,omitempty"`
	// AtRevision and AtTime: the revision the restored keyspace is at (with a point, or a chain replayed
	// after the snapshot), and when the continuous backup writer received it. The restore Job of an
	// in-place restore to a point is pinned to the AtRevision its verification found.
	AtRevision int64      `json:"atRevision,omitempty"`
	AtTime     *time.Time `json:"atTime,omitempty"`
	// Message: why, for Refused and Failed.
	Message string `json:"message,omitempty"`
}

// String renders the report for its annotation, within its bound.
func (r RestoreReport) String() string {
	r.Message = reportMessage(r.Message)
	return reportJSON(r)
}

// ParseRestoreReport reads a report annotation; empty is no report.
func ParseRestoreReport(s string) (*RestoreReport, error) {
	return parseReport(s, func(r *RestoreReport) error {
		switch {
		case r.Time.IsZero():
			return errors.New("no time")
		case r.Job == "":
			return errors.New("no job")
		}
		switch r.Outcome {
		case RestoreVerified, RestoreRestored, RestoreRefused, RestoreFailed:
			return nil
		}
		return errors.New("unknown outcome " + Truncate(string(r.Outcome), 64))
	})
}
