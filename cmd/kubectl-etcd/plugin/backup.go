package plugin

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/etcdhook/etcdhook/api"
)

type backupOpts struct {
	name    string
	token   string
	wait    bool
	timeout time.Duration
	kube    KubeFlags
}

// runBackup asks for one backup now: it sets the etcd.io/backup-now annotation to a new token (the hook
// renders one Job per token) and, with --wait, follows status.backup.onDemand for that token.
func runBackup(ctx context.Context, env Env, args []string) error {
	o := &backupOpts{}
	fs := newFlags("backup", env, &o.kube)
	// Not --token: that is kubectl's bearer token flag.
	fs.StringVar(&o.token, "id", "", "the backup's token, the annotation's value (default: the current time); a token is backed up once")
	fs.BoolVarP(&o.wait, "wait", "w", true, "wait until the backup succeeded or failed")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "how long --wait waits")
	if err := fs.Parse(args); err != nil {
		return parseErr(err)
	}
	var err error
	if o.name, err = oneName("backup", fs.Args()); err != nil {
		return err
	}
	if o.token == "" {
		o.token = strconv.FormatInt(env.Now().Unix(), 10)
	}
	c, err := env.Connect(&o.kube)
	if err != nil {
		return err
	}
	u, err := getCluster(ctx, c, o.name)
	if err != nil {
		return err
	}
	if _, found, _ := unstructured.NestedMap(u.Object, "spec", "backup"); !found {
		return fmt.Errorf("backup: %s/%s has no spec.backup (where would the snapshot go?)", c.Namespace, o.name)
	}
	if err := annotate(ctx, c, o.name, api.AnnBackupNow, &o.token); err != nil {
		return err
	}
	fmt.Fprintf(env.Out, "backup %q of %s/%s requested\n", o.token, c.Namespace, o.name)
	if !o.wait {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	for {
		u, err := getCluster(wctx, c, o.name)
		if err == nil {
			snap, err := snapshotOf(u)
			if err != nil {
				return err
			}
			if b := snap.status.Backup; b != nil && b.OnDemand != nil && b.OnDemand.Token == o.token {
				switch b.OnDemand.Phase {
				case "Succeeded":
					fmt.Fprintf(env.Out, "succeeded: %s (revision %d, %d bytes)\n", b.LastSnapshot, b.Revision, b.Size)
					return nil
				case "Failed":
					return fmt.Errorf("backup %q failed (Job %s): %s", o.token, b.OnDemand.Job, b.LastFailure)
				}
			}
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return &ExitError{Code: 130, Err: ctx.Err()}
			}
			return fmt.Errorf("timed out after %s waiting for backup %q of %s/%s", o.timeout, o.token, c.Namespace, o.name)
		case <-time.After(env.PollInterval):
		}
	}
}
