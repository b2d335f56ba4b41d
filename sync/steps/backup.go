package steps

import (
	"strings"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// BackupToken is the etcd.io/backup-now token asked for, "" when none.
func BackupToken(f *facts.Facts) string {
	return strings.TrimSpace(f.Parent.Annotations[api.AnnBackupNow])
}
