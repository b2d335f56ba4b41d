package sync

import (
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// roll takes the roll's part of the decision (steps.Roll) into the plan, and reports whether a roll is
// in progress, which holds back scaling.
func (p *plan) roll(full bool) bool {
	r := steps.Roll(p.f, steps.RollInput{
		Full: full, Hash: p.hash, Replicas: p.Replicas, Partition: p.partition, Target: p.Target(),
		CertProblems: p.CertProblems, InPlace: p.restartingInPlace(),
	})
	p.partition, p.Rolling, p.rollingTo = r.Partition, r.Rolling, r.RollingTo
	p.rollHeld = p.rollHeld || r.Held
	for _, w := range r.Waits {
		p.Waiting = p.Waiting.Add(w)
	}
	if r.Action != "" {
		p.action = r.Action
	}
	return r.Rolling
}

// podHealthy: the pod at i counts towards quorum by any sign (steps.PodHealthy).
func (p *plan) podHealthy(i int) bool { return steps.PodHealthy(p.f, i) }

// restartedByRoll: the pod of m is one the roll in progress released (steps.RestartedByRoll).
func (p *plan) restartedByRoll(m *facts.Member) bool {
	return steps.RestartedByRoll(p.f, steps.RollPart{Rolling: p.Rolling, Partition: p.partition}, m)
}
