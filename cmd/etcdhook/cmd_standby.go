package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
	"github.com/etcdhook/etcdhook/internal/backup/delta"
	"github.com/etcdhook/etcdhook/internal/standby"
)

// runStandbyFollow is a standby's applier (spec.standby, docs/design/21-standby.md §21.2): it follows
// the primary's backups into the standby with standby.Applier until SIGTERM, and reports its progress
// on the backup Lease (api.AnnStandbyReport) every --report-every and when it stops for good. Stopped,
// it stays up and keeps reporting the stop: a restart would only stop again.
func runStandbyFollow(args []string) error {
	fs := flag.NewFlagSet("standby-follow", flag.ContinueOnError)
	cluster := fs.String("cluster", "", "the standby EtcdCluster's name")
	namespace := fs.String("namespace", "", "its namespace")
	endpoints := fs.String("endpoints", "", "comma-separated client URLs of the standby (its client Service)")
	from := fs.String("from", "", "spec.standby.from: <destination>/<namespace>/<name>/latest or a snapshot URL")
	credentials := fs.String("credentials-dir", "", "the mounted credentials Secret of the primary's store")
	encryption := encryptionFlag(fs)
	lease := fs.String("lease", "", "the backup Lease to report on (none: report to stderr only)")
	reportEvery := fs.Duration("report-every", api.ContinuousReportEvery, "how often to report on the Lease")
	access := etcdAccessFlags(fs)
	if err := parseFlags(fs, args, "cluster", "namespace", "endpoints", "from"); err != nil {
		return err
	}
	folder, err := api.StandbySource(*from)
	if err != nil {
		return usageError{fmt.Errorf("--from %q %v", backup.Redact(*from), err)}
	}
	keys, err := backup.LoadKeysDir(*encryption)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := jsonLogger().With("cluster", *cluster)
	rep := &standbyReporter{report: leaseReporter(*namespace, *lease, "etcdhook-standby", log)}

	b, err := openStore(ctx, folder.Destination, "", *credentials)
	if err != nil {
		return err
	}
	defer b.Close()
	cl, err := access.etcd(log).Client(strings.Split(*endpoints, ","))
	if err != nil {
		return err
	}
	defer cl.Close()
	// The primary's cluster ID is read once the standby answers (it is seeded and running).
	var clusterID string
	bo := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Cap: time.Minute, Steps: 1 << 30}
	err = wait.ExponentialBackoffWithContext(ctx, bo, func(ctx context.Context) (bool, error) {
		rev, err := standby.Revision(ctx, cl)
		if err == nil {
			clusterID, err = standby.SeedClusterID(ctx, b, folder.Namespace, folder.Name, rev)
		}
		if err != nil {
			log.Warn("finding the primary's cluster", "error", err)
			rep.problem(err)
			rep.flush(time.Now())
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil // SIGTERM
	}
	a := &standby.Applier{
		Bucket: b, Namespace: folder.Namespace, Name: folder.Name, ClusterID: clusterID,
		Read: delta.ReadOptions{Identities: keys.Identities}, Client: cl,
		Progress: rep.progress, Problem: func(err error) { log.Warn("following", "error", err); rep.problem(err) },
	}
	go func() {
		t := time.NewTicker(*reportEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				rep.flush(now)
			}
		}
	}()
	log.Info("following", "primary", folder.Namespace+"/"+folder.Name, "clusterID", clusterID)
	err = a.Follow(ctx)
	var stopped *standby.Stopped
	if errors.As(err, &stopped) {
		log.Error("following stopped for good", "error", err)
		rep.stopped(stopped)
		rep.flush(time.Now())
		<-ctx.Done()
	}
	// What was applied last is reported before the pod goes: a promotion records it.
	rep.flush(time.Now())
	return nil
}

// standbyReporter keeps the applier's newest progress, problem and stop, and writes them as one
// report (Progress may not block: the Lease is written by flush, from the ticker).
type standbyReporter struct {
	mu     sync.Mutex
	last   standby.Progress
	prob   string
	stop   *api.StandbyStop
	report func(key string, r fmt.Stringer)
}

func (r *standbyReporter) progress(p standby.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last, r.prob = p, ""
}

func (r *standbyReporter) problem(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prob = err.Error()
}

func (r *standbyReporter) stopped(s *standby.Stopped) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stop = standbyStopOf(s)
}

func (r *standbyReporter) flush(now time.Time) {
	r.mu.Lock()
	rep := standbyReportOf(r.last, r.prob, r.stop, now)
	r.mu.Unlock()
	r.report(api.AnnStandbyReport, rep)
}

// standbyReportOf is the report of the applier's progress p, its last problem and its stop.
func standbyReportOf(p standby.Progress, problem string, stop *api.StandbyStop, now time.Time) api.StandbyReport {
	return api.StandbyReport{
		Revision: p.Revision, Time: p.Time, Newest: p.Newest, NewestTime: p.NewestTime, LagSeconds: p.Lag.Seconds(),
		ClusterID: p.ClusterID, Chain: p.Chain, ChainStart: p.ChainStart, ReportTime: now.UTC(), Problem: problem, Stop: stop,
	}
}

// standbyStopOf names a stop as status.standby.stop does: the reason's name (Missing, Foreign, Broken,
// Gap, Diverged), the object and the revision reached.
func standbyStopOf(s *standby.Stopped) *api.StandbyStop {
	reason := "Stopped"
	for name, e := range map[string]error{"Missing": standby.ErrMissing, "Foreign": standby.ErrForeign, "Broken": standby.ErrBroken, "Gap": standby.ErrGap, "Diverged": standby.ErrDiverged} {
		if errors.Is(s.Reason, e) {
			reason = name
		}
	}
	msg := ""
	if s.Err != nil {
		msg = s.Err.Error()
	}
	return &api.StandbyStop{Reason: reason, Object: s.Object, Revision: s.Reached, Message: msg}
}
