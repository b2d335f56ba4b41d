package steps

import (
	"fmt"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// CarryDecision is where a sync starts: the replicas, partition and Lease intents observed, normalised.
type CarryDecision struct {
	Replicas, Partition int32
	Leases              Leases
	// Distrusted: what was not carried over, for InputIgnored (added to Decision.Distrusted).
	Distrusted []string
}

// Carry starts from what was observed: replicas, partition, the hook's Lease intents (normalizeIntents).
func Carry(f *facts.Facts) CarryDecision {
	d := CarryDecision{Replicas: 1, Leases: Leases{}}
	if f.StatefulSet != nil && f.StatefulSet.Spec.Replicas != nil {
		d.Replicas = *f.StatefulSet.Spec.Replicas
	}
	if d.Replicas > api.MaxSize || d.Replicas < 0 {
		// The hook never renders more than MaxSize: a larger count is a hand edit (kubectl scale), never
		// a number to render from.
		d.Distrusted = append(d.Distrusted, fmt.Sprintf("StatefulSet %s has replicas %d, outside 0..%d: not taken as a floor", f.Names.StatefulSet(), d.Replicas, api.MaxSize))
		d.Replicas = api.MaxSize
	}
	if f.StatefulSet != nil && f.StatefulSet.Spec.UpdateStrategy.RollingUpdate != nil && f.StatefulSet.Spec.UpdateStrategy.RollingUpdate.Partition != nil {
		d.Partition = *f.StatefulSet.Spec.UpdateStrategy.RollingUpdate.Partition
	}
	if d.Partition < 0 || d.Partition > api.MaxSize {
		d.Partition = api.MaxSize
	}
	for i, lv := range f.Leases {
		lp := d.Leases.Lease(i)
		lp.Kind, lp.Since, lp.Join = lv.Intent, lv.IntentSince, lv.Join
	}
	// Intents are judged against the spec in force when they were written (the applied one): a
	// hand-edited intent must not even make a step look in flight.
	ref := api.Defaulted(api.WithAppliedDefaults(f.Parent.Spec, f.Applied))
	if f.Applied != nil {
		ref = *f.Applied
	}
	normalizeIntents(f, d.Leases, ref, func(format string, args ...any) {
		d.Distrusted = append(d.Distrusted, fmt.Sprintf(format, args...))
	})
	return d
}

// normalizeIntents re-derives the hook-owned half of every Lease from what the hook itself would have
// written: it never passes through a value it did not decide (a hand edit, a typo, a second writer).
//   - an intent other than member or leave is dropped (TrimLeases sets it again);
//   - leave is only ever asked of ordinals at or above the target, one member at a time (the highest);
//   - intent-since must parse and not be in the future;
//   - a join permission must parse, start no later than now and end no later than one promotion timeout
//     after it starts; at most one ordinal holds one: the learner's if a join is under way, else the
//     lowest (etcd admits one learner at a time, so a second permission could only race the first).
func normalizeIntents(f *facts.Facts, ls Leases, ref api.ClusterSpec, note func(format string, args ...any)) {
	target := 0
	if ref.Size != nil {
		target = int(*ref.Size)
	}
	maxWindow := api.MaxLearnerPromotionSeconds * time.Second
	if t := ref.Timeouts.LearnerPromotionSeconds; t != nil && *t > 0 && *t <= api.MaxLearnerPromotionSeconds {
		maxWindow = time.Duration(*t) * time.Second
	}
	leaving := -1
	for _, i := range ls.Ordinals() {
		lp := ls[i]
		switch lp.Kind {
		case "", api.IntentMember:
		case api.IntentLeave:
			if i < target && f.Truth.Primary[i] != nil {
				note("%s carried intent leave below the target size: set back to member", f.Names.Lease(i))
				ls.SetIntent(i, api.IntentMember, f.Now)
			} else if f.Truth.Primary[i] != nil {
				leaving = i // the highest wins: sortedKeys is ascending
			}
		default:
			note("%s carried an unknown intent %q: re-derived", f.Names.Lease(i), lp.Kind)
			lp.Kind, lp.Since = "", ""
		}
		if lp.Since != "" {
			if t, err := time.Parse(time.RFC3339, lp.Since); err != nil || t.After(f.Now.Add(facts.MaxClockSkew)) {
				note("%s carried intent-since %q, not a past time: reset", f.Names.Lease(i), lp.Since)
				lp.Since = f.Now.UTC().Format(time.RFC3339)
			}
		}
		if w := lp.Join; !w.IsZero() {
			if w.From.After(f.Now.Add(facts.MaxClockSkew)) || w.Until.Sub(w.From) > maxWindow {
				permitted, deadline := w.Annotations()
				note("%s carried a join permission %q..%q the hook never writes: dropped", f.Names.Lease(i), permitted, deadline)
				lp.Join = api.JoinWindow{}
			} else if f.Truth.Known() && i >= target && f.Truth.Primary[i] == nil {
				note("%s carried a join permission above the target size: dropped", f.Names.Lease(i))
				lp.Join = api.JoinWindow{}
			}
		}
	}
	for _, i := range ls.Ordinals() {
		if lp := ls[i]; lp.Kind == api.IntentLeave && f.Truth.Primary[i] != nil && i != leaving {
			note("%s carried a second leave intent: only one member leaves at a time", f.Names.Lease(i))
			ls.SetIntent(i, api.IntentMember, f.Now)
		}
	}
	keep := -1
	if m := f.Truth.Learner(); m != nil && m.Ordinal >= 0 && ls[m.Ordinal] != nil && !ls[m.Ordinal].Join.IsZero() {
		keep = m.Ordinal
	}
	for _, i := range ls.Ordinals() {
		lp := ls[i]
		if lp.Join.IsZero() {
			continue
		}
		if keep < 0 {
			keep = i
		}
		if i != keep {
			note("%s carried a second join permission: only one member joins at a time", f.Names.Lease(i))
			lp.Join = api.JoinWindow{}
		}
	}
}
