package sync

import (
	"fmt"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/render"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// Timing of Jobs and resyncs.
const (
	succeededJobGrace = 2 * time.Minute
	retryBackoffBase  = 30 * time.Second
	retryBackoffMax   = 10 * time.Minute
	maxAttempts       = 99
	resyncBusySeconds = 5
	resyncIdleSeconds = 60
)

// plan is the outcome of one decision: what to render and what to say in status.
type plan struct {
	f    *facts.Facts
	opts Options
	// names: the facts' names, with the client scheme every member serves now (decideTLSMode): every URL
	// the plan renders uses it.
	names api.Names
	// distrusted: inputs the decision ignored as impossible (hand edits), beside the facts' own, for
	// status (InputIgnored). The facts are never written to by the decision.
	distrusted []string
	spec       api.ClusterSpec // rendered from: the adopted spec with the raised quota and storage (space.go)
	// userSpec: the adopted spec as the user wrote it (defaulted), which the ConfigMap records.
	userSpec api.ClusterSpec
	// space: where spec.maintenance.space stands (space.go).
	space spaceState
	// recovery: the plan for a quorum that lost its data (recovery.go).
	recovery recoveryState
	// auth: the auth config the agents apply (auth.go); nil without spec.auth.
	auth     *api.AuthConfig
	hasSpec  bool
	problems []api.Problem // why the user's spec is not (yet) applied
	// certProblems: what is wrong with the user's TLS Secrets; certBlocked: the spec was not adopted
	// because of them.
	certProblems []certProblem
	certBlocked  bool
	// paused: spec.paused (pause.go); pauseWaited: the pause's own wait is in waiting (nothing to look
	// at again for: it ends by a spec change, which syncs at once).
	paused      bool
	pauseWaited bool
	// pendingSpec: a valid new spec waits for the step in flight.
	pendingSpec bool

	replicas  int32
	partition int32
	// staticN: the static creation this sync renders (bootstrapStatic), 0 none; the StatefulSet keeps
	// its record (facts.StaticRecord) whatever this sync renders.
	staticN int
	hash    string
	leases  map[int]*api.Intent // the hook's half of each member Lease, by ordinal
	jobs    []render.Job        // new Jobs and carried-over observed ones

	// busy names the membership change in flight ("" when none); action the change started this sync.
	busy    string
	action  string
	waiting steps.Waits // what the hook waits for, in order
	stalled string      // a step past its deadline
	rolling bool
	// cleanup: pods or volumes of removed ordinals are still to go.
	cleanup bool
	// busyVolume: the step in flight (busy) only touches volumes: deletes a removed member's, grows a
	// member's claim or re-creates the StatefulSet for its claim template (the cluster has its size).
	busyVolume bool
	// growing: the claim whose growth Job this answer starts; growth: the step in flight (busy) grows
	// volumes (volumes.go).
	growing string
	growth  bool
	// rollingTo: the revision the roll in progress brings the members to (ConfigKeyRollingTo).
	rollingTo string
	// rollHeld: the next roll step waits for quorum.
	rollHeld bool
	// removing: a remove Job was made this sync.
	removing bool
	// unsafe reasons block actions (QuorumLost, SplitBrain).
	quorumLost bool
	// released: observed children the plan deletes on purpose ("key/name" -> reason).
	released map[string]string
	// defrag: the defragmentation pass due and the member asked (defrag.go).
	defrag defragState
	// caRot: the CA rotation's step and restart (carotation.go).
	caRot caRotationState
	// tlsSw: where a switch of spec.security.tls.enabled stands (tlsswitch.go); tlsWaitsForCA: a new
	// spec switching TLS waits for a CA rotation in progress (whose restarts go on meanwhile).
	tlsSw         tlsSwitchState
	tlsWaitsForCA bool

	// backupSuccess, backupFailure: the backup Lease's reports (readBackupReports), for status.
	backupSuccess, backupFailure *api.BackupReport
	// backupContinuous: the continuous backup writer's report on the same Lease.
	backupContinuous *api.ContinuousReport
	// backupCopy: the last copy pass's report (spec.backup.copy).
	backupCopy *api.CopyReport

	// In-place restore (inplace.go): the record to write; restoring while one runs; why it is stuck.
	inPlace        *facts.InPlaceRecord
	restoring      bool
	inPlaceFailure string
}

// distrust notes an input the decision ignored.
func (p *plan) distrust(format string, args ...any) {
	p.distrusted = append(p.distrusted, fmt.Sprintf(format, args...))
}

// wait notes what the decision waits for: of step family kind, about subject ("" when the sentence
// does not start with it), the rest formatted.
func (p *plan) wait(kind steps.WaitKind, subject, format string, args ...any) {
	p.waiting = p.waiting.Add(steps.Wait{Kind: kind, Subject: subject, Detail: fmt.Sprintf(format, args...)})
}

// target is the latched size; 0 when there is no spec to render from.
func (p *plan) target() int {
	if p.spec.Size == nil {
		return 0
	}
	return int(*p.spec.Size)
}

func (p *plan) timeout(secs *int32) time.Duration { return time.Duration(*secs) * time.Second }

func (p *plan) lease(i int) *api.Intent {
	lp := p.leases[i]
	if lp == nil {
		lp = &api.Intent{}
		p.leases[i] = lp
	}
	return lp
}

func (p *plan) setIntent(i int, intent string) {
	lp := p.lease(i)
	if lp.Kind != intent {
		lp.Kind = intent
		lp.Since = p.f.Now.UTC().Format(time.RFC3339)
	}
}

func (p *plan) permit(i int) {
	p.setIntent(i, api.IntentMember)
	lp := p.lease(i)
	lp.Join = api.NewJoinWindow(p.f.Now, p.timeout(p.spec.Timeouts.LearnerPromotionSeconds))
}

// defragState is what the decision found, for the Lease intent and the status.
type defragState struct {
	token  string // the pass due ("" none)
	target int    // the ordinal asked to defragment, -1 none
	held   string // why no member is asked now
	next   string // the pass due, when target finishes an earlier one (token) first
	done   int    // members done for this pass
	todo   int    // members that still need it
}

// caRotationState is the decision of one sync.
type caRotationState struct {
	intent api.CARotationIntent // what every member Lease asks (zero: nothing)
	// restart: the ordinal whose etcd may restart now (-1 none) into trust (etcd.io/ca-restart).
	restart int
	trust   string
	status  *api.CARotation
	active  bool // a rotation is in progress (not done)
}

// tlsMode is the TLS of the pod template.
type tlsMode int

const (
	tlsPlain tlsMode = iota
	tlsOn
	tlsTransition
)

// tlsSwitchState is the decision of one sync.
type tlsSwitchState struct {
	mode tlsMode
	// from is the scheme being left (transition, or the final roll after it): the agents' own clients
	// and a joining member's peer URL keep it until every member serves the new one.
	from string
	// final: the pods roll from the transition template to the final one.
	final bool
	// turn: the ordinal whose peer URL moves now (-1 none).
	turn   int
	status *api.TLSSwitch
}

func (s tlsSwitchState) active() bool { return s.mode == tlsTransition || s.final }

// switchAnnotation is the StatefulSet's etcd.io/tls-switch: "transition <from>" while the pods are
// given the transition template, "final <from>" while they roll from it to the final one.
func (s tlsSwitchState) switchAnnotation() string {
	switch {
	case s.mode == tlsTransition:
		return "transition " + s.from
	case s.final:
		return "final " + s.from
	}
	return ""
}

// release records that the plan deletes an observed child, and why.
func (p *plan) release(key, name, reason string) {
	if p.released == nil {
		p.released = map[string]string{}
	}
	p.released[key+"/"+name] = reason
}

func (p *plan) keptNote() string {
	if p.hasSpec && p.f.Applied != nil {
		return fmt.Sprintf(" (children keep the last valid spec: size %d, version %s)", *p.spec.Size, p.spec.Version)
	}
	return ""
}

// formedNow: every member of the target size is a healthy voter.
func (p *plan) formedNow() bool {
	f := p.f
	if !f.Bootstrapped || !p.hasSpec || len(f.Truth.Primary) < p.target() {
		return false
	}
	for _, m := range f.Truth.Primary {
		if !m.Healthy || m.Learner {
			return false
		}
	}
	return true
}

// backupToken is the etcd.io/backup-now token asked for, "" when none.
func (p *plan) backupToken() string {
	return strings.TrimSpace(p.f.Parent.Annotations[api.AnnBackupNow])
}
