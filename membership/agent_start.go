package membership

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/backup"
)

// How the agent starts etcd: the decision from its Lease, the data directory and the other reports
// (DecideStart), then etcd itself, supervised until it exits or is asked to restart in place.

// decide gathers the start facts: the Lease (live), the data directory, the member list through a voter.
func (a *Agent) decide(ctx context.Context) (Decision, StartFacts, error) {
	in, err := a.Store.Read(ctx)
	if err != nil {
		return Decision{}, StartFacts{}, fmt.Errorf("reading the member Lease: %w", err)
	}
	a.tls.askRenewal(in.Renewal)
	a.tls.askRotation(in)
	a.peers.ask = in.PeerScheme
	df, err := ReadData(a.Cfg.DataDir)
	if err != nil {
		return Decision{}, StartFacts{}, err
	}
	if df.Binding != nil {
		a.bound.read(df.Binding)
	}
	permitted, permitProblem := in.Join.OpenAt(a.Store.Now())
	problems := append([]string(nil), in.Problems...)
	if permitProblem != "" {
		problems = append(problems, permitProblem)
	}
	if in.Seed && a.Cfg.Bootstrap != "" {
		// A cluster created statically has no seed: the mark is a hand edit, and a seed starting beside
		// the static members could form a second cluster.
		problems = append(problems, fmt.Sprintf("the Lease carries the seed mark but agent.json records %s: ignored", a.Cfg.Bootstrap))
		in.Seed = false
	}
	f := StartFacts{
		Intent: in.Intent, Seed: in.Seed, JoinPermitted: permitted, Recover: in.Recover,
		ClusterUID: a.Cfg.ClusterUID, Adopt: a.Cfg.Adopt, Data: df, PeerURL: a.Cfg.PeerURL,
	}
	ids, err := a.Store.ClusterIDs(ctx)
	if err != nil {
		return Decision{}, StartFacts{}, fmt.Errorf("reading the cluster's Leases: %w", err)
	}
	if in.Report.ClusterID != "" && in.Report.ClusterUID == a.Cfg.ClusterUID {
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
	f.Static = a.staticPeers(in, &problems)
	var idProblems []string
	f.ClusterID, idProblems = LeaseClusterID(a.current(ids))
	a.rep.problems = append(problems, idProblems...)
	f.JoinDeadline = a.localTime(in.Join.Until)
	// The seed of a new cluster (seed mark, no data, no cluster ID on any Lease) asks the client Service,
	// which has no ready endpoint yet: nobody answering is the expected outcome there, and the full bound
	// cost every create 5 s. Anywhere else a slow answer matters and gets the full bound.
	listTimeout := 6 * time.Second
	if (in.Seed || f.Static != nil) && !df.Present && len(ids) == 0 {
		listTimeout = time.Second
	}
	if rc := in.Recover; rc.Token != "" && df.Present && api.FormatID(df.MemberID) == rc.MemberID {
		// A recovery's part on this member's data: asked because no quorum answers, and decided without
		// the member list (StartFacts.recovery).
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
		a.peers.known = l.Members
		f.Bootstrapped = true
		if f.ClusterID == 0 {
			f.ClusterID = l.ClusterID
		}
	}
	return DecideStart(f), f, nil
}

// staticPeers is the static initial cluster the Lease asks this member to start with, nil when it asks
// none or cannot be followed (problems says why). The count must be the one agent.json records (both
// are the hook's, written at the creation: a hand edit of one is not enough to start a second way), this
// member must be one of it, and a cluster restored from a snapshot starts from its seed only.
func (a *Agent) staticPeers(in Intent, problems *[]string) []api.Member {
	if in.Static == 0 {
		return nil
	}
	want := api.StaticBootstrap(in.Static)
	switch {
	case a.Cfg.Bootstrap != want:
		*problems = append(*problems, fmt.Sprintf("the Lease asks %s but agent.json says %q: not starting from a static initial cluster", want, a.Cfg.Bootstrap))
		return nil
	case a.Cfg.Restore != nil:
		*problems = append(*problems, "the Lease asks "+want+" but the cluster is restored from a snapshot: only its seed starts it")
		return nil
	case a.Cfg.StaticPeers == nil:
		return nil
	}
	peers := a.Cfg.StaticPeers(in.Static)
	if !slices.ContainsFunc(peers, func(m api.Member) bool { return samePeer(m.PeerURL, a.Cfg.PeerURL) }) {
		*problems = append(*problems, fmt.Sprintf("the Lease asks %s but this member is not one of them: not starting from it", want))
		return nil
	}
	return peers
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

// start prepares membership for d, runs etcd and supervises it until it exits or ctx ends.
func (a *Agent) start(ctx context.Context, d Decision, f StartFacts) error {
	state := "existing"
	var initial []api.Member
	a.peers.url = a.peers.startURL(f)
	if d.Action == StartNew || d.Action == StartStatic || d.Action == Join || d.Action == Replace {
		a.peers.url = a.Cfg.PeerURL // the URL it is about to be added (or bootstrapped) under
	}
	if d.Action != StartExisting && d.Action != ForceNew {
		// The binding is written before etcd writes anything, so that data without one is never ours.
		if err := WriteBinding(a.Cfg.DataDir, Binding{ClusterUID: a.Cfg.ClusterUID, PeerURL: a.peers.url}); err != nil {
			return fmt.Errorf("writing the data binding: %w", err)
		}
	}
	a.recovery.forcing = ""
	switch d.Action {
	case ForceNew:
		a.recovery.forcing = f.Recover.Token
		a.env.event(EventRecoveryForced, "ForceNewCluster", true, "%s; the other members' data was lost or set aside", d.Detail)
	case StartNew:
		state = "new"
		initial = []api.Member{{Name: a.Cfg.Name, PeerURL: a.Cfg.PeerURL}}
		a.env.event(EventClusterBootstrapped, "Bootstrap", false, "seed of a new cluster: starting etcd as its first member")
	case StartStatic:
		state = "new"
		initial = f.Static
		a.env.event(EventClusterBootstrapped, "Bootstrap", false, "one of %d members of a new cluster: starting etcd from a static initial cluster", len(f.Static))
	case StartLearner, StartListed:
		initial = f.Members
		if d.Action == StartLearner && d.Member != nil {
			a.joining.begin(d.Member.ID, initial)
		}
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
				a.env.event(EventDataLossDetected, "ReplaceMember", true, "member %s is in the member list but its data directory is empty: removing that ID and joining under a new one", d.Member.ID)
			}
			if err := a.Etcd.Remove(jctx, eps, old); err != nil {
				return err
			}
			// A re-add in the same second as the original add collides with the removed ID.
			sleep(ctx, 1100*time.Millisecond)
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
		a.env.event(EventMemberAdded, "AddLearner", false, "added as learner %s (%s); %d members now", api.FormatID(id), why, len(members))
		initial = members
		a.joining.begin(api.FormatID(id), members)
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
		if a.peers.url != "" {
			self = a.peers.url
		}
		parts = append(parts, a.Cfg.Name+"="+self)
	}
	return strings.Join(parts, ",")
}

// runEtcd starts etcd and supervises it: promote while a learner, leave on intent leave, report.
func (a *Agent) runEtcd(ctx context.Context, state string, initial []api.Member) error {
	args := append([]string{}, a.Cfg.EtcdCommand[1:]...)
	if a.Certs != nil && a.peers.url != "" {
		// The peer listener on the scheme of this member's own peer URL (a TLS switch moves it).
		args = peerArgs(args, a.peers.url)
	}
	args = append(args, "--initial-cluster-state="+state)
	if a.recovery.forcing != "" {
		// Once, for the recovery's token: the binding records it at the first look that finds etcd up
		// (recovery.go), and no later start repeats it.
		args = append(args, "--force-new-cluster")
	}
	if len(initial) > 0 {
		args = append(args, "--initial-cluster="+a.initialCluster(initial))
	}
	if a.Certs != nil {
		// etcd trusts the CAs of the files it starts on until it stops: bring them up to date with the
		// Secrets first (a start after a CA rotation's step), then pin what it is handed. A failure
		// leaves the files as they are, and the pin says so truthfully (docs/design/14-tls.md §14.6).
		a.tls.recheck()
		_ = a.tls.refresh(ctx)
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
	if a.proc.started(cmd.Process.Pid) {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// Until etcd has answered once, the probe port answers /livez itself: a long WAL replay or join
	// discovery is not killed by the liveness probe.
	a.proc.setState("starting", false)
	defer a.proc.setState("stopped", false)
	// stop stops etcd once, whoever asks (a leave stops it before removing the member: drain.go).
	var stopOnce sync.Once
	var stopDone bool
	stop := func() { stopOnce.Do(func() { a.stopEtcd(cmd, exited); stopDone = true }) }
	stopped := func() bool { return stopDone }
	a.stopRunning = stop
	defer func() { a.stopRunning = nil }()
	bound := false
	started := time.Now()
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("etcd exited: %v", err)
		case <-ctx.Done():
			if a.proc.isKilled() {
				<-exited
				return ctx.Err()
			}
			// The pod is being deleted (a roll, a node drain): its endpoint is already terminating;
			// new connections must have stopped arriving before etcd closes the ones it has. A leader
			// hands over in etcd's own stop, after its connections closed (handover.go says why not
			// before).
			a.proc.drain(a.Log, "the pod is being deleted", a.Cfg.TerminatingWait)
			stop()
			return ctx.Err()
		case <-time.After(a.nextLook(started)):
		}
		if a.proc.isKilled() {
			<-exited
			return errors.New("killed")
		}
		_ = a.tls.refresh(ctx) // reported; etcd keeps the files it has
		if a.Certs != nil && a.Certs.RestartDue() && a.restartStillAsked(ctx) {
			// The hook lets this member restart to trust the CAs of the Secret (a CA rotation's step,
			// docs/design/14-tls.md §14.6): a graceful stop (a leader hands over), new files, a start on the same
			// data. Not a failure: no backoff.
			a.Log.Info("restarting etcd to trust the CAs of the CA Secret", "cas", a.Certs.Restart)
			a.env.event(EventCertificateRenewed, "RestartForCA", false, "restarting etcd to trust the CAs %s (CA rotation)", shortFPs(strings.Split(a.Certs.Restart, ",")))
			// Said before etcd stops: the hook holds every other restart while this report stands, even
			// if its own answer (the permission) is lost to a stale cache.
			r := a.rep.kept()
			r.SetError(api.ReasonRestartingForCA, "restarting etcd to trust the CAs of the CA Secret")
			a.rep.report(ctx, r, true)
			a.proc.drain(a.Log, "restarting to trust the CAs of the CA Secret", a.Cfg.DrainWait)
			stop()
			a.tls.recheck()
			return errRestartForCA
		}
		if a.peers.due() && a.peers.stillAsked(ctx) {
			// The hook lets this member move its peer URL to the other scheme (a TLS switch's step,
			// docs/design/14-tls.md §14.8): said first, as for a CA restart; the member list changes while etcd
			// runs (it needs a quorum with this member in it: nothing has stopped if it cannot), then etcd
			// restarts listening on the new scheme, as etcd's runtime reconfiguration guide orders it.
			to, self := a.peers.ask, a.rep.last.MemberID
			r := a.rep.kept()
			r.SetError(api.ReasonSwitchingPeerScheme, "moving the peer URL to "+to)
			a.rep.report(ctx, r, true)
			if err := a.peers.move(ctx, to, self); err != nil {
				a.Log.Warn("peer URL not moved; etcd keeps running on the old one", "error", err)
				a.peers.failedAt = time.Now()
				continue
			}
			a.Log.Info("restarting etcd to listen on the new peer URL", "peerURL", a.peers.url)
			a.proc.drain(a.Log, "restarting on the new peer URL", a.Cfg.DrainWait)
			stop()
			return errPeerMoved
		}
		switch a.observe(ctx, &bound) {
		case selfRemoved:
			// This member removed itself, after its drain stopped etcd (a learner's etcd stops on its own
			// once removed): make sure of it.
			if !stopped() {
				select {
				case <-exited:
				case <-time.After(10 * time.Second):
					stop()
				}
			}
			return nil
		case removedByOthers:
			stop()
			return errors.New("this member is no longer in the member list: stopped etcd to decide again")
		case stoppedToLeave:
			return errors.New("etcd stopped to leave, but the removal failed: deciding again")
		case stopForRecovery:
			stop()
			return errRecovery
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
	a.tls.askRotation(in)
	return a.Certs.RestartDue()
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
	// stoppedToLeave: etcd was stopped for a leave whose removal then failed (drain.go).
	stoppedToLeave
	// stopForRecovery: the hook asks this member's part in a recovery (fence or survivor): etcd stops
	// and the start decision carries it out (recovery.go).
	stopForRecovery
)

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

// restoreAttemptTimeout bounds one restore: a database of several GiB downloads and restores in minutes
// (77 MiB/s measured, docs/performance.md, Benchmark).
const restoreAttemptTimeout = time.Hour
