package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
	"gocloud.dev/blob"

	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/internal/backup/delta"
)

// RestoreRequest restores a snapshot into the data directory of a new cluster's seed.
type RestoreRequest struct {
	Source backup.Source
	// Namespace and Cluster: the cluster restored, whose folder "latest" searches unless the source's
	// URL names another (backup.ResolveFolder), and whose snapshots an in-place restore accepts.
	Namespace string
	Cluster   string
	// DataDir is where etcd will find the restored data; it must not exist yet, unless Replace.
	DataDir string
	// Replace: an existing DataDir (a stopped member's, docs/design/16-backup-restore.md §16.8) is moved aside once the
	// snapshot is restored beside it, never before; etcd must not run on it.
	Replace bool
	Name    string
	PeerURL string
	Token   string
	// Bind, when set, records the binding of the restored data before it is renamed into place (the
	// agent's: data without a binding would be refused as foreign after a crash in between).
	Bind func(RestoreResult) error
	// CredentialsDir is the mounted credentials Secret, read again at every attempt (a fixed key
	// works without a pod restart); "" for none.
	CredentialsDir string
	// ClusterUID, when set, is the EtcdCluster the data is restored for: a snapshot whose manifest names
	// another cluster (another namespace, name or UID) is refused (ErrForeignSnapshot) unless
	// AcceptCluster names it. A new cluster restored from another's snapshot (a clone) leaves it empty.
	ClusterUID    string
	AcceptCluster string
	// ExpectSHA256, when set, is the snapshot a verification passed: a source that now resolves to
	// another (a newer "latest") is refused rather than restored unverified.
	ExpectSHA256 string
	// Point is where the restored keyspace ends (issue 27): the zero Point restores a named snapshot as
	// it is, and a destination's newest snapshot with the chain of revisions after it (continuous
	// backup) to its end; a revision or a time restores the newest snapshot at or before it and
	// replays its chain up to it (docs/design/16-backup-restore.md §16.10).
	Point backup.Point
	// VerifyOnly does everything but the last step: the snapshot is downloaded, checked and restored
	// into a scratch directory beside DataDir, which is then removed. Nothing else is touched.
	VerifyOnly bool
	// Keys open an encrypted snapshot and chain (their identities).
	Keys backup.Keys
	// KeepRevisions restores the revisions as they are: no RevisionBump, nothing marked compacted. A
	// standby's seed (docs/design/21-standby.md §21.1) must hold exactly the primary's numbers, or no
	// revision the primary's chain records would land on its own; it is a new etcd cluster all the same
	// (its own Token), and takes no client writes until promoted, so nothing is issued twice.
	KeepRevisions bool
}

// Bump is the revision bump a restore applies: RevisionBump, or none with KeepRevisions.
func (r RestoreRequest) Bump() int64 {
	if r.KeepRevisions {
		return 0
	}
	return RevisionBump
}

// ErrForeignSnapshot: the snapshot's manifest names another EtcdCluster than the one restored in place.
var ErrForeignSnapshot = errors.New("snapshot of another cluster")

// ErrSnapshotChanged: the source resolves to another snapshot than the one verified.
var ErrSnapshotChanged = errors.New("snapshot changed since it was verified")

// ManifestCluster is how a manifest's cluster is named in an opt-in: its UID, or <namespace>/<name>
// for a manifest written before manifests carried the UID.
func ManifestCluster(m backup.Manifest) string {
	if m.ClusterUID != "" {
		return m.ClusterUID
	}
	return m.Namespace + "/" + m.Cluster
}

// findVerified is the manifest of the snapshot req's source names. With ExpectSHA256 and a "latest"
// source it is the snapshot verified, newest first, whether or not a newer one was stored since: the
// restore replaces the data with what passed, not with whatever came after.
func findVerified(ctx context.Context, b *blob.Bucket, req RestoreRequest) (backup.Manifest, error) {
	if req.Source.Snapshot == "" && !req.Point.IsZero() && req.ExpectSHA256 == "" {
		return findBefore(ctx, b, req)
	}
	if req.Source.Snapshot == "" && req.ExpectSHA256 == "" {
		return findFurthest(ctx, b, req)
	}
	if req.ExpectSHA256 == "" || req.Source.Snapshot != "" {
		m, err := backup.Find(ctx, b, req.Source, req.Namespace, req.Cluster)
		if err == nil && !req.Point.Reaches(m) {
			err = fmt.Errorf("%w: snapshot %s (revision %d, %s) is after %s", backup.ErrPointNotReached, m.Snapshot, m.Revision, m.Time.Format(time.RFC3339), req.Point)
		}
		return m, err
	}
	ns, name := req.folder()
	ms, _, err := backup.List(ctx, b, ns, name)
	if err != nil {
		return backup.Manifest{}, err
	}
	for _, m := range ms {
		if m.SHA256 == req.ExpectSHA256 {
			return m, nil
		}
	}
	return backup.Manifest{}, fmt.Errorf("%w: no snapshot with SHA-256 %s is left under %s (retention pruned it?)", ErrSnapshotChanged, req.ExpectSHA256,
		req.Source.Destination.ObjectURL(backup.ClusterDir(ns, name)))
}

// findFurthest is, for /latest without a point, the snapshot whose chain reaches the newest revision of
// the newest snapshot's etcd cluster: right after a full snapshot, its chain is still empty while the
// chain of the one before goes on (the writer moves to a new snapshot within 30 s), and the newest
// point is on that one. Ties go to the newer snapshot (less to replay). Only the chains' listings are
// read here.
func findFurthest(ctx context.Context, b *blob.Bucket, req RestoreRequest) (backup.Manifest, error) {
	// One listing (every manifest is a read): Find's own only for its refusal of an empty folder.
	ns, name := req.folder()
	ms, _, err := backup.List(ctx, b, ns, name)
	if err != nil {
		return backup.Manifest{}, err
	}
	if len(ms) == 0 {
		return backup.Find(ctx, b, req.Source, req.Namespace, req.Cluster)
	}
	m := ms[0]
	if m.EtcdClusterID == "" {
		return m, nil
	}
	best, bestEnd := m, chainEnd(ctx, b, m)
	older := 0
	for _, o := range ms {
		if o.Key == m.Key || o.EtcdClusterID != m.EtcdClusterID || o.Revision > bestEnd {
			continue
		}
		// The writer moves to a new snapshot within its recheck period: only the few before the
		// newest can still be ahead of it.
		if older++; older > 3 {
			break
		}
		if end := chainEnd(ctx, b, o); end > bestEnd {
			best, bestEnd = o, end
		}
	}
	return best, nil
}

// chainEnd is the last revision m's chain reaches without a gap (m's own revision without a chain).
func chainEnd(ctx context.Context, b *blob.Bucket, m backup.Manifest) int64 {
	spans, _, _ := delta.BlobChain{Bucket: b, Prefix: m.ChainsPrefix()}.List(ctx, m.Revision)
	end := m.Revision
	for _, s := range spans {
		if s.First != end+1 {
			break
		}
		end = s.Last
	}
	return end
}

// findBefore is the newest snapshot of the folder at or before req.Point: the one whose chain replays
// the least to reach it.
func findBefore(ctx context.Context, b *blob.Bucket, req RestoreRequest) (backup.Manifest, error) {
	ns, name := req.folder()
	ms, _, err := backup.List(ctx, b, ns, name)
	if err != nil {
		return backup.Manifest{}, err
	}
	for _, m := range ms {
		if req.Point.Reaches(m) {
			return m, nil
		}
	}
	if len(ms) == 0 {
		return backup.Find(ctx, b, req.Source, req.Namespace, req.Cluster) // its refusal of an empty folder
	}
	return backup.Manifest{}, fmt.Errorf("%w: no complete snapshot of %s/%s under %s is at or before %s (%d snapshots, all later)", backup.ErrPointNotReached,
		ns, name, req.Source.Destination.ObjectURL(backup.ClusterDir(ns, name)), req.Point, len(ms))
}

// folder is the namespace and name of the folder a /latest source searches: the one its URL names
// (backup.ResolveFolder), else this cluster's own. The identity checks keep using req's own.
func (req RestoreRequest) folder() (string, string) {
	return req.Source.Folder(req.Namespace, req.Cluster)
}

// checkIdentity refuses a snapshot of another cluster than req's, unless req accepts that one.
func checkIdentity(m backup.Manifest, req RestoreRequest) error {
	if req.ClusterUID == "" {
		return nil
	}
	own := m.Namespace == req.Namespace && m.Cluster == req.Cluster && (m.ClusterUID == "" || m.ClusterUID == req.ClusterUID)
	if own || (req.AcceptCluster != "" && req.AcceptCluster == ManifestCluster(m)) {
		return nil
	}
	return fmt.Errorf("%w: %s is a snapshot of %s/%s (UID %s), not of this cluster %s/%s (UID %s); to restore it in place, accept it by naming %q",
		ErrForeignSnapshot, m.Snapshot, m.Namespace, m.Cluster, m.ClusterUID, req.Namespace, req.Cluster, req.ClusterUID, ManifestCluster(m))
}

// Refused says whether a restore failed in a way another attempt would not change (a damaged, missing,
// changed or foreign snapshot, a point the backups do not reach, a bucket that does not exist, refused
// credentials), as opposed to a store that did not answer or the volume's hiccup.
func Refused(err error) bool {
	return backup.Terminal(err) || errors.Is(err, ErrForeignSnapshot) || errors.Is(err, ErrSnapshotChanged)
}

// RefusedField names the part of a restore request a refusal is about, as spec.restore spells it: the
// point (toRevision, toTime) the backups do not reach, the keys, the credentials, or else the source.
func RefusedField(err error, p backup.Point) string {
	switch {
	case errors.Is(err, backup.ErrPointNotReached) && p.Revision > 0:
		return "toRevision"
	case errors.Is(err, backup.ErrPointNotReached) && !p.Time.IsZero():
		return "toTime"
	case errors.Is(err, backup.ErrNoKey):
		return "encryption"
	case errors.Is(err, backup.ErrCredentials):
		return "credentialsSecret"
	}
	return "from"
}

// RevisionBump is added to the restored store's revision, and the store is marked compacted up to the
// new revision (etcdutl snapshot restore --bump-revision --mark-compacted, as Kubernetes' etcd restore
// guide asks). Without it the revisions written after the snapshot in the old cluster are issued again
// by the restored one: a client that watched the old cluster and resumes at such a revision would be
// given different events under numbers it already saw, and miss the real ones. With it, every revision
// after a restore is larger than any the old cluster could have issued within a billion writes, and a
// watch or read at an older revision gets ErrCompacted, so a client (a Kubernetes informer) lists again.
const RevisionBump = 1_000_000_000

// RestoreResult is what was restored.
type RestoreResult struct {
	Manifest backup.Manifest
	// URL is the snapshot's address.
	URL string
	// Revision is the restored keyspace's revision, read from the snapshot file itself (after the
	// replay of a chain, the point reached); the restored store continues from Revision + the request's Bump.
	Revision int64
	// Time is when that revision was written, as far as the backups know: the snapshot's time, or the
	// time the continuous writer received the revision. Keys is how many keys the keyspace holds.
	Time time.Time
	Keys int64
	// Chunks is how many chunks of the chain were replayed after the snapshot (0: the snapshot alone).
	Chunks int
	// Took: how long each step took (for the logs and the measurements).
	Took struct{ Download, Chain, Replay, Restore time.Duration }
}

// Restore downloads the snapshot into the data volume beside DataDir, checks it (size, SHA-256
// against its manifest, etcd's own hash), restores it with etcd's restore library as a one-member
// cluster, and only then renames the result to DataDir: a restore cut short or refused never leaves
// a data directory, so the seed never starts on half a snapshot (docs/design/16-backup-restore.md §16.4).
func Restore(ctx context.Context, log *slog.Logger, req RestoreRequest) (RestoreResult, error) {
	if _, err := os.Stat(req.DataDir); err == nil && !req.Replace {
		return RestoreResult{}, fmt.Errorf("refusing to restore: %s already exists", req.DataDir)
	}
	if req.Replace && !req.VerifyOnly {
		if err := checkNotRunning(req.DataDir); err != nil {
			return RestoreResult{}, err
		}
	}
	if err := backup.LoadCredentials(req.CredentialsDir); err != nil {
		return RestoreResult{}, err
	}
	src, err := backup.ResolveFolder(ctx, req.Source)
	if err != nil {
		return RestoreResult{}, err
	}
	req.Source = src
	b, err := req.Source.Destination.Open(ctx)
	if err != nil {
		return RestoreResult{}, err
	}
	defer b.Close()
	if err := backup.Check(ctx, req.Source.Destination, b); err != nil {
		return RestoreResult{}, err
	}
	m, err := findVerified(ctx, b, req)
	if err != nil {
		return RestoreResult{}, err
	}
	res := RestoreResult{Manifest: m, URL: req.Source.Destination.ObjectURL(m.SnapshotKey())}
	if err := checkIdentity(m, req); err != nil {
		return res, err
	}
	if req.ExpectSHA256 != "" && m.SHA256 != req.ExpectSHA256 {
		return res, fmt.Errorf("%w: %s has SHA-256 %s, the verified one %s", ErrSnapshotChanged, res.URL, m.SHA256, req.ExpectSHA256)
	}
	work := filepath.Join(filepath.Dir(filepath.Clean(req.DataDir)), "restore")
	if err := os.RemoveAll(work); err != nil { // an earlier attempt's leftovers
		return res, err
	}
	if err := os.MkdirAll(work, 0o700); err != nil {
		return res, err
	}
	defer os.RemoveAll(work)
	file := filepath.Join(work, "snapshot.db")
	log.Info("downloading the snapshot", "snapshot", res.URL, "size", m.Size, "revision", m.Revision)
	t0 := time.Now()
	if err := backup.Fetch(ctx, b, m, file, req.Keys.Identities); err != nil {
		return res, err
	}
	res.Took.Download = time.Since(t0)
	mgr := snapshot.NewV3(zap.NewNop())
	ds, err := mgr.Status(file)
	if err != nil {
		return res, fmt.Errorf("%w: %s is not an etcd database: %v", backup.ErrSnapshotDamaged, res.URL, err)
	}
	res.Revision, res.Time, res.Keys = ds.Revision, m.Time, int64(ds.TotalKey)
	if req.Source.Snapshot == "" || !req.Point.IsZero() {
		// The chain of revisions after the snapshot, up to the point: replayed into a snapshot of the
		// keyspace there, which then takes the same checks and restore as any snapshot.
		t1 := time.Now()
		plan, err := planReplay(ctx, b, m, req.Point, work, delta.ReadOptions{Identities: req.Keys.Identities})
		res.Took.Chain = time.Since(t1)
		if err != nil {
			return res, fmt.Errorf("the revisions after %s: %w", res.URL, err)
		}
		if plan.Target < ds.Revision && !req.Point.IsZero() {
			// The manifest's revision is a lower bound: this snapshot holds writes after the point.
			return res, fmt.Errorf("%w: snapshot %s holds revision %d, after %s (revision %d)", backup.ErrPointNotReached, res.URL, ds.Revision, req.Point, plan.Target)
		}
		if len(plan.heads) > 0 && plan.Target > ds.Revision {
			log.Info("replaying the revisions after the snapshot", "from", ds.Revision, "to", plan.Target, "chunks", len(plan.heads))
			replayed := filepath.Join(work, "replayed.db")
			t2 := time.Now()
			err := plan.replay(ctx, file, m.Revision, replayed, delta.ReadOptions{Identities: req.Keys.Identities})
			res.Took.Replay = time.Since(t2)
			if err != nil {
				return res, fmt.Errorf("replaying the revisions after %s up to %d: %w", res.URL, plan.Target, err)
			}
			if ds, err = mgr.Status(replayed); err != nil {
				return res, fmt.Errorf("the replayed keyspace: %w", err)
			}
			file = replayed
			res.Revision, res.Time, res.Keys, res.Chunks = ds.Revision, plan.TargetTime, int64(ds.TotalKey), len(plan.heads)
		}
	}
	out := filepath.Join(work, "data")
	t3 := time.Now()
	err = mgr.Restore(snapshot.RestoreConfig{
		SnapshotPath:        file,
		Name:                req.Name,
		OutputDataDir:       out,
		PeerURLs:            []string{req.PeerURL},
		InitialCluster:      req.Name + "=" + req.PeerURL,
		InitialClusterToken: req.Token,
		RevisionBump:        uint64(req.Bump()),
		MarkCompacted:       !req.KeepRevisions,
	})
	res.Took.Restore = time.Since(t3)

	if err != nil {
		var pathErr *os.PathError
		if !errors.As(err, &pathErr) && !errors.Is(err, syscall.ENOSPC) && ctx.Err() == nil {
			// Not the volume's failure: etcd's library refused the file's content.
			err = fmt.Errorf("%w: %v", backup.ErrSnapshotDamaged, err)
		}
		return res, fmt.Errorf("restoring %s: %w", res.URL, err)
	}
	if req.VerifyOnly {
		log.Info("snapshot verified: downloaded, checked and restorable", "snapshot", res.URL, "revision", res.Revision)
		return res, nil
	}
	// From here on a failure must leave the data directory as it was: the old data, moved aside for the
	// restored one, is moved back (with its binding) if the restored data cannot be put in its place.
	var aside string
	var oldBinding []byte
	undo := func(cause error) error {
		if aside == "" {
			return cause
		}
		if err := os.Rename(aside, req.DataDir); err != nil {
			return fmt.Errorf("%w; moving the old data back from %s also failed (move it back by hand): %v", cause, aside, err)
		}
		if oldBinding != nil {
			if err := os.WriteFile(bindingPath(req.DataDir), oldBinding, 0o600); err != nil {
				return fmt.Errorf("%w; the old data is back, but its binding could not be restored: %v", cause, err)
			}
		} else if err := os.Remove(bindingPath(req.DataDir)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w; the old data is back, but the new binding could not be removed: %v", cause, err)
		}
		return fmt.Errorf("%w (the old data was moved back)", cause)
	}
	if req.Replace {
		// Checked again: the download took a while. A timeout that ended it leaves the old data alone.
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("restoring %s: %w", res.URL, err)
		}
		if err := checkNotRunning(req.DataDir); err != nil {
			return res, err
		}
		if b, err := os.ReadFile(bindingPath(req.DataDir)); err == nil {
			oldBinding = b
		} else if !errors.Is(err, os.ErrNotExist) {
			return res, fmt.Errorf("reading the replaced data's binding: %w", err)
		}
		aside, err = moveDataAside(osFS{}, req.DataDir, keepAside)
		switch {
		case errors.Is(err, errPruneAside):
			log.Warn("data moved aside; an older copy could not be deleted", "to", aside, "error", err)
		case err != nil:
			return res, fmt.Errorf("moving the replaced data aside: %w", err)
		case aside != "":
			log.Info("replaced data moved aside", "to", aside)
		}
	}
	if req.Bind != nil {
		if err := req.Bind(res); err != nil {
			return res, undo(fmt.Errorf("writing the binding of the restored data: %w", err))
		}
	}
	if err := os.Rename(out, req.DataDir); err != nil {
		return res, undo(fmt.Errorf("moving the restored data into place: %w", err))
	}
	log.Info("snapshot restored", "snapshot", res.URL, "revision", res.Revision)
	return res, nil
}

// ErrEtcdRunning: an etcd process holds the data directory's database (bbolt's flock): replacing it
// under a running member would corrupt it.
var ErrEtcdRunning = errors.New("etcd is running on the data directory")

// checkNotRunning fails when a process holds the data directory's database lock: bbolt takes an
// exclusive flock on member/snap/db for as long as etcd has it open. A missing database holds nothing.
func checkNotRunning(dataDir string) error {
	f, err := os.Open(filepath.Join(dataDir, "member", "snap", "db"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%w: %s", ErrEtcdRunning, dataDir)
		}
		return fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
