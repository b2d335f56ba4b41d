package sync

import "github.com/etcdhook/etcdhook/sync/steps"

// restartingInPlace says which member's etcd restarts in place now, as a wait (steps.RestartingInPlace).
func (p *plan) restartingInPlace() string { return steps.RestartingInPlace(p.f) }
