package steps

import (
	"fmt"
	"maps"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// The Jobs already observed: which are carried into the answer, which are released once their outcome
// is read.

// Timing of Jobs.
const (
	// SucceededJobGrace: a Job that succeeded this recently may not show its work in the cache yet.
	SucceededJobGrace = 2 * time.Minute
	retryBackoffBase  = 30 * time.Second
	retryBackoffMax   = 10 * time.Minute
	// MaxAttempts: a series of Jobs gives up after so many.
	MaxAttempts = 99
)

// Backoff is the wait after a failed attempt before the next.
func Backoff(attempt int) time.Duration {
	d := retryBackoffBase
	for i := 1; i < attempt && d < retryBackoffMax; i++ {
		d *= 2
	}
	if d > retryBackoffMax {
		d = retryBackoffMax
	}
	return d
}

// NextAttempt numbers the next Job of a series, or says why none starts now: one is running, the last
// succeeded moments ago (the cache may not show its work yet), the last failed and its backoff has not
// passed, or the attempts are used up.
func NextAttempt(f *facts.Facts, js []*facts.Job) (int, string) {
	if len(js) == 0 {
		return 1, ""
	}
	last := js[len(js)-1]
	switch {
	case last.State == facts.JobActive:
		return 0, fmt.Sprintf("Job %s running", last.Job.Name)
	case last.State == facts.JobSucceeded && f.Now.Sub(last.Finished) < SucceededJobGrace:
		return 0, fmt.Sprintf("Job %s succeeded; waiting for its result to show", last.Job.Name)
	case last.State == facts.JobFailed && last.Refused:
		return 0, fmt.Sprintf("Job %s was refused for a cause another attempt would meet again (kubectl logs job/%s): not retried; delete the Job to try again once the cause is fixed", last.Job.Name, last.Job.Name)
	case last.State == facts.JobFailed && f.Now.Before(last.Finished.Add(Backoff(last.Attempt))):
		return 0, fmt.Sprintf("Job %s failed (see its log); retrying after %s", last.Job.Name, last.Finished.Add(Backoff(last.Attempt)).UTC().Format(time.RFC3339))
	case last.Attempt >= MaxAttempts:
		return 0, fmt.Sprintf("no success in %d attempts: see Job %s", MaxAttempts, last.Job.Name)
	}
	return last.Attempt + 1, ""
}

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
