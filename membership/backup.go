package membership

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"gocloud.dev/blob"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
)

// BackupRequest is one backup: of which cluster, from where, to where, kept how long.
type BackupRequest struct {
	// Endpoints are where voters answer (the client Service); the snapshot itself is read from one
	// member's own client URL.
	Endpoints   []string
	Destination backup.Destination
	Namespace   string
	Cluster     string
	ClusterUID  string
	Retention   backup.Retention
	// Token is the etcd.io/backup-now token this backup answers, empty for a scheduled one.
	Token string
	Now   func() time.Time
	// Keys encrypt the snapshot (none: stored in the clear).
	Keys backup.Keys
}

// BackupResult is what a backup stored and pruned.
type BackupResult struct {
	Manifest backup.Manifest
	Pruned   []backup.Manifest
	// Skipped names manifests that could not be read while pruning (left alone).
	Skipped []string
	// Orphans are the leftovers deleted: this cluster's snapshots without a manifest, older than
	// backup.OrphanAge.
	Orphans []string
}

// SnapshotMember picks the member to read a snapshot from: a healthy follower first (a snapshot
// loads the member's disk and network; the leader's are the cluster's), the leader only when no
// follower is healthy. Learners are never picked: their data may lag.
func SnapshotMember(members []api.Member, healthy map[string]*clientv3.StatusResponse) (api.Member, error) {
	var followers, leaders []api.Member
	for _, m := range members {
		st := healthy[m.ID]
		if m.Learner || st == nil {
			continue
		}
		if st.Leader == st.Header.MemberId {
			leaders = append(leaders, m)
		} else {
			followers = append(followers, m)
		}
	}
	// The most advanced follower: its snapshot loses the fewest recent writes.
	sort.SliceStable(followers, func(i, j int) bool {
		return healthy[followers[i].ID].RaftAppliedIndex > healthy[followers[j].ID].RaftAppliedIndex
	})
	if all := append(followers, leaders...); len(all) > 0 {
		return all[0], nil
	}
	return api.Member{}, fmt.Errorf("no healthy voter among %d members to take a snapshot from", len(members))
}

// Backup streams a snapshot of one member into the destination, writes its manifest once the
// snapshot is complete and verified, and only then prunes per retention (docs/design/16-backup-restore.md §16.2).
func Backup(ctx context.Context, e *Etcd, b *blob.Bucket, log *slog.Logger, req BackupRequest) (BackupResult, error) {
	if req.Now == nil {
		req.Now = time.Now
	}
	l, err := e.MemberList(ctx, req.Endpoints)
	if err != nil {
		return BackupResult{}, fmt.Errorf("reading the member list: %w", err)
	}
	m, err := SnapshotMember(l.Members, e.Health(ctx, l.Members))
	if err != nil {
		return BackupResult{}, err
	}
	c, err := e.client([]string{m.ClientURL})
	if err != nil {
		return BackupResult{}, err
	}
	defer c.Close()
	// etcd's snapshot stream carries no header: the revision and IDs come from the member's Status
	// just before the stream opens, so the manifest's revision is a lower bound (the snapshot holds at
	// least every write up to it; a restore reports the exact one, read from the file).
	st, err := c.Status(ctx, m.ClientURL)
	if err != nil {
		return BackupResult{}, fmt.Errorf("status of %s: %w", m.Name, err)
	}
	at := req.Now().UTC()
	log.Info("taking a snapshot", "member", m.Name, "id", m.ID, "destination", req.Destination.String())
	// No call timeout on the stream: a large database takes as long as it takes; the Job's deadline
	// bounds it.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	snap, err := c.SnapshotWithVersion(sctx)
	if err != nil {
		return BackupResult{}, fmt.Errorf("opening the snapshot stream of %s: %w", m.Name, err)
	}
	defer snap.Snapshot.Close()
	key := backup.SnapshotKey(req.Namespace, req.Cluster, at, st.Header.Revision)
	// Two backups of one revision in one second (the continuous writer's own snapshot and a Job's) would
	// have one key, and the store refuses the second at the end of its upload: the next free second
	// instead (keys sort by time, the manifest's time follows the key).
	for i := 0; i < 10; i++ {
		exists, err := b.Exists(ctx, key)
		if err != nil || !exists {
			break
		}
		at = at.Add(time.Second)
		key = backup.SnapshotKey(req.Namespace, req.Cluster, at, st.Header.Revision)
	}
	stored, err := backup.Upload(ctx, b, key, snap.Snapshot, req.ClusterUID, req.Keys)
	if err != nil {
		return BackupResult{}, err
	}
	man := backup.Manifest{
		Cluster: req.Cluster, Namespace: req.Namespace, ClusterUID: req.ClusterUID,
		EtcdClusterID: api.FormatID(st.Header.ClusterId), Member: m.Name,
		Revision: st.Header.Revision, EtcdVersion: st.Version,
		Size: stored.Size, SHA256: stored.SHA256, Encryption: stored.Encryption, Time: at,
		Snapshot: path.Base(key), Key: backup.ManifestKey(key), Token: req.Token,
	}
	if err := backup.WriteManifest(ctx, b, man); err != nil {
		return BackupResult{}, fmt.Errorf("writing the manifest of %s: %w", key, err)
	}
	res := BackupResult{Manifest: man}
	log.Info("snapshot stored", "snapshot", req.Destination.ObjectURL(key), "revision", man.Revision, "size", man.Size)
	ms, skipped, err := backup.List(ctx, b, req.Namespace, req.Cluster)
	res.Skipped = skipped
	if err != nil {
		return res, fmt.Errorf("listing for retention failed: %w", err)
	}
	// The snapshot just written counts as the newest whatever the clocks of earlier backups said: a
	// clock that went backwards must not make retention delete it. Only snapshots dated before it are
	// candidates: a newer one is another backup running at the same time (an on-demand one during a
	// scheduled one), which prunes for itself; otherwise each could delete the other's.
	order := []backup.Manifest{man}
	for _, o := range ms {
		if o.Key != man.Key && o.Time.Before(man.Time) {
			order = append(order, o)
		}
	}
	res.Pruned, err = backup.Prune(ctx, b, order, req.ClusterUID, req.Retention, req.Now())
	if err != nil {
		return res, fmt.Errorf("pruning failed: %w", err)
	}
	res.Orphans, err = backup.DeleteOrphans(ctx, b, req.Namespace, req.Cluster, req.ClusterUID, req.Now().Add(-backup.OrphanAge))
	if err != nil {
		return res, fmt.Errorf("pruning failed: %w", err)
	}
	return res, nil
}
