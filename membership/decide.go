package membership

import (
	"fmt"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// StartFacts is everything the agent knows before an etcd start (docs/design/07-steps.md §7.2).
type StartFacts struct {
	// Intent is the hook's intent on this member's Lease: member or leave (as written: DecideStart acts on
	// StartIntent of it).
	Intent string
	// Seed: the hook marks this pod as the seed of a cluster not bootstrapped yet.
	Seed bool
	// Static: the initial cluster of a static creation this member may start with (every member of it,
	// this one included), nil when the Lease does not ask for one or agent.json does not say the same.
	Static []api.Member
	// JoinPermitted: a join permission whose deadline has not passed (by the API server's clock);
	// JoinDeadline is that deadline on this machine's clock.
	JoinPermitted bool
	JoinDeadline  time.Time
	// Bootstrapped: some Lease of this cluster (this one included) carries a cluster ID.
	Bootstrapped bool
	// ClusterID the Leases report for this EtcdCluster, 0 when none.
	ClusterID  uint64
	ClusterUID string
	Adopt      bool
	Data       DataFacts
	// Members is the linearizable member list read through a voter; nil when no voter answered.
	Members []api.Member
	PeerURL string
	// Recover: this member's part in a recovery from the freshest survivor (zero: none).
	Recover api.RecoverIntent
	// Retired are cluster IDs an in-place restore replaced (docs/design/16-backup-restore.md §16.8): their data is moved
	// aside, never started on or refused.
	Retired map[uint64]bool
}

// Action is what the agent does next.
type Action int

const (
	// Wait: nothing may be done now; report why and look again.
	Wait Action = iota
	// StartExisting: start etcd on its data (state existing), even if no peer answers.
	StartExisting
	// StartNew: bootstrap a one-member cluster (the seed, once).
	StartNew
	// StartLearner: start as the learner already in the member list that never started.
	StartLearner
	// StartStatic: start (state new) as one of the members of a static initial cluster, all at once.
	StartStatic
	// StartListed: start (state existing) as the voter already in the member list that never started: a
	// member of a static creation whose others formed the cluster before it came up.
	StartListed
	// Join: add this peer URL as a learner, then start (existing) with the live member list.
	Join
	// Replace: remove the old ID at this peer URL (its data is gone), then Join.
	Replace
	// MoveAside: the data belongs to a member proven removed; keep a copy aside and decide again.
	MoveAside
	// Park: this member has left (or must not run): keep the container alive without etcd.
	Park
	// Refuse: the data belongs to another cluster (ForeignData).
	Refuse
	// ForceNew: restart on this member's data as a one-member cluster (--force-new-cluster): the
	// survivor of a recovery, once per token.
	ForceNew
)

func (a Action) String() string {
	return [...]string{"wait", "start-existing", "start-new", "start-learner", "start-static", "start-listed", "join", "replace", "move-aside", "park", "refuse", "force-new"}[a]
}

// Decision is an action with its reason (reported in the Lease as "<Reason>: <detail>").
type Decision struct {
	Action Action
	Reason string
	Detail string
	// Member is the list entry the action concerns (StartLearner, StartListed, Replace), nil otherwise.
	Member *api.Member
}

func (d Decision) String() string { return fmt.Sprintf("%s (%s: %s)", d.Action, d.Reason, d.Detail) }

// DecideStart is the agent's pure start decision.
func DecideStart(f StartFacts) Decision {
	f.Intent, _ = StartIntent(f.Intent)
	self := f.self()
	if f.Data.Partial {
		if reason, foreign := f.foreign(); foreign {
			return Decision{Action: Refuse, Reason: api.ReasonForeignData, Detail: reason}
		}
		// etcd creates member/ before join discovery and the WAL after: a start of ours that died in
		// between leaves a directory no start can use.
		return Decision{Action: MoveAside, Reason: "PartialData", Detail: "the data directory has no WAL (a start died half-way): moved aside"}
	}
	if f.Intent == api.IntentLeave {
		_, foreign := f.foreign()
		switch {
		case f.Data.Present && !foreign && f.Members == nil:
			// Nobody answers: this member may be needed for quorum (a 2 -> 1 shrink whose leaver
			// restarted). Run on its data; if it was removed, etcd says so and the next start parks.
			return Decision{Action: StartExisting, Reason: "Leaving", Detail: "no voter answers: starting on its data to leave cleanly"}
		case f.Data.Present && !foreign && self != nil && self.ID == api.FormatID(f.Data.MemberID):
			// Still a member on its own data: run so that the member can leave cleanly.
			return Decision{Action: StartExisting, Reason: "Leaving", Detail: "still a member: starting to leave"}
		}
		return Decision{Action: Park, Reason: api.ReasonParked, Detail: "intent is leave: not starting etcd"}
	}
	if f.Intent != api.IntentMember {
		return Decision{Action: Wait, Reason: api.ReasonWaitingForLease, Detail: "no intent on the member Lease yet"}
	}
	if d, ok := f.recovery(); ok {
		return d
	}
	if f.Data.Present && f.retiredData() {
		return Decision{Action: MoveAside, Reason: "ReplacedData", Detail: "the data is of cluster " + api.FormatID(f.Data.ClusterID) + ", which an in-place restore replaced: moved aside"}
	}
	if f.Data.Present {
		if reason, foreign := f.foreign(); foreign {
			return Decision{Action: Refuse, Reason: api.ReasonForeignData, Detail: reason}
		}
		if f.Members == nil {
			// After a full restart nobody answers until etcd runs: start on the data.
			return Decision{Action: StartExisting, Reason: "Starting", Detail: "on existing data, no voter answers yet"}
		}
		id := api.FormatID(f.Data.MemberID)
		for i := range f.Members {
			if f.Members[i].ID == id {
				return Decision{Action: StartExisting, Reason: "Starting", Detail: "on existing data of member " + id}
			}
		}
		if f.Data.MemberID == 0 {
			return Decision{Action: StartExisting, Reason: "Starting", Detail: "on existing data (member ID unknown)"}
		}
		return Decision{Action: MoveAside, Reason: "RemovedMember", Detail: "member " + id + " is not in the member list: its data is moved aside"}
	}
	// No data from here on.
	if !f.Bootstrapped {
		if len(f.Static) > 0 {
			// No cluster ID on any Lease and no voter answers: the members of a static creation start
			// together, and etcd itself refuses a member that published itself once (isMemberBootstrapped).
			return Decision{Action: StartStatic, Reason: "Bootstrapping", Detail: fmt.Sprintf("one of %d members of a new cluster, starting together", len(f.Static))}
		}
		if f.Seed {
			return Decision{Action: StartNew, Reason: "Bootstrapping", Detail: "seed of a new cluster"}
		}
		return Decision{Action: Wait, Reason: api.ReasonWaitingForSeed, Detail: "the cluster is not bootstrapped yet"}
	}
	if f.Members == nil {
		return Decision{Action: Wait, Reason: api.ReasonWaitingForJoin, Detail: "no data and no voter answers"}
	}
	if self != nil && !self.Learner && !self.Started {
		// A voter in the list that never published itself has no data anywhere: starting it is no
		// membership change (only a static creation, or a human's member add, makes one).
		return Decision{Action: StartListed, Reason: "Starting", Detail: "as member " + self.ID + ", listed but never started", Member: self}
	}
	if !f.JoinPermitted {
		return Decision{Action: Wait, Reason: api.ReasonWaitingForJoin, Detail: "no data, waiting for join-permitted"}
	}
	if self != nil {
		if self.Learner && !self.Started && self.Name == "" {
			return Decision{Action: StartLearner, Reason: "Joining", Detail: "reusing learner " + self.ID + " that never started", Member: self}
		}
		return Decision{Action: Replace, Reason: "Joining", Detail: "member " + self.ID + " lost its data: replacing it", Member: self}
	}
	return Decision{Action: Join, Reason: "Joining", Detail: "adding a learner"}
}

// reasonFenced: a MoveAside that is this member's fence in a recovery (the agent reports the token).
const reasonFenced = "Fenced"

// recovery is this member's part in a recovery (docs/design/19-recovery.md), asked on its Lease: only
// on data of the member the plan saw (a later start's data is never fenced or forced), of this
// EtcdCluster, only once per token, and only while no voter answers the member list: a cluster with a
// quorum is never forced beside (the hook asks only then; a hand-edited Lease must not split it).
func (f StartFacts) recovery() (Decision, bool) {
	rc := f.Recover
	if rc.Token == "" || !f.Data.Present || api.FormatID(f.Data.MemberID) != rc.MemberID || f.Members != nil {
		return Decision{}, false
	}
	if _, foreign := f.foreign(); foreign {
		return Decision{}, false
	}
	if b := f.Data.Binding; b != nil && b.Recovered == rc.Token {
		return Decision{}, false
	}
	switch rc.Role {
	case api.RecoverFence:
		return Decision{Action: MoveAside, Reason: reasonFenced, Detail: "member " + rc.MemberID + "'s data is set aside for the recovery " + rc.Token + " (it rejoins as a learner)"}, true
	case api.RecoverSurvivor:
		return Decision{Action: ForceNew, Reason: "Recovering", Detail: "member " + rc.MemberID + " restarts on its data as a one-member cluster (recovery " + rc.Token + ")"}, true
	}
	return Decision{}, false
}

func (f StartFacts) self() *api.Member {
	for i := range f.Members {
		if samePeer(f.Members[i].PeerURL, f.PeerURL) { // either scheme: a TLS switch moves it
			return &f.Members[i]
		}
	}
	return nil
}

// retiredData: the data directory is of a cluster an in-place restore of this EtcdCluster replaced, and
// was written for this member (or has no binding: this cluster's data that lost it). Data of another
// EtcdCluster or ordinal stays foreign whatever its cluster ID.
func (f StartFacts) retiredData() bool {
	if f.Data.ClusterID == 0 || !f.Retired[f.Data.ClusterID] || f.Data.ClusterID == f.ClusterID {
		return false
	}
	if b := f.Data.Binding; b != nil && (b.ClusterUID != f.ClusterUID || b.PeerURL != "" && f.PeerURL != "" && !samePeer(b.PeerURL, f.PeerURL)) {
		return false
	}
	return true
}

// foreign says whether the data directory was written for another EtcdCluster or cluster.
func (f StartFacts) foreign() (string, bool) {
	if f.Adopt {
		return "", false
	}
	if b := f.Data.Binding; b != nil {
		if b.ClusterUID != f.ClusterUID {
			return fmt.Sprintf("the data directory belongs to EtcdCluster UID %s, not %s (set adoptExistingData to use it)", b.ClusterUID, f.ClusterUID), true
		}
		if b.PeerURL != "" && f.PeerURL != "" && !samePeer(b.PeerURL, f.PeerURL) {
			return fmt.Sprintf("the data directory belongs to the member at %s, not %s (a volume bound to another ordinal)", b.PeerURL, f.PeerURL), true
		}
	} else if f.ClusterID == 0 || f.Data.ClusterID != f.ClusterID {
		// No binding: only data of this very cluster (its WAL names the cluster ID the Leases report)
		// is trusted; it lost its binding, not its identity.
		return fmt.Sprintf("the data directory has no etcdhook binding and cluster ID %s (set adoptExistingData to use it)", api.FormatID(f.Data.ClusterID)), true
	}
	if f.ClusterID != 0 && f.Data.ClusterID != 0 && f.Data.ClusterID != f.ClusterID {
		return fmt.Sprintf("the data directory is of cluster %s, this cluster is %s", api.FormatID(f.Data.ClusterID), api.FormatID(f.ClusterID)), true
	}
	return "", false
}
