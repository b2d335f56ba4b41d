package membership

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
)

// AgentConfig is one member's agent: who it is and how etcd runs.
type AgentConfig struct {
	// Name is the etcd member name (the pod name).
	Name      string
	PeerURL   string
	ClientURL string
	// Endpoints are where voters answer before this member runs (the client Service).
	Endpoints []string
	DataDir   string
	ParentUID string
	Adopt     bool
	// LeaseDuration: an unchanged report is renewed every third of it, a healthy voter's every
	// api.HealthyRenewSeconds.
	LeaseDuration time.Duration
	// EtcdCommand is etcd with its static flags; the agent appends the initial-cluster flags.
	EtcdCommand []string
	// Tick is how often a running member is looked at (promote, leave, report); default 2 s.
	Tick time.Duration
	// FastTick is how often a member still on its way to a healthy voter (starting, learner, waiting for
	// its join permission) is looked at, for at most fastWindow; default 250 ms. Every step of a join
	// waits for the agent to look: at 2 s, looking was most of a scale step.
	FastTick time.Duration
	// StopGrace bounds the wait for etcd after SIGTERM before SIGKILL.
	StopGrace time.Duration
	// JoinTimeout bounds one join (add, start, promote) before the agent starts over.
	JoinTimeout time.Duration
	// EtcdOutput receives etcd's stdout and stderr (default: the agent's stderr).
	EtcdOutput io.Writer
	// CertLook is how often the certificates are looked at (default certLook).
	CertLook time.Duration
	// NoSpaceAgain bounds how often this member's NOSPACE recovery runs (default noSpaceAgain).
	NoSpaceAgain time.Duration
	// Restore, when set, is the snapshot the seed of a new cluster starts from (DataDir, Name, PeerURL
	// and Token filled in); nil for a cluster bootstrapped empty.
	Restore *RestoreRequest
	// Retired are cluster IDs an in-place restore replaced: a Lease or member list naming one is not
	// this cluster's, and data of one is moved aside (docs/design/16-backup-restore.md §16.8).
	Retired map[uint64]bool
	// LoadRetired, when set, reads Retired again before each start decision (agent.json as the kubelet
	// refreshes it); a read that fails keeps the last list.
	LoadRetired func() (map[uint64]bool, error)
	// Transition is the scheme a TLS switch leaves ("" none; the pod runs the transition template,
	// docs/design/14-tls.md §14.8): the agent moves its peer URL to the other scheme when its Lease asks.
	Transition string
}

// Agent supervises etcd in a member pod (docs/design/01-components.md §1.3, §7.2-§7.3).
type Agent struct {
	Cfg   AgentConfig
	Store LeaseStore
	Etcd  *Etcd
	Log   *slog.Logger
	// Certs keeps the member's TLS files current; nil without TLS.
	Certs *Certs
	// Events receives the Kubernetes Events this member posts on its EtcdCluster (nil: none).
	Events Recorder

	// The last certificate look: what the files hold, or why they could not be made.
	certFacts   CertFacts
	certErr     string
	certChecked time.Time
	// certsReady: every plane's files have been usable once (etcd may start; later problems keep the
	// files in use and are only reported).
	certsReady bool

	mu      sync.Mutex
	state   string // for probes and logs: waiting, starting, running, parked, refused
	running bool
	pid     int
	killed  bool
	left    bool // this member removed itself on intent leave
	// crashLoop: etcd keeps failing; the Lease is no longer renewed (only changes are written).
	crashLoop bool
	last      api.Report
	wrote     time.Time
	// leaseProblems: what the last Lease read held that the agent could not use as written; reported.
	leaseProblems []string
	// lossReported: the member ID whose data loss was last posted as an event, so that join attempts
	// retried for the same loss post it once.
	lossReported string
	// restored: the snapshot the data directory was restored from, from its binding; reported.
	restored *Restored
	// restoreFailures counts failed restores in a row (backoff), restoreError the last one posted.
	restoreFailures int
	restoreError    string
	// The defragmentation passes (defrag.go): the last one completed and when, read back from the
	// Lease once so that a restarted agent does not repeat it; the last failure, for the backoff.
	defragRead   bool
	defragDone   string
	defragLast   string
	defragFailed time.Time
	defragErr    string // the last failure, reported until the retry
	// noSpaceAt: this member's last NOSPACE defragmentation; noSpaceStuck: it left the file at the quota.
	noSpaceAt    time.Time
	noSpaceStuck bool
	// ownAlarms: the alarms this member raised, as last seen (events on a change).
	ownAlarms map[string]bool
	// known: the last member list this agent read (the start decision's, or its running etcd's).
	known []api.Member
	// peerURL: the peer URL etcd runs with now (its scheme from the member list, peerswitch.go);
	// peerAsk: the scheme the Lease lets it move to (etcd.io/peer-scheme); peerMoveFailed: the last
	// move that did not commit (retried 10 s later).
	peerURL, peerAsk string
	peerMoveFailed   time.Time
}

// event posts a Kubernetes Event on the EtcdCluster; notes start with the pod so that the cluster's
// event list says which member it is about.
func (a *Agent) event(reason, action string, warning bool, format string, args ...any) {
	recorderOr(a.Events).Event(reason, action, "pod "+a.Cfg.Name+": "+fmt.Sprintf(format, args...), warning)
}

// State is what the probe server reports while etcd is not running.
func (a *Agent) State() (state string, running bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state, a.running
}

// Kill ends the agent the way a node crash does: etcd gets SIGKILL, nothing is cleaned up or reported.
func (a *Agent) Kill() {
	a.mu.Lock()
	a.killed = true
	pid := a.pid
	a.mu.Unlock()
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

func (a *Agent) isKilled() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.killed
}

func (a *Agent) setState(s string, running bool) {
	a.mu.Lock()
	a.state, a.running = s, running
	a.mu.Unlock()
}

func (a *Agent) tick() time.Duration {
	if a.Cfg.Tick > 0 {
		return a.Cfg.Tick
	}
	return 2 * time.Second
}

// fastWindow bounds how long an agent looks at the fast cadence: a member that does not become a healthy
// voter within it (a join never permitted, a stuck learner) goes back to the normal tick, so a broken step
// does not keep several API and etcd calls per second going.
const fastWindow = 2 * time.Minute

// nextLook is the wait before the next look: fast while this member is not yet a healthy voter and the
// fast window that began at since is open.
func (a *Agent) nextLook(since time.Time) time.Duration {
	if a.last.IsVoter() && a.last.Healthy || time.Since(since) > fastWindow {
		return a.tick()
	}
	if a.Cfg.FastTick > 0 {
		return a.Cfg.FastTick
	}
	return 250 * time.Millisecond
}

// Run is the agent: decide, act, supervise, until ctx ends (SIGTERM). It returns an error only for
// what it cannot safely handle; the container then restarts and the decision runs again.
func (a *Agent) Run(ctx context.Context) error {
	if a.Certs != nil && a.Certs.Confirm == nil {
		a.Certs.Confirm = a.everyMember
	}
	failures := 0
	var waitingSince time.Time
	// The renewal the hook asks for (etcd.io/renewal) before the first certificate: issued without the
	// mark it would be renewed again a moment later, at every pod start while the annotation is set.
	if in, err := a.Store.Read(ctx); err == nil {
		a.askRenewal(in.Renewal)
		a.askRotation(in)
	}
	for {
		if ctx.Err() != nil || a.isKilled() {
			return nil
		}
		if err := a.refreshCerts(ctx); err != nil && !a.certsReady {
			// etcd cannot start without its certificate: say why and look again.
			a.Log.Warn("no member certificate yet", "error", err)
			a.setState("certificates", false)
			a.report(ctx, a.keptReport(), false)
			a.sleep(ctx, a.tick())
			continue
		}
		d, facts, err := a.decide(ctx)
		if err != nil {
			a.Log.Warn("cannot decide yet", "error", err)
			r := a.keptReport()
			r.Error = "Waiting: " + err.Error()
			a.report(ctx, r, false)
			a.sleep(ctx, a.tick())
			continue
		}
		a.Log.Info("start decision", "action", d.Action.String(), "reason", d.Reason, "detail", d.Detail)
		switch d.Action {
		case Wait, Refuse:
			a.setState(strings.ToLower(d.Reason), false)
			a.report(ctx, a.idleReport(facts, d.Reason+": "+d.Detail), false)
			wait := a.tick()
			if d.Reason == api.ReasonWaitingForJoin {
				// The hook hands out the permission as soon as this report reaches it; look again soon.
				if waitingSince.IsZero() {
					waitingSince = time.Now()
				}
				wait = a.nextLook(waitingSince)
			}
			a.sleep(ctx, wait)
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
				a.event(EventDataMovedAside, "MoveAside", false, "%s (kept as %s)", d.Detail, aside)
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
		if ctx.Err() != nil || a.isKilled() {
			return nil
		}
		if errors.Is(err, errRestartForCA) || errors.Is(err, errPeerMoved) {
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
			a.event(EventCrashLoop, "RestartEtcd", true, "etcd failed %d times in a row, next start in %s: %v", failures, wait, err)
			a.crashLoop = true
			r := a.keptReport()
			r.Error = fmt.Sprintf("CrashLoop: etcd failed %d times in a row: %v", failures, err)
			a.report(ctx, r, false)
		}
		a.Log.Warn("etcd stopped; deciding again", "error", err, "failures", failures, "backoff", wait.String())
		a.setState("restarting", false)
		a.sleep(ctx, wait)
	}
}

// keptReport is the last report without what only a running member can say: its identity stays, so
// that a transient error never erases the member and cluster IDs from the Lease.
func (a *Agent) keptReport() api.Report {
	r := a.last
	r.Role, r.Healthy, r.Members, r.LeaderID = api.RoleNone, false, nil, ""
	return r
}

// decide gathers the start facts: the Lease (live), the data directory, the member list through a voter.
func (a *Agent) decide(ctx context.Context) (Decision, StartFacts, error) {
	in, err := a.Store.Read(ctx)
	if err != nil {
		return Decision{}, StartFacts{}, fmt.Errorf("reading the member Lease: %w", err)
	}
	a.askRenewal(in.Renewal)
	a.askRotation(in)
	a.peerAsk = in.PeerScheme
	df, err := ReadData(a.Cfg.DataDir)
	if err != nil {
		return Decision{}, StartFacts{}, err
	}
	if df.Binding != nil {
		a.restored = df.Binding.Restored
	}
	permitted, permitProblem := in.Join.OpenAt(a.Store.Now())
	problems := append([]string(nil), in.Problems...)
	if permitProblem != "" {
		problems = append(problems, permitProblem)
	}
	f := StartFacts{
		Intent: in.Intent, Seed: in.Seed, JoinPermitted: permitted,
		ParentUID: a.Cfg.ParentUID, Adopt: a.Cfg.Adopt, Data: df, PeerURL: a.Cfg.PeerURL,
	}
	ids, err := a.Store.ClusterIDs(ctx)
	if err != nil {
		return Decision{}, StartFacts{}, fmt.Errorf("reading the cluster's Leases: %w", err)
	}
	if in.Report.ClusterID != "" && in.Report.ParentUID == a.Cfg.ParentUID {
		ids = append(ids, in.Report.ClusterID)
	}
	// Any cluster ID annotation, even one that does not parse, means bootstrapped: a seed never starts a
	// second cluster because a report was damaged.
	f.Bootstrapped = len(ids) > 0
	if a.Cfg.LoadRetired != nil {
		if r, err := a.Cfg.LoadRetired(); err != nil {
			a.Log.Warn("cannot read the retired cluster IDs again; keeping the last list", "error", err)
		} else {
			a.Cfg.Retired = r
		}
	}
	f.Retired = a.Cfg.Retired
	var idProblems []string
	f.ClusterID, idProblems = LeaseClusterID(a.current(ids))
	a.leaseProblems = append(problems, idProblems...)
	f.JoinDeadline = a.localTime(in.Join.Until)
	// The seed of a new cluster (seed mark, no data, no cluster ID on any Lease) asks the client Service,
	// which has no ready endpoint yet: nobody answering is the expected outcome there, and the full bound
	// cost every create 5 s. Anywhere else a slow answer matters and gets the full bound.
	listTimeout := 6 * time.Second
	if in.Seed && !df.Present && len(ids) == 0 {
		listTimeout = time.Second
	}
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	l, err := a.Etcd.MemberList(lctx, a.Cfg.Endpoints)
	cancel()
	if err == nil && a.Cfg.Retired[l.ClusterID] {
		// Members of a cluster an in-place restore replaced (one not stopped yet): never this cluster.
		a.Log.Warn("member list of a replaced cluster ignored", "answered", api.FormatID(l.ClusterID))
		err = errors.New("replaced cluster")
	}
	if err == nil && f.ClusterID != 0 && l.ClusterID != f.ClusterID {
		// The voters that answered are not the cluster the Leases report: use nothing they say.
		a.Log.Warn("member list from another cluster ignored", "answered", api.FormatID(l.ClusterID), "leases", api.FormatID(f.ClusterID))
		err = errors.New("cluster ID mismatch")
	}
	if err == nil {
		f.Members = l.Members
		a.known = l.Members
		f.Bootstrapped = true
		if f.ClusterID == 0 {
			f.ClusterID = l.ClusterID
		}
	}
	return DecideStart(f), f, nil
}

// current drops the cluster IDs an in-place restore retired: those Leases report a member that has not
// restarted since (an ID that does not parse is kept for LeaseClusterID to note).
func (a *Agent) current(ids []string) []string {
	if len(a.Cfg.Retired) == 0 {
		return ids
	}
	out := ids[:0:0]
	for _, s := range ids {
		if id, err := api.ParseID(s); err == nil && a.Cfg.Retired[id] {
			continue
		}
		out = append(out, s)
	}
	return out
}

// localTime converts an instant on the API server's clock to this machine's.
func (a *Agent) localTime(server time.Time) time.Time {
	if server.IsZero() {
		return server
	}
	return time.Now().Add(server.Sub(a.Store.Now()))
}

func (a *Agent) idleReport(f StartFacts, errText string) api.Report {
	r := api.Report{ParentUID: a.Cfg.ParentUID, Role: api.RoleNone, Error: errText, Members: nil}
	if f.ClusterID != 0 {
		r.ClusterID = api.FormatID(f.ClusterID)
	}
	if f.Data.Present && f.Data.MemberID != 0 {
		r.MemberID = api.FormatID(f.Data.MemberID)
	}
	return r
}

// start prepares membership for d, runs etcd and supervises it until it exits or ctx ends.
func (a *Agent) start(ctx context.Context, d Decision, f StartFacts) error {
	state := "existing"
	var initial []api.Member
	a.peerURL = a.startPeerURL(f)
	if d.Action == StartNew || d.Action == Join || d.Action == Replace {
		a.peerURL = a.Cfg.PeerURL // the URL it is about to be added (or bootstrapped) under
	}
	if d.Action != StartExisting {
		// The binding is written before etcd writes anything, so that data without one is never ours.
		if err := WriteBinding(a.Cfg.DataDir, Binding{ParentUID: a.Cfg.ParentUID, PeerURL: a.peerURL}); err != nil {
			return fmt.Errorf("writing the data binding: %w", err)
		}
	}
	switch d.Action {
	case StartNew:
		state = "new"
		initial = []api.Member{{Name: a.Cfg.Name, PeerURL: a.Cfg.PeerURL}}
		a.event(EventClusterBootstrapped, "Bootstrap", false, "seed of a new cluster: starting etcd as its first member")
	case StartLearner:
		initial = f.Members
	case Join, Replace:
		// A join never outlives its permission: past the deadline the hook counts the step as over.
		deadline := time.Now().Add(a.joinTimeout())
		if !f.JoinDeadline.IsZero() && f.JoinDeadline.Before(deadline) {
			deadline = f.JoinDeadline
		}
		jctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		eps := voterEndpoints(f.Members, "")
		if d.Action == Replace {
			old, _ := api.ParseID(d.Member.ID)
			a.Log.Info("removing the old ID of this member (its data is gone)", "member", d.Member.ID)
			if a.lossReported != d.Member.ID {
				a.lossReported = d.Member.ID
				a.event(EventDataLossDetected, "ReplaceMember", true, "member %s is in the member list but its data directory is empty: removing that ID and joining under a new one", d.Member.ID)
			}
			if err := a.Etcd.Remove(jctx, eps, old); err != nil {
				return err
			}
			// A re-add in the same second as the original add collides with the removed ID.
			a.sleep(ctx, 1100*time.Millisecond)
		}
		id, members, err := a.Etcd.AddLearner(jctx, eps, a.Cfg.PeerURL)
		if err != nil {
			return err
		}
		a.Log.Info("added as learner", "member", api.FormatID(id), "members", len(members))
		why := "scale up"
		if d.Action == Replace {
			why = "replacing member " + d.Member.ID + ", whose data was lost"
		}
		a.event(EventMemberAdded, "AddLearner", false, "added as learner %s (%s); %d members now", api.FormatID(id), why, len(members))
		initial = members
	}
	return a.runEtcd(ctx, state, initial)
}

func (a *Agent) joinTimeout() time.Duration {
	if a.Cfg.JoinTimeout > 0 {
		return a.Cfg.JoinTimeout
	}
	return 2 * time.Minute
}

// initialCluster renders --initial-cluster: every member of the list by peer URL, this one by its name.
func (a *Agent) initialCluster(ms []api.Member) string {
	var parts []string
	hasSelf := false
	for _, m := range ms {
		name := m.Name
		if samePeer(m.PeerURL, a.Cfg.PeerURL) {
			name, hasSelf = a.Cfg.Name, true
		}
		if name == "" {
			name = "m" + m.ID // names of others do not matter, only their count and peer URLs
		}
		parts = append(parts, name+"="+m.PeerURL)
	}
	if !hasSelf {
		self := a.Cfg.PeerURL
		if a.peerURL != "" {
			self = a.peerURL
		}
		parts = append(parts, a.Cfg.Name+"="+self)
	}
	return strings.Join(parts, ",")
}

// runEtcd starts etcd and supervises it: promote while a learner, leave on intent leave, report.
func (a *Agent) runEtcd(ctx context.Context, state string, initial []api.Member) error {
	args := append([]string{}, a.Cfg.EtcdCommand[1:]...)
	if a.Certs != nil && a.peerURL != "" {
		// The peer listener on the scheme of this member's own peer URL (a TLS switch moves it).
		args = peerArgs(args, a.peerURL)
	}
	args = append(args, "--initial-cluster-state="+state)
	if len(initial) > 0 {
		args = append(args, "--initial-cluster="+a.initialCluster(initial))
	}
	if a.Certs != nil {
		// etcd trusts the CAs of the files it starts on until it stops: bring them up to date with the
		// Secrets first (a start after a CA rotation's step), then pin what it is handed. A failure
		// leaves the files as they are, and the pin says so truthfully (docs/design/14-tls.md §14.6).
		a.certChecked = time.Time{}
		_ = a.refreshCerts(ctx)
		a.Certs.Pin()
		defer a.Certs.Unpin()
	}
	cmd := exec.Command(a.Cfg.EtcdCommand[0], args...)
	cmd.Env = etcdEnv(os.Environ())
	out := a.Cfg.EtcdOutput
	if out == nil {
		out = os.Stderr
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	a.Log.Info("starting etcd", "state", state, "initial-cluster", a.initialCluster(initial))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting etcd: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	a.mu.Lock()
	a.pid = cmd.Process.Pid
	killed := a.killed
	a.mu.Unlock()
	if killed {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// Until etcd has answered once, the probe port answers /livez itself: a long WAL replay or join
	// discovery is not killed by the liveness probe.
	a.setState("starting", false)
	defer a.setState("stopped", false)
	bound := false
	started := time.Now()
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("etcd exited: %v", err)
		case <-ctx.Done():
			if a.isKilled() {
				<-exited
				return ctx.Err()
			}
			a.stopEtcd(cmd, exited)
			return ctx.Err()
		case <-time.After(a.nextLook(started)):
		}
		if a.isKilled() {
			<-exited
			return errors.New("killed")
		}
		_ = a.refreshCerts(ctx) // reported; etcd keeps the files it has
		if a.Certs != nil && a.Certs.RestartDue() && a.restartStillAsked(ctx) {
			// The hook lets this member restart to trust the CAs of the Secret (a CA rotation's step,
			// docs/design/14-tls.md §14.6): a graceful stop (a leader hands over), new files, a start on the same
			// data. Not a failure: no backoff.
			a.Log.Info("restarting etcd to trust the CAs of the CA Secret", "cas", a.Certs.Restart)
			a.event(EventCertificateRenewed, "RestartForCA", false, "restarting etcd to trust the CAs %s (CA rotation)", shortFPs(strings.Split(a.Certs.Restart, ",")))
			// Said before etcd stops: the hook holds every other restart while this report stands, even
			// if its own answer (the permission) is lost to a stale cache.
			r := a.keptReport()
			r.Error = api.ReasonRestartingForCA + ": restarting etcd to trust the CAs of the CA Secret"
			a.report(ctx, r, true)
			a.stopEtcd(cmd, exited)
			a.certChecked = time.Time{}
			return errRestartForCA
		}
		if a.peerMoveDue() && a.peerMoveStillAsked(ctx) {
			// The hook lets this member move its peer URL to the other scheme (a TLS switch's step,
			// docs/design/14-tls.md §14.8): said first, as for a CA restart; the member list changes while etcd
			// runs (it needs a quorum with this member in it: nothing has stopped if it cannot), then etcd
			// restarts listening on the new scheme, as etcd's runtime reconfiguration guide orders it.
			to, self := a.peerAsk, a.last.MemberID
			r := a.keptReport()
			r.Error = api.ReasonSwitchingPeerScheme + ": moving the peer URL to " + to
			a.report(ctx, r, true)
			if err := a.movePeerURL(ctx, to, self); err != nil {
				a.Log.Warn("peer URL not moved; etcd keeps running on the old one", "error", err)
				a.peerMoveFailed = time.Now()
				continue
			}
			a.Log.Info("restarting etcd to listen on the new peer URL", "peerURL", a.peerURL)
			a.stopEtcd(cmd, exited)
			return errPeerMoved
		}
		switch a.observe(ctx, &bound) {
		case selfRemoved:
			// This member removed itself: etcd stops on its own; make sure of it.
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				a.stopEtcd(cmd, exited)
			}
			return nil
		case removedByOthers:
			a.stopEtcd(cmd, exited)
			return errors.New("this member is no longer in the member list: stopped etcd to decide again")
		}
	}
}

// restartStillAsked reads the Lease again right before a restart for the CA rotation: the permission was
// read a look ago, and the hook may have moved it to another member since (only one restarts at a time).
func (a *Agent) restartStillAsked(ctx context.Context) bool {
	in, err := a.Store.Read(ctx)
	if err != nil {
		return false
	}
	a.askRotation(in)
	return a.Certs.RestartDue()
}

// everyMember says whether every member of the last member list this agent read has a fresh Lease whose
// report satisfies ok (Certs.Confirm). Unknown (no list, a Lease unreadable): false.
func (a *Agent) everyMember(ctx context.Context, ok func(api.Report) bool) bool {
	members := a.last.Members
	if len(members) == 0 {
		return false
	}
	reports, err := a.Store.Peers(ctx)
	if err != nil {
		return false
	}
	byID := map[string]api.Report{}
	for _, r := range reports {
		byID[r.MemberID] = r
	}
	for _, m := range members {
		if r, found := byID[m.ID]; !found || !ok(r) {
			return false
		}
	}
	return true
}

// errRestartForCA: etcd was stopped to start again trusting the CAs of the CA Secret.
var errRestartForCA = errors.New("restarting to trust the CAs of the CA Secret")

// stopEtcd forwards SIGTERM (a leader hands over on graceful stop) and kills after the grace period.
func (a *Agent) stopEtcd(cmd *exec.Cmd, exited chan error) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	grace := a.Cfg.StopGrace
	if grace == 0 {
		grace = 45 * time.Second
	}
	select {
	case <-exited:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

type observation int

const (
	stillRunning observation = iota
	selfRemoved
	removedByOthers
)

// observe looks at the running member once: it reports, promotes a learner, and leaves on intent
// leave. It says whether this member removed itself, or finds itself removed by someone else.
func (a *Agent) observe(ctx context.Context, bound *bool) observation {
	r := api.Report{ParentUID: a.Cfg.ParentUID, Role: api.RoleNone}
	st, err := a.Etcd.Status(ctx, a.Cfg.ClientURL)
	if err != nil {
		r = a.keptReport()
		r.Error = "Starting: etcd does not answer yet: " + err.Error()
		a.report(ctx, r, false)
		return stillRunning
	}
	a.setState("running", true)
	a.crashLoop = false
	self := st.Header.MemberId
	r.MemberID, r.ClusterID = api.FormatID(self), api.FormatID(st.Header.ClusterId)
	r.Version, r.LeaderID = st.Version, api.FormatID(st.Leader)
	if st.Leader == 0 {
		r.LeaderID = ""
	}
	r.DBSize, r.DBSizeInUse = st.DbSize, st.DbSizeInUse
	if len(st.Errors) > 0 {
		// Status lists alarms among its errors as protobuf text; the alarm list says them plainly. Asked
		// only in trouble: a healthy member's look stays one Status call.
		if alarms, err := a.Etcd.Alarms(ctx, a.Cfg.ClientURL); err == nil {
			r.Alarms = alarms
			a.alarmEvents(alarms, st.Header.MemberId)
		}
	} else {
		a.alarmEvents(nil, st.Header.MemberId)
	}
	if !*bound {
		if err := WriteBinding(a.Cfg.DataDir, Binding{ParentUID: a.Cfg.ParentUID, ClusterID: r.ClusterID, MemberID: r.MemberID, PeerURL: a.peerURL, Restored: a.restored}); err == nil {
			*bound = true
		}
	}
	in, ierr := a.Store.Read(ctx)
	if ierr == nil {
		a.leaseProblems = in.Problems
		a.askRenewal(in.Renewal)
		a.askRotation(in)
		a.peerAsk = in.PeerScheme
	}
	listed := func(l List) bool {
		for _, m := range l.Members {
			if m.ID == r.MemberID {
				return true
			}
		}
		return false
	}
	if st.IsLearner {
		r.Role, r.Healthy = api.RoleLearner, statusHealthy(len(st.Errors), r.Alarms, st.Leader)
		l, err := a.Etcd.MemberList(ctx, a.Cfg.Endpoints)
		if err == nil && !listed(l) {
			return removedByOthers // e.g. removed as a stuck learner
		}
		if ierr == nil && leaving(in) {
			if err == nil {
				if rerr := a.Etcd.Remove(ctx, voterEndpoints(l.Members, r.MemberID), self); rerr == nil {
					a.markLeft(ctx, r)
					return selfRemoved
				}
			}
			return stillRunning
		}
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			perr := a.Etcd.Promote(pctx, voterEndpoints(l.Members, r.MemberID), self)
			cancel()
			if perr == nil {
				// No learner report now: the next look (FastTick) reports the voter with its member list,
				// which is what the hook waits for before the next step.
				a.Log.Info("promotion accepted", "member", r.MemberID)
				a.event(EventMemberPromoted, "Promote", false, "learner %s promoted to voter", r.MemberID)
				return stillRunning
			} else {
				r.Error = "Promoting: " + perr.Error()
			}
		}
		a.maybeDefragment(ctx, in, ierr, st, nil, &r)
		a.report(ctx, r, false)
		return stillRunning
	}
	r.Role = api.RoleVoter
	if st.Leader == self {
		r.Role = api.RoleLeader
	}
	l, err := a.Etcd.MemberList(ctx, []string{a.Cfg.ClientURL})
	if err != nil {
		r.Error = "Unhealthy: " + err.Error()
	} else {
		if !listed(l) {
			return removedByOthers
		}
		r.Healthy = statusHealthy(len(st.Errors), r.Alarms, st.Leader)
		r.Members = l.Members
		a.known = l.Members
	}
	if ierr == nil && leaving(in) && err == nil {
		if a.leave(ctx, l.Members, st.Leader, self, &r) {
			return selfRemoved
		}
	} else if err == nil {
		a.maybeDefragment(ctx, in, ierr, st, l.Members, &r)
	}
	a.report(ctx, r, false)
	return stillRunning
}

// alarmEvents posts AlarmRaised when this member raises an alarm and AlarmDisarmed when its alarm is
// gone: each member speaks for its own alarms only, so a cluster-wide list is not posted once per pod.
func (a *Agent) alarmEvents(alarms []string, self uint64) {
	own := map[string]bool{}
	for _, al := range alarms {
		if typ, id, _ := strings.Cut(al, "@"); id == api.FormatID(self) {
			own[typ] = true
		}
	}
	for typ := range own {
		if !a.ownAlarms[typ] {
			what := map[string]string{
				api.AlarmNoSpace: "its database reached the quota: writes are refused until the alarm is disarmed (the hook starts the recovery)",
				api.AlarmCorrupt: "its data differs from the other members': writes are refused",
			}[typ]
			a.event(EventAlarmRaised, "Alarm", true, "member %s raised %s: %s", api.FormatID(self), typ, what)
		}
	}
	for typ := range a.ownAlarms {
		if !own[typ] {
			a.event(EventAlarmDisarmed, "Alarm", false, "member %s's %s alarm is disarmed", api.FormatID(self), typ)
		}
	}
	a.ownAlarms = own
}

// statusHealthy: a member with a leader and no error in its Status, where a NOSPACE alarm (one error per
// alarm) is not an error of the member: raft works, reads and deletes are served, the pod stays ready
// (etcd's /readyz ignores it), and compaction, defragmentation and membership steps, which it does not
// stop, must still be allowed; DatabaseFull says it instead of a false QuorumLost. Any other error
// (no leader, CORRUPT, an alarm list that could not be read) is unhealthy.
func statusHealthy(errors int, alarms []string, leader uint64) bool {
	if leader == 0 {
		return false
	}
	if errors == 0 {
		return true
	}
	if len(alarms) != errors {
		return false
	}
	for _, a := range alarms {
		if typ, _, _ := strings.Cut(a, "@"); typ != api.AlarmNoSpace {
			return false
		}
	}
	return true
}

// leave moves leadership away, checks the quorum rule and removes this member.
func (a *Agent) leave(ctx context.Context, members []api.Member, leader, self uint64, r *api.Report) bool {
	id := api.FormatID(self)
	healthy := a.Etcd.Health(ctx, members)
	if err := QuorumAllows(members, healthy, id); err != nil {
		r.Error = "Leaving: " + err.Error()
		return false
	}
	if leader == self {
		for _, m := range members {
			if m.ID != id && !m.Learner && healthy[m.ID] != nil {
				to, _ := api.ParseID(m.ID)
				if err := a.Etcd.MoveLeader(ctx, a.Cfg.ClientURL, to); err != nil {
					r.Error = "Leaving: moving leadership away: " + err.Error()
					return false
				}
				a.Log.Info("moved leadership away before leaving", "to", m.ID)
				break
			}
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := a.Etcd.Remove(rctx, voterEndpoints(members, id), self); err != nil {
		r.Error = "Leaving: " + err.Error()
		return false
	}
	a.Log.Info("removed itself from the cluster", "member", id)
	a.markLeft(ctx, *r)
	return true
}

func (a *Agent) markLeft(ctx context.Context, r api.Report) {
	a.left = true
	a.event(EventMemberLeft, "Leave", false, "member %s removed itself from the cluster (intent leave); parked without etcd", r.MemberID)
	r.Role, r.Healthy, r.Members, r.LeaderID = api.RoleLeft, false, nil, ""
	r.Error = api.ReasonParked + ": removed from the cluster"
	a.report(ctx, r, true)
}

// park keeps the container alive without etcd after leaving, reporting "left", until the pod stops or
// the hook wants this ordinal as a member again (then the agent decides again and rejoins).
func (a *Agent) park(ctx context.Context, f StartFacts, d Decision) {
	a.setState("parked", false)
	r := a.idleReport(f, d.Reason+": "+d.Detail)
	r.Role = api.RoleLeft
	for {
		a.report(ctx, r, false)
		if !a.sleep(ctx, a.tick()) {
			return
		}
		if in, err := a.Store.Read(ctx); err == nil {
			a.leaseProblems = in.Problems
			if intent, _ := StartIntent(in.Intent); intent == api.IntentMember {
				a.Log.Info("intent is no longer leave: deciding again", "intent", in.Intent)
				return
			}
		}
	}
}

// report writes the Lease when the report changed, or when a renewal is due (api.RenewInterval).
func (a *Agent) report(ctx context.Context, r api.Report, force bool) {
	if r.ParentUID == "" {
		r.ParentUID = a.Cfg.ParentUID
	}
	a.certFacts.fill(&r)
	if a.restored != nil {
		r.RestoredFrom, r.RestoredRevision = a.restored.URL, strconv.FormatInt(a.restored.Revision, 10)
	}
	if a.certErr != "" && r.Error == "" {
		r.Error = api.ReasonCertificatesInvalid + ": " + a.certErr
	}
	r.Error = withProblems(r.Error, a.leaseProblems)
	// Sizes are written when they move by a significant step (api.SizeMoved): until then the report
	// keeps the values last written, so a member under load does not rewrite its Lease at every look.
	// A file crossing the quota line (api.OverQuota) is written whatever the step: the NOSPACE recovery
	// judges a member done by that line, on the hook's side from this report, on the agent's from etcd,
	// and the two must agree or the hook keeps asking a member that has nothing left to do.
	if keepSizes(a.last, r, quotaOf(a.Cfg.EtcdCommand)) {
		r.DBSize, r.DBSizeInUse = a.last.DBSize, a.last.DBSizeInUse
	}
	renew := api.RenewInterval(r, a.Cfg.LeaseDuration)
	same := fmt.Sprint(r) == fmt.Sprint(a.last)
	if same && !force && (time.Since(a.wrote) < renew || a.crashLoop) {
		return
	}
	if err := a.Store.Write(ctx, r); err != nil {
		a.Log.Warn("writing the member Lease", "error", err)
		return
	}
	if !same {
		a.Log.Info("reported", "role", r.Role, "healthy", r.Healthy, "member", r.MemberID, "error", r.Error)
	}
	a.last, a.wrote = r, time.Now()
}

// certLook is how often a member's certificates are looked at: the files are renewed at 2/3 of a
// lifetime of at least an hour, and each look reads the cluster's two Secrets.
const certLook = time.Minute

// askRenewal passes the renewal the hook asks for to Certs; a new one is looked at now, not at the next
// certLook.
// askRotation takes the CA rotation step and restart permission from the Lease; a change is looked at
// at once.
func (a *Agent) askRotation(in Intent) {
	if a.Certs == nil || (a.Certs.Rotation == in.CARotation && a.Certs.Restart == in.CARestart) {
		return
	}
	a.Certs.Rotation, a.Certs.Restart = in.CARotation, in.CARestart
	a.certChecked = time.Time{}
}

func (a *Agent) askRenewal(mark string) {
	if a.Certs == nil || a.Certs.Renewal == mark {
		return
	}
	a.Certs.Renewal = mark
	a.certChecked = time.Time{}
}

// refreshCerts runs Certs.Ensure at most once per certLook (at once while it has never succeeded) and
// keeps the outcome for the reports.
func (a *Agent) refreshCerts(ctx context.Context) error {
	if a.Certs == nil {
		return nil
	}
	look := certLook
	if a.Cfg.CertLook > 0 {
		look = a.Cfg.CertLook
	}
	if a.Certs.Rotation.Mark != "" || a.Certs.Restart != "" {
		look = min(look, rotationLook) // each step of a rotation waits for every member's look
	}
	if a.certErr == "" && a.certsReady && time.Since(a.certChecked) < look {
		return nil
	}
	retry := a.tick() // etcd waits for its files: look again soon
	if a.certsReady {
		retry = look // etcd runs on the files it has: a bad Secret is looked at as often as a good one
	}
	if a.certErr != "" && time.Since(a.certChecked) < retry {
		return errors.New(a.certErr)
	}
	a.certChecked = time.Now()
	// Bounded: a hung Secret read must not hold up the supervision of etcd.
	ectx, cancel := context.WithTimeout(ctx, 15*time.Second)
	f, err := a.Certs.Ensure(ectx)
	cancel()
	a.certFacts = f
	if err != nil {
		if err.Error() != a.certErr {
			// Posted when the problem appears or changes, not at every look.
			kept := "etcd keeps the files it has"
			if !a.certsReady {
				kept = "etcd waits for usable files"
			}
			a.event(EventCertificatesInvalid, "CheckCertificates", true, "%v (%s)", err, kept)
		}
		a.certErr = err.Error()
		a.Log.Warn("certificates", "error", err)
		return err
	}
	a.certErr, a.certsReady = "", true
	return nil
}

func (a *Agent) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// leaving says whether the hook wants this member to leave (only the exact intent: anything unknown
// keeps the member, see StartIntent).
func leaving(in Intent) bool {
	intent, _ := StartIntent(in.Intent)
	return intent == api.IntentLeave
}

// withProblems adds the Lease problems to a report's error text. The leading reason word stays the
// decision's (the hook acts on reasons such as WaitingForJoin); a report without one gets LeaseProblem.
func withProblems(errText string, problems []string) string {
	if len(problems) == 0 {
		return errText
	}
	p := strings.Join(problems, "; ")
	if strings.Contains(errText, p) {
		return errText
	}
	if errText == "" {
		return "LeaseProblem: " + p
	}
	return errText + " (" + p + ")"
}

// restoreAttemptTimeout bounds one restore: a database of several GiB downloads and restores in minutes
// (77 MiB/s measured, docs/performance.md, Benchmark).
const restoreAttemptTimeout = time.Hour

// restoreSeed restores the seed's data directory from the configured snapshot and binds it to this
// member. A failure is reported on the Lease (RestoreFailed) and retried with backoff up to five
// minutes: a bucket or credentials can be fixed while the cluster waits; a damaged snapshot cannot,
// and the condition says which it is.
func (a *Agent) restoreSeed(ctx context.Context) {
	a.setState("restoring", false)
	req := *a.Cfg.Restore
	// Bound before the data is in place, like every start of ours (the binding is what makes the data
	// ours): a crash between the two leaves a binding without data, which restores again, never data
	// without a binding, which would be refused as foreign for good.
	req.Bind = func(res RestoreResult) error {
		return WriteBinding(a.Cfg.DataDir, Binding{ParentUID: a.Cfg.ParentUID, PeerURL: a.Cfg.PeerURL,
			Restored: &Restored{URL: res.URL, Revision: res.Revision}})
	}
	// One attempt is bounded: a stalled download must end in RestoreFailed and a retry, not hang.
	actx, cancel := context.WithTimeout(ctx, restoreAttemptTimeout)
	res, err := Restore(actx, a.Log, req)
	cancel()
	if err == nil {
		a.restored = &Restored{URL: res.URL, Revision: res.Revision}
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		a.restoreFailures++
		wait := 5 * time.Second
		for i := 1; i < a.restoreFailures && wait < 5*time.Minute; i++ {
			wait *= 2
		}
		wait = min(wait, 5*time.Minute)
		a.Log.Warn("restore failed", "error", err, "failures", a.restoreFailures, "backoff", wait.String())
		if msg := err.Error(); msg != a.restoreError {
			a.restoreError = msg
			a.event(EventRestoreFailed, "Restore", true, "restoring the seed failed (retrying in %s): %v", wait, err)
		}
		r := a.keptReport()
		r.Error = api.ReasonRestoreFailed + ": " + err.Error()
		a.report(ctx, r, false)
		a.sleep(ctx, wait)
		return
	}
	a.restoreFailures, a.restoreError = 0, ""
	a.event(EventSnapshotRestored, "Restore", false, "restored snapshot %s (revision %d, %d bytes) as the seed of this cluster; revisions continue from %d", res.URL, res.Revision, res.Manifest.Size, res.Revision+RevisionBump)
}

// etcdEnv is the agent's environment without what the restore loaded for the store (backup
// credentials, the emulator host): etcd needs none of it, and its environment is readable where the
// agent's secrets should not be.
func etcdEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if backup.CredentialVar(k) {
			continue
		}
		out = append(out, kv)
	}
	return out
}
