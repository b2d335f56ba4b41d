package plugin

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
)

type restoreOpts struct {
	name, from, like   string
	credentials, claim string
	// ambient and localEndpoint: spec.restore's opt-ins (api.StoreAccess), from flags or --like.
	ambient, localEndpoint bool
	version                string
	size                   int32
	wait, inPlace, dryRun  bool
	// acceptCluster: --in-place's opt-in to another cluster's snapshot (api.AnnRestoreForeignCluster).
	acceptCluster string
	// toRevision and toTime: spec.restore's point.
	toRevision int64
	toTime     string
	timeout    time.Duration
	kube       KubeFlags
}

// runRestore creates a new EtcdCluster whose seed restores a snapshot: spec.restore, which the hook reads
// only when it creates a cluster (docs/design/16-backup-restore.md §16.4); with --in-place it replaces the data of an
// existing one instead (runInPlace). --like copies another cluster's spec (and, without --from, restores that cluster's
// last snapshot with its backup credentials); with --wait it follows the cluster until it is Running.
func runRestore(ctx context.Context, env Env, args []string) error {
	o := &restoreOpts{}
	fs := newFlags("restore", env, &o.kube)
	fs.StringVar(&o.from, "from", "", "the snapshot: a URL as status.backup.lastSnapshot shows it, or a destination followed by /latest")
	fs.StringVar(&o.like, "like", "", "copy the spec of this EtcdCluster (same namespace); without --from, restore its newest point (its continuous backup's end, else its last snapshot), or --to-revision/--to-time in its backups")
	fs.StringVar(&o.credentials, "credentials-secret", "", "the Secret with the object store's credentials (default: --like's spec.backup.credentialsSecret)")
	fs.BoolVar(&o.ambient, "ambient-credentials", false, "without --credentials-secret, use the pods' environment's credentials (spec.restore.ambientCredentials; default: --like's spec.backup)")
	fs.BoolVar(&o.localEndpoint, "allow-local-endpoint", false, "accept a store endpoint on a loopback or link-local address (spec.restore.allowLocalEndpoint; default: --like's spec.backup)")
	fs.StringVar(&o.claim, "claim", "", "for a file:// snapshot, the PersistentVolumeClaim holding it (default: --like's spec.backup.volumeClaimName)")
	fs.Int32Var(&o.size, "size", 0, fmt.Sprintf("members (default: --like's, else %d)", api.DefaultSize))
	fs.StringVar(&o.version, "version", "", fmt.Sprintf("etcd version (default: --like's, else %s); at least the snapshot's", api.DefaultVersion))
	fs.BoolVar(&o.inPlace, "in-place", false, "replace the data of the existing cluster NAME with the snapshot (etcd.io/restore-from; without --from, its last snapshot): every member stops and writes after the snapshot are lost")
	fs.StringVar(&o.acceptCluster, "accept-cluster", "", "with --in-place: accept a snapshot of this other cluster (the UID its refusal names; etcd.io/restore-foreign-cluster)")
	fs.Int64Var(&o.toRevision, "to-revision", 0, "restore the keyspace at this revision (spec.restore.toRevision, or etcd.io/restore-to with --in-place; needs continuous backup past the snapshot)")
	fs.StringVar(&o.toTime, "to-time", "", "restore the keyspace at this time, RFC 3339 (spec.restore.toTime, or etcd.io/restore-to with --in-place: the newest revision backed up at or before it)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print what the restore would hold (snapshot, revision, time, keys) without touching anything: a Job restores into scratch space with the store access of NAME (with --in-place) or of --like")
	fs.BoolVarP(&o.wait, "wait", "w", true, "wait until the restored cluster is Running and Available")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "how long --wait waits")
	if err := fs.Parse(args); err != nil {
		return parseErr(err)
	}
	var err error
	if o.name, err = oneName("restore", fs.Args()); err != nil {
		return err
	}
	if o.toRevision != 0 && o.toTime != "" {
		return &ExitError{Code: 2, Err: fmt.Errorf("restore: --to-revision or --to-time, not both")}
	}
	if o.toTime != "" {
		t, err := time.Parse(time.RFC3339Nano, o.toTime)
		if err != nil {
			return &ExitError{Code: 2, Err: fmt.Errorf("restore: --to-time %q is not an RFC 3339 time (2026-01-01T12:00:00Z)", o.toTime)}
		}
		o.toTime = backup.Point{Time: t}.Value()
	}
	if o.toRevision < 0 {
		return &ExitError{Code: 2, Err: fmt.Errorf("restore: --to-revision %d: revisions start at 1", o.toRevision)}
	}
	if o.dryRun && !o.inPlace && o.like == "" {
		return &ExitError{Code: 2, Err: fmt.Errorf("restore --dry-run reads the store as an existing cluster's backups do: use it with --in-place (NAME's) or --like")}
	}
	if o.inPlace {
		if o.like != "" || o.credentials != "" || o.claim != "" || o.size != 0 || o.version != "" {
			return &ExitError{Code: 2, Err: fmt.Errorf("restore --in-place: --like, --credentials-secret, --claim, --size and --version are for a new cluster (in place, the store is reached with the cluster's spec.backup)")}
		}
		c, err := env.Connect(&o.kube)
		if err != nil {
			return err
		}
		if o.dryRun {
			u, err := getCluster(ctx, c, o.name)
			if err != nil {
				return err
			}
			if err := o.defaultSource(u, c.Namespace+"/"+o.name); err != nil {
				return err
			}
			return o.runDryRun(ctx, env, c, o.name, string(u.GetUID()))
		}
		return o.runInPlace(ctx, env, c)
	}
	if o.acceptCluster != "" {
		return &ExitError{Code: 2, Err: fmt.Errorf("restore: --accept-cluster is for --in-place (a new cluster restores any cluster's snapshot)")}
	}
	if o.from == "" && o.like == "" {
		return &ExitError{Code: 2, Err: fmt.Errorf("restore: --from (a snapshot URL) or --like (a cluster whose last snapshot to restore) is required")}
	}
	c, err := env.Connect(&o.kube)
	if err != nil {
		return err
	}
	if o.dryRun {
		// The source --like would give, read with --like's store access, into scratch space.
		if _, err := o.fromLike(ctx, c); err != nil {
			return err
		}
		return o.runDryRun(ctx, env, c, o.like, "")
	}
	switch _, err := getCluster(ctx, c, o.name); {
	case err == nil:
		return fmt.Errorf("restore: %s/%s exists: a restore creates a new cluster (spec.restore is read only at creation). Restore under another name, replace its data with --in-place, or delete it first (its claims are kept: operations.md §7.3)", c.Namespace, o.name)
	case !apierrors.IsNotFound(err):
		return err
	}
	spec := map[string]any{}
	if o.like != "" {
		if spec, err = o.fromLike(ctx, c); err != nil {
			return err
		}
	}
	if o.size > 0 {
		spec["size"] = int64(o.size)
	}
	if o.version != "" {
		spec["version"] = o.version
	}
	restore := map[string]any{"from": o.from}
	if o.credentials != "" {
		restore["credentialsSecret"] = o.credentials
	}
	if o.claim != "" {
		restore["volumeClaimName"] = o.claim
	}
	if o.ambient {
		restore["ambientCredentials"] = true
	}
	if o.localEndpoint {
		restore["allowLocalEndpoint"] = true
	}
	if o.toRevision != 0 {
		restore["toRevision"] = o.toRevision
	}
	if o.toTime != "" {
		restore["toTime"] = o.toTime
	}
	spec["restore"] = restore
	if err := secretExists(ctx, c, o.credentials, "--credentials-secret"); err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": api.APIVersion, "kind": api.Kind,
		"metadata": map[string]any{"name": o.name, "namespace": c.Namespace},
		"spec":     spec,
	}}
	if _, err := c.Dynamic.Resource(GVR).Namespace(c.Namespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("restore: creating %s/%s: %w", c.Namespace, o.name, err)
	}
	fmt.Fprintf(env.Out, "restoring %s%s into the new cluster %s/%s\n", o.from, o.pointSuffix(), c.Namespace, o.name)
	if !o.wait {
		return nil
	}
	// Only a terminal failure ends the wait: one that may pass (RestoreRetrying) is shown as progress
	// while the seed retries, and turns terminal itself if it gives up.
	failed := func(s *Snapshot) error {
		if cond := condition(&s.status, api.CondRestoreFailed); cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == api.ReasonRestoreRefused {
			return fmt.Errorf("restore of %s/%s failed: %s (not retried: fix the cause, then delete the cluster and restore again, or delete pod %s-0 to try once more)",
				c.Namespace, o.name, cond.Message, o.name)
		}
		return nil
	}
	snap, err := waitSettled(ctx, c, o.name, env.Err, o.timeout, env.PollInterval, env.Now, failed, nil)
	if err != nil {
		return err
	}
	if r := snap.status.Restore; r != nil && r.Snapshot != "" {
		fmt.Fprintf(env.Out, "restored: %s (revision %d) on %s/%s, %d members\n", r.Snapshot, r.Revision, c.Namespace, o.name, len(snap.status.Members))
	} else {
		fmt.Fprintf(env.Out, "%s/%s is Running\n", c.Namespace, o.name)
	}
	return nil
}

// runInPlace asks the hook to replace the cluster's data with the snapshot (the etcd.io/restore-from
// annotation, docs/design/16-backup-restore.md §16.8) and, with --wait, follows it until the restored cluster is Running
// and Available at its size, or the restore fails.
func (o *restoreOpts) runInPlace(ctx context.Context, env Env, c *Clients) error {
	u, err := getCluster(ctx, c, o.name)
	if err != nil {
		return err
	}
	if err := o.defaultSource(u, c.Namespace+"/"+o.name); err != nil {
		return err
	}
	ann := u.GetAnnotations()
	if ann[api.AnnRestoreFrom] == o.from && ann[api.AnnRestoreTo] == o.point() {
		return fmt.Errorf("restore: %s/%s already carries %s=%s%s: a request is acted on once (status.restore says how it went)", c.Namespace, o.name, api.AnnRestoreFrom, o.from, o.pointSuffix())
	}
	if o.acceptCluster != "" {
		// Before the request: the hook reads the opt-in when the restore starts.
		if err := annotate(ctx, c, o.name, api.AnnRestoreForeignCluster, &o.acceptCluster); err != nil {
			return err
		}
	}
	// Source and point in one patch: the hook must never see the source without the point it goes with.
	var to *string
	if p := o.point(); p != "" {
		to = &p
	}
	if err := annotateAll(ctx, c, o.name, map[string]*string{api.AnnRestoreFrom: &o.from, api.AnnRestoreTo: to}); err != nil {
		return err
	}
	after := "the snapshot"
	if o.point() != "" {
		after = "the point"
	}
	fmt.Fprintf(env.Out, "restoring %s%s into %s/%s in place: every member stops, writes after %s are lost\n", o.from, o.pointSuffix(), c.Namespace, o.name, after)
	if !o.wait {
		return nil
	}
	mine := func(s *Snapshot) bool {
		r := s.status.Restore
		return r != nil && r.InPlace && r.Source == o.from && r.Point().Value() == o.point()
	}
	failed := func(s *Snapshot) error {
		// A refusal names the value it refused: one still shown for an earlier value is not ours.
		refused := func(c *metav1.Condition) bool {
			return c.Reason == "InvalidRestoreRequest" && strings.Contains(c.Message, strconv.Quote(backup.Redact(o.from)))
		}
		if cond := condition(&s.status, api.CondRestoreFailed); cond != nil && cond.Status == metav1.ConditionTrue && (mine(s) || refused(cond)) {
			return fmt.Errorf("restore of %s/%s failed: %s", c.Namespace, o.name, cond.Message)
		}
		return nil
	}
	done := func(s *Snapshot) bool {
		healthy, _ := s.voters()
		return mine(s) && s.status.Restore.Phase == "Restored" && s.status.Target != nil && int32(healthy) == s.status.Target.Size
	}
	snap, err := waitSettled(ctx, c, o.name, env.Err, o.timeout, env.PollInterval, env.Now, failed, done)
	if err != nil {
		return err
	}
	r := snap.status.Restore
	fmt.Fprintf(env.Out, "restored in place: %s (revision %d) on %s/%s, %d members, cluster ID %s (replaced %v)\n",
		r.Snapshot, r.Revision, c.Namespace, o.name, len(snap.status.Members), snap.status.ClusterID, r.ReplacedClusterIDs)
	// The hook's record keeps the value (carried out once); the annotation left behind would travel
	// with a copy of this object's manifest and restore the snapshot over a re-created cluster's data.
	if err := annotateAll(ctx, c, o.name, map[string]*string{api.AnnRestoreFrom: nil, api.AnnRestoreTo: nil}); err != nil {
		return fmt.Errorf("restored, but removing the %s and %s annotations failed (remove them by hand): %w", api.AnnRestoreFrom, api.AnnRestoreTo, err)
	}
	if o.acceptCluster != "" {
		if err := annotate(ctx, c, o.name, api.AnnRestoreForeignCluster, nil); err != nil {
			return fmt.Errorf("restored, but removing the %s annotation failed (remove it by hand): %w", api.AnnRestoreForeignCluster, err)
		}
	}
	return nil
}

// secretExists refuses a credentials Secret that is not there: the seed pod mounts it and would wait in
// ContainerCreating for good, where no restore can report. A Secret the user may not read is not
// refused (the pods may read what the user cannot).
func secretExists(ctx context.Context, c *Clients, name, flag string) error {
	if name == "" {
		return nil
	}
	_, err := c.Kube.CoreV1().Secrets(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("restore: the Secret %s/%s (%s) does not exist: the seed could not start without it; create it first", c.Namespace, name, flag)
	}
	return nil
}

// point is the point asked, as etcd.io/restore-to spells it ("" for none).
func (o *restoreOpts) point() string {
	return backup.Point{Revision: o.toRevision, Time: parsedTime(o.toTime)}.Value()
}

// pointSuffix names the point in a message.
func (o *restoreOpts) pointSuffix() string {
	if p := o.point(); p != "" {
		return " to " + p
	}
	return ""
}

// parsedTime is s (validated RFC 3339) as a time, zero for "".
func parsedTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// defaultSource is the source without --from: to a point, the newest snapshot before it and its chain
// (<destination>/latest); otherwise the cluster's last snapshot.
func (o *restoreOpts) defaultSource(u *unstructured.Unstructured, name string) error {
	if o.from != "" {
		return nil
	}
	if o.point() != "" {
		d, _, _ := unstructured.NestedString(u.Object, "spec", "backup", "destination")
		if d == "" {
			return fmt.Errorf("restore: %s has no spec.backup.destination to restore a point from: name the source with --from", name)
		}
		latest, err := latestOf(d)
		if err != nil {
			return fmt.Errorf("restore: %s's spec.backup.destination %w", name, err)
		}
		o.from = latest
		return nil
	}
	last, _, _ := unstructured.NestedString(u.Object, "status", "backup", "lastSnapshot")
	if last == "" {
		return fmt.Errorf("restore: %s has no successful backup (status.backup.lastSnapshot is empty): name the snapshot with --from", name)
	}
	o.from = last
	return nil
}

// fromLike fills what --like gives: the other cluster's spec without its restore and pause, and, where
// the flags leave them empty, its newest point (likeSource) and its backup credentials and claim.
func (o *restoreOpts) fromLike(ctx context.Context, c *Clients) (map[string]any, error) {
	other, err := getCluster(ctx, c, o.like)
	if err != nil {
		return nil, fmt.Errorf("restore: --like %s: %w", o.like, err)
	}
	spec, _, _ := unstructured.NestedMap(other.Object, "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	delete(spec, "restore")
	delete(spec, "paused")
	if err := o.likeSource(other, c.Namespace, o.like); err != nil {
		return nil, err
	}
	if o.credentials == "" {
		o.credentials, _, _ = unstructured.NestedString(spec, "backup", "credentialsSecret")
	}
	if o.credentials == "" && !o.ambient {
		o.ambient, _, _ = unstructured.NestedBool(spec, "backup", "ambientCredentials")
	}
	if !o.localEndpoint {
		o.localEndpoint, _, _ = unstructured.NestedBool(spec, "backup", "allowLocalEndpoint")
	}
	if o.claim == "" {
		o.claim, _, _ = unstructured.NestedString(spec, "backup", "volumeClaimName")
	}
	return spec, nil
}

// likeSource is the source --like gives without --from: the other cluster's newest point, or the point
// asked, in the other cluster's own folder (<destination>/<namespace>/<name>/latest, which the seed reads
// as that folder, not as the new cluster's: backup.ResolveFolder). With continuous backup the newest
// point is the end of its chain, which status.backup.lastSnapshot does not reach (and is empty when the
// writer took the first snapshot itself); without it, the last snapshot by its URL.
func (o *restoreOpts) likeSource(u *unstructured.Unstructured, namespace, name string) error {
	if o.from != "" {
		return nil
	}
	_, continuous, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "backup", "continuous")
	if o.point() == "" && !continuous {
		return o.defaultSource(u, namespace+"/"+name)
	}
	d, _, _ := unstructured.NestedString(u.Object, "spec", "backup", "destination")
	if d == "" {
		return fmt.Errorf("restore: %s/%s has no spec.backup.destination to restore from: name the source with --from", namespace, name)
	}
	dest, err := backup.ParseDestination(d)
	if err != nil {
		return fmt.Errorf("restore: %s/%s's spec.backup.destination %w", namespace, name, err)
	}
	o.from = dest.ObjectURL(backup.ClusterDir(namespace, name) + backup.Latest)
	return nil
}
