package membership

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// env is what every phase of the agent works with: the member it runs, its Lease, its etcd client, its
// certificates, its log and where its Events go. They are the Agent's exported fields, handed to the
// phases once (Agent.wire); cfg points at Agent.Cfg, which the start decision updates (Retired).
type env struct {
	cfg    *Self
	store  LeaseStore
	etcd   *Etcd
	certs  *Certs
	log    *slog.Logger
	events Recorder
}

// event posts a Kubernetes Event on the EtcdCluster; notes start with the pod so that the cluster's
// event list says which member it is about.
func (e *env) event(reason, action string, warning bool, format string, args ...any) {
	recorderOr(e.events).Event(reason, action, "pod "+e.cfg.Name+": "+fmt.Sprintf(format, args...), warning)
}

func (e *env) tick() time.Duration {
	if e.cfg.Tick > 0 {
		return e.cfg.Tick
	}
	return 2 * time.Second
}

// fastWindow bounds how long an agent looks at the fast cadence: a member that does not become a healthy
// voter within it (a join never permitted, a stuck learner) goes back to the normal tick, so a broken step
// does not keep several API and etcd calls per second going.
const fastWindow = 2 * time.Minute

// nextLook is the wait before the next look: fast while this member is not yet a healthy voter (settled,
// reporter.settled) and the fast window that began at since is open.
func (e *env) nextLook(since time.Time, settled bool) time.Duration {
	if settled || time.Since(since) > fastWindow {
		return e.tick()
	}
	if e.cfg.FastTick > 0 {
		return e.cfg.FastTick
	}
	return 250 * time.Millisecond
}

// sleep waits d, or until ctx ends (false then).
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
