package sync

import (
	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// pause renders what is observed and starts nothing (docs/design/06-sync-order.md §6.4): replicas, partition, Lease
// intents and Jobs as carried over (carry, keepJobs), the recorded spec. Steps already in flight finish on
// their own (a permitted join, a running remove Job); no permit, Job, roll step or scale step is added.
func (p *plan) pause() {
	f := p.f
	// A template that differs from the StatefulSet's (a new hook release, or a spec change pending from
	// before the pause) must not reach a single pod: the partition holds every one.
	if f.StatefulSet != nil && f.StatefulSet.Annotations[api.AnnTemplateHash] != p.hash {
		p.partition = p.Replicas
	}
	p.wait(steps.Pause, "", "spec.paused to be false: no membership change, roll or spec change is started while paused")
	p.pauseWaited = true
}
