package plugin

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/etcdhook/etcdhook/api"
)

// runBackup asks for one backup now: it sets the etcd.io/backup-now annotation to a new token (the hook
// renders one Job per token) and, with --wait, follows status.backup.onDemand for that token.
func runBackup(ctx context.Context, env Env, args []string) error {
	// Not --token: that is kubectl's bearer token flag.
	o, c, u, err := startRequest(ctx, "backup", env, args, requestFlags{
		idHelp:   "the backup's token, the annotation's value (default: the current time); a token is backed up once",
		waitHelp: "wait until the backup succeeded or failed",
		timeout:  30 * time.Minute,
	})
	if err != nil {
		return err
	}
	if _, found, _ := unstructured.NestedMap(u.Object, "spec", "backup"); !found {
		return fmt.Errorf("backup: %s/%s has no spec.backup (where would the snapshot go?)", c.Namespace, o.name)
	}
	if err := o.ask(ctx, env, c, api.AnnBackupNow, "backup %q of %s/%s requested"); err != nil || !o.wait {
		return err
	}
	return o.follow(ctx, env, c, func(snap *Snapshot) (bool, error) {
		if b := snap.status.Backup; b != nil && b.OnDemand != nil && b.OnDemand.Token == o.token {
			switch b.OnDemand.Phase {
			case "Succeeded":
				fmt.Fprintf(env.Out, "succeeded: %s (revision %d, %d bytes)\n", b.LastSnapshot, b.Revision, b.Size)
				return true, nil
			case "Failed":
				return true, fmt.Errorf("backup %q failed (Job %s): %s", o.token, b.OnDemand.Job, b.LastFailure)
			}
		}
		return false, nil
	}, func() error {
		return fmt.Errorf("timed out after %s waiting for backup %q of %s/%s", o.timeout, o.token, c.Namespace, o.name)
	})
}
