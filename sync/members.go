package sync

import (
	"github.com/etcdhook/etcdhook/sync/steps"
)

// member runs one membership step (a steps.Members method: joins, removals, scaling) on the plan so
// far and takes back what it decided.
func (p *plan) member(step func(*steps.Members) bool) bool {
	m := steps.NewMembers(p.f, steps.MembersInput{
		Names: p.Names, Spec: p.Spec, Replicas: p.Replicas, Busy: p.Busy, Removing: p.removing, Leases: p.leases,
		RestartingInPlace: p.restartingInPlace(),
	})
	acted := step(m)
	p.leases, p.Replicas, p.Busy, p.removing = m.Leases, m.Replicas, m.Busy, m.Removing
	if m.Action != "" {
		p.action = m.Action
	}
	if m.Stalled != "" {
		p.Stalled = m.Stalled
	}
	p.jobs = append(p.jobs, m.Jobs...)
	p.await(m.Waiting...)
	return acted
}
