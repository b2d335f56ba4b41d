package steps

import (
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// The Jobs already observed: which are carried into the answer, which are released once their outcome
// is read.

// Release is an observed child the decision deletes on purpose, and why (the answer's deletions).
type Release struct{ Key, Name, Reason string }

// JobsInput is what KeepJobs reads of the decisions before it: the spec rendered (with the space
// overlay's storage), whose size says whether a growth Job's work is done.
type JobsInput struct {
	Spec api.ClusterSpec
}

// JobsDecision is the observed Jobs' part of the decision.
type JobsDecision struct {
	// Carried: the observed Jobs the answer keeps, in order (remove, volume deletion, claim growth,
	// claim template).
	Carried []*batchv1.Job
	// Released: the finished Jobs the answer deletes.
	Released []Release
}

// KeepJobs carries observed Jobs over: active ones, the latest failed attempt while its reason may
// still hold (its number and time drive the backoff of the next attempt), and the one before it while a
// retry runs, and succeeded ones until their effect shows. Finished Jobs whose effect is observed are
// released. Only with one cluster and a known member list can a finished Job be judged done; otherwise
// every observed Job is kept.
func KeepJobs(f *facts.Facts, in JobsInput) JobsDecision {
	var d JobsDecision
	judge := f.Bootstrapped && !f.SplitBrain && f.Truth.Known()
	carry := func(js []*facts.Job, keep func(jv, last *facts.Job) bool, reason string) {
		last := js[len(js)-1]
		for _, jv := range js {
			if keep(jv, last) || !judge {
				d.Carried = append(d.Carried, jv.Job)
			} else {
				d.Released = append(d.Released, Release{Key: wire.KeyJob, Name: jv.Job.Name, Reason: reason})
			}
		}
	}
	retrying := func(jv, last *facts.Job) bool { return last.State == facts.JobActive && jv.Attempt == last.Attempt-1 }
	// pending: the Job's work is not done: the last attempt stays, and the one before it while a retry runs.
	whilePending := func(pending bool) func(jv, last *facts.Job) bool {
		return func(jv, last *facts.Job) bool {
			return jv.State == facts.JobActive || (pending && (jv == last || retrying(jv, last)))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(f.RemoveJobs)) {
		m := f.Truth.Member(id)
		carry(f.RemoveJobs[id], func(jv, last *facts.Job) bool {
			switch jv.State {
			case facts.JobActive:
				return true
			case facts.JobSucceeded:
				return m != nil && jv == last
			case facts.JobFailed:
				return m != nil && (jv == last || retrying(jv, last))
			}
			return false
		}, "finished remove Job whose outcome is observed")
	}
	for _, i := range slices.Sorted(maps.Keys(f.DeleteVolumeJobs)) {
		pvc := f.PVCs[i]
		gone := pvc == nil || pvc.DeletionTimestamp != nil
		carry(f.DeleteVolumeJobs[i], whilePending(!gone), "finished volume Job whose outcome is observed")
	}
	size, sized := StorageSize(in.Spec)
	for _, i := range slices.Sorted(maps.Keys(f.GrowJobs)) {
		carry(f.GrowJobs[i], whilePending(sized && ClaimBelow(f, i, size)), "finished claim-growing Job whose claim has the size")
	}
	if len(f.TemplateJobs) > 0 {
		carry(f.TemplateJobs, whilePending(sized && TemplateBelow(f, size)), "finished Job whose StatefulSet is gone or has the claim template")
	}
	return d
}
