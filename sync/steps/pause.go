package steps

import (
	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// PauseInput is what Paused reads of the decisions before it: the template hash rendered, the replicas
// and partition carried over (carry).
type PauseInput struct {
	Hash      string
	Replicas  int32
	Partition int32
}

// PauseDecision is the pause's part of the decision: the partition rendered and the pause's own wait
// (which ends by a spec change, so nothing is looked at again for it: the resync stays idle).
type PauseDecision struct {
	Partition int32
	Wait      Wait
}

// Paused renders what is observed and starts nothing (docs/design/06-sync-order.md §6.4): replicas,
// partition, Lease intents and Jobs as carried over (carry, keepJobs), the recorded spec. Steps already
// in flight finish on their own (a permitted join, a running remove Job); no permit, Job, roll step or
// scale step is added.
func Paused(f *facts.Facts, in PauseInput) PauseDecision {
	d := PauseDecision{Partition: in.Partition}
	// A template that differs from the StatefulSet's (a new hook release, or a spec change pending from
	// before the pause) must not reach a single pod: the partition holds every one.
	if f.StatefulSet != nil && f.StatefulSet.Annotations[api.AnnTemplateHash] != in.Hash {
		d.Partition = in.Replicas
	}
	d.Wait = Wait{Kind: Pause, Detail: "spec.paused to be false: no membership change, roll or spec change is started while paused"}
	return d
}
