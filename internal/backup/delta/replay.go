package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/lease"
	"go.uber.org/zap"
)

// Replay rebuilds the keyspace at revision target (issue 27): the chain's full snapshot restored as it
// is (no revision bump), an etcd of etcd's own libraries started on it alone on loopback, every recorded
// revision up to target applied as one transaction (a transaction's events share their revision, so
// each lands on the revision it had), and a snapshot of the result written to out. That snapshot then
// goes through the restore every snapshot takes (integrity checks, the seed, the joins).
//
// chunks are read in order; each must follow the one before (Follows) and the first must start right
// after chainStart, the revision the chain's manifest names. A snapshot's manifest revision is a lower
// bound (etcd's snapshot stream carries no revision: the backup reads it just before), so the file may
// hold a few revisions more: those are skipped, they are in the snapshot already. A revision that does not land where it had landed stops the replay: the result
// would not be etcd's answer at target. A lease granted after the snapshot is granted again under its
// ID and TTL before the put that first names it; every lease is kept alive while the revisions are
// applied.
func Replay(ctx context.Context, snapshotFile string, chainStart int64, chunks []Header, revsOf func(i int) ([]Revision, error), target int64, out string) (reached int64, err error) {
	work, err := os.MkdirTemp(filepath.Dir(out), "replay-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(work)
	mgr := snapshot.NewV3(zap.NewNop())
	st, err := mgr.Status(snapshotFile)
	if err != nil {
		return 0, fmt.Errorf("the chain's snapshot: %w", err)
	}
	if target < st.Revision {
		return 0, fmt.Errorf("revision %d is before the chain's snapshot at %d", target, st.Revision)
	}
	// An empty store's snapshot says revision 0 (no key holds a revision), while the store it came from
	// was at 1, where its chain starts: the one case a chain may start after its snapshot's revision.
	if chainStart > st.Revision && !(st.TotalKey == 0 && chainStart == 1) {
		return 0, fmt.Errorf("the chain starts at revision %d, after its snapshot's %d: not this snapshot's chain", chainStart, st.Revision)
	}
	peer, _, err := loopbackURLs()
	if err != nil {
		return 0, err
	}
	dataDir := filepath.Join(work, "data")
	if err := mgr.Restore(snapshot.RestoreConfig{
		SnapshotPath: snapshotFile, Name: "replay", OutputDataDir: dataDir,
		PeerURLs: []string{peer.String()}, InitialCluster: "replay=" + peer.String(), InitialClusterToken: "replay",
	}); err != nil {
		return 0, fmt.Errorf("restoring the chain's snapshot: %w", err)
	}
	// Without fsync: the scratch server is thrown away, and only its snapshot, read through its own
	// backend after the last revision committed, is kept (and checked by its hash on restore). With fsync
	// each revision waits for the disk (one transaction in flight: the order is the history's).
	e, err := startAlone(ctx, dataDir, "replay", peer, func(c *embed.Config) { c.UnsafeNoFsync = true })
	if err != nil {
		return 0, err
	}
	defer e.Close()
	c := v3client.New(e.Server)
	defer c.Close()
	// Leases are kept alive while the revisions are applied: one expiring here would delete its keys at
	// revisions the source never had. Those the snapshot holds, and those granted on the way.
	kctx, stopKeepAlive := context.WithCancel(ctx)
	defer stopKeepAlive()
	keepAlive := func(id clientv3.LeaseID) error {
		ch, err := c.KeepAlive(kctx, id)
		if err != nil {
			return err
		}
		go func() {
			for range ch {
			}
		}()
		return nil
	}
	held, err := c.Leases(ctx)
	if err != nil {
		return 0, err
	}
	for _, l := range held.Leases {
		if err := keepAlive(l.ID); err != nil {
			return 0, fmt.Errorf("keeping lease %x alive: %w", l.ID, err)
		}
	}
	granted := map[int64]bool{}
	keep := func(id int64) error { return keepAlive(clientv3.LeaseID(id)) }

	reached = st.Revision
	for i, h := range chunks {
		if reached >= target {
			break
		}
		// The chain's start is where the first chunk must follow on.
		prev := Header{ClusterID: h.ClusterID, ChainStart: chainStart, Last: chainStart}
		if i > 0 {
			prev = chunks[i-1]
		}
		if err := Follows(prev, h); err != nil {
			return reached, err
		}
		revs, err := revsOf(i)
		if err != nil {
			return reached, fmt.Errorf("chunk %d (revisions %d-%d): %w", i, h.First, h.Last, err)
		}
		for _, r := range revs {
			if r.Rev > target {
				break
			}
			if r.Rev <= st.Revision {
				continue // in the snapshot already
			}
			// Straight to the server (etcd's own Txn), not through the in-process client: a third of
			// the time per revision went to the client's adapter.
			if err := Apply(ctx, e.Server, r, granted, keep); err != nil {
				return reached, err
			}
			reached = r.Rev
		}
	}
	if reached < target {
		return reached, fmt.Errorf("the chain ends at revision %d, before %d", reached, target)
	}
	return reached, writeSnapshot(ctx, c, out)
}

// writeSnapshot writes c's snapshot (etcd's stream, its hash included) to the file out.
func writeSnapshot(ctx context.Context, c *clientv3.Client, out string) error {
	rc, err := c.Snapshot(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startAlone starts etcd's own server on dataDir as a one-member cluster named name, on loopback only,
// and waits until it serves.
func startAlone(ctx context.Context, dataDir, name string, peer *url.URL, tune ...func(*embed.Config)) (*embed.Etcd, error) {
	_, client, err := loopbackURLs()
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir, cfg.LogLevel = name, dataDir, "error"
	cfg.LogOutputs = []string{os.DevNull} // its own shutdown logs errors that are not ours
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.InitialCluster = name + "=" + peer.String()
	for _, t := range tune {
		t(cfg)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting etcd on %s: %w", dataDir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	case <-time.After(time.Minute):
		e.Close()
		return nil, fmt.Errorf("etcd on %s did not become ready in a minute", dataDir)
	}
}

// loopbackURLs are a peer and a client URL on free loopback ports, for an etcd no one else reaches.
func loopbackURLs() (*url.URL, *url.URL, error) {
	var out [2]*url.URL
	for i := range out {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		addr := l.Addr().String()
		if err := l.Close(); err != nil {
			return nil, nil, err
		}
		out[i] = &url.URL{Scheme: "http", Host: addr}
	}
	return out[0], out[1], nil
}

// ErrDiverged: a recorded revision did not land on its own number where it was applied. What it was
// applied to is not at the source's history (written to by someone else, a lease expired there, or
// revisions missing): nothing after it can be etcd's answer.
var ErrDiverged = errors.New("the target's history is not the source's")

// Target is where recorded revisions are applied: etcd's own server (Replay's scratch etcd) or a
// cluster's client API (a standby, ClientTarget). Both take etcd's raw requests, so that a lease is
// granted under the source's ID and TTL (LeaseGrantRequest.ID), which clientv3's Grant cannot do.
type Target interface {
	Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error)
	LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error)
}

// Apply applies one recorded revision to t as one transaction (a transaction's events share their
// revision, so it lands on the revision it had), and checks that it landed there (else ErrDiverged).
// A lease the revision grants is granted first under its ID and TTL, unless granted says it is held
// (a lease that already exists counts as granted: a restarted follower records its grant again), then
// handed to keep, which keeps it alive: a lease expiring where revisions are applied would delete keys
// at revisions the source never had. Replay and the standby's applier (internal/standby) share it.
func Apply(ctx context.Context, t Target, r Revision, granted map[int64]bool, keep func(id int64) error) error {
	ops := make([]*pb.RequestOp, 0, len(r.Ops))
	for _, op := range r.Ops {
		switch op.Type {
		case Grant:
			if granted[op.Lease] {
				continue
			}
			_, err := t.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: op.Lease, TTL: op.TTL})
			if err != nil && !errors.Is(err, lease.ErrLeaseExists) && !errors.Is(err, rpctypes.ErrLeaseExist) {
				return fmt.Errorf("granting lease %x at revision %d: %w", op.Lease, r.Rev, err)
			}
			if err := keep(op.Lease); err != nil {
				return fmt.Errorf("keeping lease %x alive: %w", op.Lease, err)
			}
			granted[op.Lease] = true
		case Put:
			ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: op.Key, Value: op.Value, Lease: op.Lease}}})
		default:
			ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: op.Key}}})
		}
	}
	resp, err := t.Txn(ctx, &pb.TxnRequest{Success: ops})
	if err != nil {
		return fmt.Errorf("applying revision %d: %w", r.Rev, err)
	}
	if resp.Header.Revision != r.Rev {
		return fmt.Errorf("%w: revision %d landed on %d", ErrDiverged, r.Rev, resp.Header.Revision)
	}
	return nil
}

// ClientTarget applies revisions through a cluster's client API, on the client's connection (its
// credentials and retries included).
func ClientTarget(c *clientv3.Client) Target {
	return clientTarget{kv: pb.NewKVClient(c.ActiveConnection()), lease: pb.NewLeaseClient(c.ActiveConnection())}
}

type clientTarget struct {
	kv    pb.KVClient
	lease pb.LeaseClient
}

func (c clientTarget) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	resp, err := c.kv.Txn(ctx, r)
	return resp, rpctypes.Error(err)
}

func (c clientTarget) LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	resp, err := c.lease.LeaseGrant(ctx, r)
	return resp, rpctypes.Error(err)
}
