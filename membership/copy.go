package membership

import (
	"context"
	"log/slog"
	"time"

	"gocloud.dev/blob"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
)

// BackupCopy is spec.backup.copy as a pod runs it (docs/design/16-backup-restore.md §16.12): the second
// destination, opened, and its retention.
type BackupCopy struct {
	Bucket      *blob.Bucket
	Destination backup.Destination
	Retention   backup.Retention
}

// EventBackupCopyFailed: a pass that keeps the second destination up to date failed (Warning).
const EventBackupCopyFailed = "BackupCopyFailed"

// CopyBackups runs one pass of backup.Copy from the primary b to c for one cluster and returns the
// report for the backup Lease. A failure is reported (and posted as an Event), never fatal: the
// primary's backups stand on their own, and the next pass picks up where this one stopped.
func CopyBackups(ctx context.Context, b *blob.Bucket, c BackupCopy, namespace, name, clusterUID string, now time.Time, log *slog.Logger, events Recorder) api.CopyReport {
	res, err := backup.Copy(ctx, b, c.Bucket, namespace, name, clusterUID, c.Retention, now)
	r := api.CopyReport{Time: time.Now().UTC(), Copied: res.Snapshots + res.Chunks, Pruned: len(res.Pruned), Revision: res.NewestRevision}
	if res.Newest.Key != "" {
		r.Snapshot = c.Destination.ObjectURL(res.Newest.SnapshotKey())
	}
	if err != nil {
		log.Warn("backup copy", "error", err)
		f := CopyFailed(c.Destination.String(), err, events)
		r.Time, r.Message = f.Time, f.Message
		return r
	}
	if r.Copied > 0 || r.Pruned > 0 {
		log.Info("backup copy", "destination", c.Destination.String(), "copied", r.Copied, "pruned", r.Pruned, "revision", r.Revision)
	}
	return r
}

// CopyFailed is the report of a copy pass that failed (to reach destination, or in it), posted as an
// Event too.
func CopyFailed(destination string, err error, events Recorder) api.CopyReport {
	msg := "copy to " + destination + ": " + err.Error()
	recorderOr(events).Event(EventBackupCopyFailed, "Copy", msg, true)
	return api.CopyReport{Time: time.Now().UTC(), Message: msg}
}
