package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// runBackups lists what a cluster's backups can be restored to: each full snapshot and the span of the
// chain of revisions after it (continuous backup), newest first. The store is read where it is
// reachable with its credentials: by `etcdhook backup-list` run in the continuous backup writer's pod,
// with the destination flags that pod runs with.
func runBackups(ctx context.Context, env Env, args []string) error {
	var kf KubeFlags
	var output string
	fs := newFlags("backups", env, &kf)
	fs.StringVarP(&output, "output", "o", "", "json: print the list as JSON")
	if err := fs.Parse(args); err != nil {
		return parseErr(err)
	}
	name, err := oneName("backups", fs.Args())
	if err != nil {
		return err
	}
	c, err := env.Connect(&kf)
	if err != nil {
		return err
	}
	n := api.Names{Cluster: name, Namespace: c.Namespace}
	pod := n.BackupWriter() + "-0"
	p, err := c.Kube.CoreV1().Pods(c.Namespace).Get(ctx, pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("backups: %s/%s has no continuous backup writer (pod %s): it reads the store where it is reachable; without spec.backup.continuous, status.backup.lastSnapshot names the newest snapshot", c.Namespace, name, pod)
	}
	if err != nil {
		return err
	}
	cmd := []string{api.HookBinary, "backup-list"}
	for _, f := range []string{"cluster", "namespace", "destination", "credentials-dir", "file-root", "encryption-dir"} {
		if v := storeFlag(p.Spec.Containers[0].Command, f); v != "" {
			cmd = append(cmd, "--"+f+"="+v)
		}
	}
	var out, errOut bytes.Buffer
	if err := c.Exec(ctx, c.Namespace, pod, p.Spec.Containers[0].Name, cmd, nil, &out, &errOut); err != nil {
		return fmt.Errorf("backups: listing from %s: %v: %s", pod, err, strings.TrimSpace(errOut.String()))
	}
	var list []api.Restorable
	if err := json.Unmarshal(out.Bytes(), &list); err != nil {
		return fmt.Errorf("backups: %s printed no list: %v", pod, err)
	}
	if output == "json" {
		return json.NewEncoder(env.Out).Encode(list)
	}
	printRestorable(env, list)
	return nil
}

// printRestorable is the list as a table: what spec.restore.toRevision and toTime can reach.
func printRestorable(env Env, list []api.Restorable) {
	tw := tabwriter.NewWriter(env.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SNAPSHOT\tTAKEN\tREVISIONS\tTIMES\tNOTE")
	for _, r := range list {
		base := r.Snapshot
		if i := strings.LastIndex(strings.Split(base, "?")[0], "/"); i >= 0 {
			base = strings.Split(base, "?")[0][i+1:]
		}
		revs, times, note := fmt.Sprint(r.Revision), r.Time.UTC().Format(time.RFC3339), ""
		if ch := r.Chain; ch != nil {
			if ch.Chunks > 0 {
				revs = fmt.Sprintf("%d - %d", r.Revision, ch.Last)
				times = fmt.Sprintf("%s - %s", r.Time.UTC().Format(time.RFC3339), ch.LastTime.UTC().Format(time.RFC3339))
				note = fmt.Sprintf("%d chunks", ch.Chunks)
			}
			if ch.Problem != "" {
				note = strings.TrimSpace(note + "; not past this: " + ch.Problem)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", base, r.Time.UTC().Format(time.RFC3339), revs, times, note)
	}
	tw.Flush()
	if len(list) == 0 {
		fmt.Fprintln(env.Out, "no complete snapshot yet")
	}
}
