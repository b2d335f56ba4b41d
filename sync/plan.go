package sync

import (
	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// Timing of resyncs.
const (
	resyncBusySeconds = 5
	resyncIdleSeconds = 60
)

// plan is the outcome of one decision: what to render (its own fields) and what status says of it
// (steps.Decision, which render.Status reads).
type plan struct {
	steps.Decision
	f    *facts.Facts
	opts Options
	// userSpec: the adopted spec as the user wrote it (defaulted), which the ConfigMap records.
	userSpec api.ClusterSpec
	// pauseWaited: the pause's own wait is in Waiting (nothing to look at again for: it ends by a spec
	// change, which syncs at once).
	pauseWaited bool

	partition int32
	// staticN: the static creation this sync renders (steps.StartCluster), 0 none; the StatefulSet keeps
	// its record (facts.StaticRecord) whatever this sync renders.
	staticN int
	hash    string
	leases  steps.Leases // the hook's half of each member Lease, by ordinal
	jobs    []steps.Job  // new Jobs and carried-over observed ones

	// action: the change started this sync.
	action string
	// cleanup: pods or volumes of removed ordinals are still to go.
	cleanup bool
	// rollingTo: the revision the roll in progress brings the members to (ConfigKeyRollingTo).
	rollingTo string
	// rollHeld: the next roll step waits for quorum.
	rollHeld bool
	// removing: a remove Job was made this sync.
	removing bool
	// released: observed children the plan deletes on purpose ("key/name" -> reason).
	released map[string]string
	// tlsWaitsForCA: a new spec switching TLS waits for a CA rotation in progress (whose restarts go on
	// meanwhile).
	tlsWaitsForCA bool
}

// wait notes what the decision waits for: of step family kind, about subject ("" when the sentence
// does not start with it), the rest formatted.
func (p *plan) wait(kind steps.WaitKind, subject, format string, args ...any) {
	p.Waiting = p.Waiting.Addf(kind, subject, format, args...)
}

// await adds what a step family's value waits for (zero waits: nothing).
func (p *plan) await(ws ...steps.Wait) {
	for _, w := range ws {
		if w != (steps.Wait{}) {
			p.Waiting = p.Waiting.Add(w)
		}
	}
}

// release records that the plan deletes an observed child, and why.
func (p *plan) release(key, name, reason string) {
	if p.released == nil {
		p.released = map[string]string{}
	}
	p.released[key+"/"+name] = reason
}
