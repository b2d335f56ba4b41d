package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// Agent supervises etcd in a member pod (docs/design/01-components.md §1.3, §7.2-§7.3).
type Agent struct {
	Cfg   Self
	Store LeaseStore
	Etcd  *Etcd
	Log   *slog.Logger
	// Certs keeps the member's TLS files current; nil without TLS.
	Certs *Certs
	// Events receives the Kubernetes Events this member posts on its EtcdCluster (nil: none).
	Events Recorder

	// The phases' shared view of the fields above, set once (wire).
	wireOnce sync.Once
	env      env
	// proc: the etcd this agent runs, as the probe port and Kill see it (agent_process.go).
	proc process
	// rep: the member's report on its Lease (agent_report.go).
	rep reporter
	// tls: the certificate looks (agent_certs.go); auth: etcd's users and roles (agent_auth.go).
	tls  certKeeper
	auth authKeeper
	// defrag: the defragmentation passes (defrag.go).
	defrag defragger
	// recovery: this member's part in a recovery (recovery.go); bound: what its data's binding records
	// (agent_binding.go).
	recovery recoveryPart
	bound    dataBinding
	// peers: the peer URL through a TLS switch (peerswitch.go).
	peers peerSwitch
	left  bool // this member removed itself on intent leave
	// joining: the learner this agent started, until promoted (agent_promote.go).
	joining learnerJoin
	lookNow bool // the next look at a running etcd comes at once (promoted)
	// promotedID: the member this agent promoted, which its etcd may still show as a learner for a moment.
	promotedID string
	// stopRunning stops the etcd the agent runs now (nil when none): the leave stops it before the
	// removal (drain.go).
	stopRunning func()
	// lossReported: the member ID whose data loss was last posted as an event, so that join attempts
	// retried for the same loss post it once.
	lossReported string
	// seed: the seed's restore attempts in this pod (agent_restore.go).
	seed seedRestore
	// ownAlarms: the alarms this member raised, as last seen (events on a change).
	ownAlarms map[string]bool
}

// State is what the probe server reports while etcd is not running.
func (a *Agent) State() (state string, running bool) {
	return a.proc.State()
}

// Kill ends the agent the way a node crash does: etcd gets SIGKILL, nothing is cleaned up or reported.
func (a *Agent) Kill() {
	a.proc.kill()
}

// wire hands the exported fields to the phases, once: before the first look (Run), or before a test
// calls a phase.
func (a *Agent) wire() {
	a.wireOnce.Do(func() {
		a.env = env{cfg: &a.Cfg, store: a.Store, etcd: a.Etcd, certs: a.Certs, log: a.Log, events: a.Events}
		a.rep = reporter{env: &a.env, facts: a.facts, spaceLine: a.defrag.spaceLine}
		a.auth = authKeeper{env: &a.env, rep: &a.rep}
		a.tls = certKeeper{env: &a.env, auth: &a.auth}
		a.defrag = defragger{env: &a.env, rep: &a.rep}
		a.recovery = recoveryPart{env: &a.env}
		a.peers = peerSwitch{env: &a.env, rep: &a.rep}
	})
}

// facts adds to a report what the phases other than the reporter know: the certificates' state, the
// recovery this member carried out, the snapshot its data was restored from, and whether its own etcd
// calls present the root identity.
func (a *Agent) facts(r *api.Report) {
	a.tls.fill(r)
	a.recovery.fill(r)
	a.bound.fill(r)
	r.RootIdentity = a.auth.usesRootIdentity()
}

// PeersPlaintext says whether this member may make the built-in CA although it has data (Certs.
// MayCreateCA): a TLS switch on from plaintext, before any peer URL moved (peerSwitch.plaintext).
func (a *Agent) PeersPlaintext() bool {
	a.wire()
	return a.peers.plaintext()
}

// Run is the agent: decide, act, supervise, until ctx ends (SIGTERM). It returns an error only for
// what it cannot safely handle; the container then restarts and the decision runs again.
func (a *Agent) Run(ctx context.Context) error {
	a.wire()
	if a.Certs != nil && a.Certs.Confirm == nil {
		a.Certs.Confirm = a.rep.everyMember
	}
	failures := 0
	var waitingSince time.Time
	// The renewal the hook asks for (etcd.io/renewal) before the first certificate: issued without the
	// mark it would be renewed again a moment later, at every pod start while the annotation is set.
	if in, err := a.Store.Read(ctx); err == nil {
		a.tls.askRenewal(in.Renewal)
		a.tls.askRotation(in)
		a.recovery.recovered = in.Report.Recovered
	}
	for {
		if ctx.Err() != nil || a.proc.isKilled() {
			return nil
		}
		if err := a.tls.refresh(ctx); err != nil && !a.tls.ready {
			// etcd cannot start without its certificate: say why and look again.
			a.Log.Warn("no member certificate yet", "error", err)
			a.proc.setState("certificates", false)
			a.rep.report(ctx, a.rep.kept(), false)
			sleep(ctx, a.env.tick())
			continue
		}
		d, facts, err := a.decide(ctx)
		if err != nil {
			a.Log.Warn("cannot decide yet", "error", err)
			r := a.rep.kept()
			r.SetError(api.ReasonWaiting, err.Error())
			a.rep.report(ctx, r, false)
			sleep(ctx, a.env.tick())
			continue
		}
		a.Log.Info("start decision", "action", d.Action.String(), "reason", d.Reason, "detail", d.Detail)
		switch d.Action {
		case Wait, Refuse:
			a.proc.setState(strings.ToLower(d.Reason), false)
			a.rep.report(ctx, a.rep.idle(facts, d.Reason, d.Detail), false)
			wait := a.env.tick()
			if d.Reason == api.ReasonWaitingForJoin {
				// The hook hands out the permission as soon as this report reaches it; look again soon.
				if waitingSince.IsZero() {
					waitingSince = time.Now()
				}
				wait = a.env.nextLook(waitingSince, a.rep.settled())
			}
			sleep(ctx, wait)
			continue
		case Park:
			a.park(ctx, facts, d)
			continue
		case MoveAside:
			aside, err := moveDataAside(osFS{}, a.Cfg.DataDir, keepAside)
			switch {
			case errors.Is(err, errPruneAside):
				a.Log.Warn("data moved aside; an older copy could not be deleted", "to", aside, "error", err)
			case err != nil:
				return fmt.Errorf("moving data of a removed member aside: %w", err)
			default:
				a.Log.Info("data moved aside", "to", aside)
			}
			if aside != "" {
				a.env.event(EventDataMovedAside, "MoveAside", false, "%s (kept as %s)", d.Detail, aside)
			}
			if d.Reason == reasonFenced {
				a.recovery.recovered = facts.Recover.Token
			}
			continue
		}
		if d.Action == StartNew && a.Cfg.Restore != nil {
			// The seed of a restored cluster starts on the snapshot's data instead of an empty directory:
			// restore, then decide again (the data is there now, bound to this member).
			a.restoreSeed(ctx)
			continue
		}
		began := time.Now()
		err = a.start(ctx, d, facts)
		if ctx.Err() != nil || a.proc.isKilled() {
			return nil
		}
		if errors.Is(err, errRestartForCA) || errors.Is(err, errPeerMoved) || errors.Is(err, errRecovery) {
			failures = 0
			continue
		}
		if a.left {
			a.left = false
			a.park(ctx, facts, Decision{Action: Park, Reason: api.ReasonParked, Detail: "left the cluster"})
			continue
		}
		// A start that keeps failing fast backs off and, from the third, stops renewing the Lease: the
		// hook then sees the member as gone and, after deadMemberSeconds, replaces it.
		if time.Since(began) < time.Minute {
			failures++
		} else {
			failures = 0
		}
		wait := 2 * time.Second
		for i := 1; i < failures && wait < time.Minute; i++ {
			wait *= 2
		}
		if failures >= 3 {
			// One event per backoff step: the step is at least 2 s and soon a minute, and client-go folds
			// the repeats into one Event with a count.
			a.env.event(EventCrashLoop, "RestartEtcd", true, "etcd failed %d times in a row, next start in %s: %v", failures, wait, err)
			a.rep.crashLoop = true
			r := a.rep.kept()
			r.SetError(api.ReasonCrashLoop, fmt.Sprintf("etcd failed %d times in a row: %v", failures, err))
			a.rep.report(ctx, r, false)
		}
		a.Log.Warn("etcd stopped; deciding again", "error", err, "failures", failures, "backoff", wait.String())
		a.proc.setState("restarting", false)
		sleep(ctx, wait)
	}
}
