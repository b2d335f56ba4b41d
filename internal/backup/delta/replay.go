package delta

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
)

// Replay rebuilds the keyspace at revision target (issue 27): the chain's full snapshot restored as it
// is (no revision bump), an etcd of etcd's own libraries started on it alone on loopback, every recorded
// revision up to target applied as one transaction (a transaction's events share their revision, so
// each lands on the revision it had), and a snapshot of the result written to out. That snapshot then
// goes through the restore every snapshot takes (integrity checks, the seed, the joins).
//
// chunks are read in order; each must follow the one before (Follows) and the first must start right
// after the snapshot. A revision that does not land where it had landed stops the replay: the result
// would not be etcd's answer at target. Leases are not carried yet: a key put under a lease after the
// snapshot is restored without it (a follow-up of issue 27).
func Replay(ctx context.Context, snapshotFile string, chunks []Header, revsOf func(i int) ([]Revision, error), target int64, out string) (reached int64, err error) {
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
	e, err := startAlone(ctx, dataDir, "replay", peer)
	if err != nil {
		return 0, err
	}
	defer e.Close()
	c := v3client.New(e.Server)
	defer c.Close()

	reached = st.Revision
	var prev *Header
	for i, h := range chunks {
		if reached >= target {
			break
		}
		if prev == nil && h.First != st.Revision+1 {
			return reached, fmt.Errorf("the first chunk starts at revision %d, the snapshot is at %d", h.First, st.Revision)
		}
		if prev != nil {
			if err := Follows(*prev, h); err != nil {
				return reached, err
			}
		}
		revs, err := revsOf(i)
		if err != nil {
			return reached, fmt.Errorf("chunk %d (revisions %d-%d): %w", i, h.First, h.Last, err)
		}
		for _, r := range revs {
			if r.Rev > target {
				break
			}
			ops := make([]clientv3.Op, 0, len(r.Ops))
			for _, op := range r.Ops {
				if op.Type == Put {
					ops = append(ops, clientv3.OpPut(string(op.Key), string(op.Value)))
				} else {
					ops = append(ops, clientv3.OpDelete(string(op.Key)))
				}
			}
			resp, err := c.Txn(ctx).Then(ops...).Commit()
			if err != nil {
				return reached, fmt.Errorf("applying revision %d: %w", r.Rev, err)
			}
			if resp.Header.Revision != r.Rev {
				return reached, fmt.Errorf("revision %d landed on %d: the replay is not etcd's history", r.Rev, resp.Header.Revision)
			}
			reached = r.Rev
		}
		prev = &chunks[i]
	}
	if reached < target {
		return reached, fmt.Errorf("the chain ends at revision %d, before %d", reached, target)
	}
	rc, err := c.Snapshot(ctx)
	if err != nil {
		return reached, err
	}
	defer rc.Close()
	f, err := os.Create(out)
	if err != nil {
		return reached, err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return reached, err
	}
	return reached, f.Close()
}

// startAlone starts etcd's own server on dataDir as a one-member cluster named name, on loopback only,
// and waits until it serves.
func startAlone(ctx context.Context, dataDir, name string, peer *url.URL) (*embed.Etcd, error) {
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
