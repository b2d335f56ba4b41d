package sync

import (
	"regexp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// The audit trail (docs/design/16-backup-restore.md §16.5): the hook's log line per change it starts or finishes. The
// hook keeps no memory between requests; the parent's status in the request is what it said last, so
// a change is the difference between those conditions and the ones it answers now.

// Change is one audited change: a step that started or finished, or another condition that turned True
// or False, changed its reason, or was dropped.
type Change struct {
	// Condition is the condition type (Progressing and Defragmenting carry the steps).
	Condition string
	// What: "started" or "finished" for a step; for another condition its new status ("True",
	// "False"; which one is good depends on the condition: Available True is, DatabaseFull True is
	// not), "reason" when only the reason changed, "dropped" when the answer no longer sets it.
	What string
	// Reason and Message are the condition's: which step, which member, why.
	Reason  string
	Message string
}

// stepConditions are the conditions whose True message names the step in flight and its member: a new
// message is a new step (the previous one finished).
var stepConditions = map[string]bool{api.CondProgressing: true, api.CondDefragmenting: true}

// Changes lists what changed from the conditions the parent's status held (before) to the answer's
// (after), in the answer's condition order, then the conditions the answer drops.
func Changes(before, after []metav1.Condition) []Change {
	var out []Change
	find := func(cs []metav1.Condition, typ string) *metav1.Condition {
		i := slices.IndexFunc(cs, func(c metav1.Condition) bool { return c.Type == typ })
		if i < 0 {
			return nil
		}
		return &cs[i]
	}
	on := func(c *metav1.Condition) bool { return c != nil && c.Status == metav1.ConditionTrue }
	for i := range after {
		now := &after[i]
		was := find(before, now.Type)
		if stepConditions[now.Type] {
			same := was != nil && was.Status == now.Status && was.Reason == now.Reason && stepKey(was.Message) == stepKey(now.Message)
			if same {
				continue
			}
			if on(was) {
				out = append(out, Change{now.Type, "finished", was.Reason, was.Message})
			}
			if on(now) {
				out = append(out, Change{now.Type, "started", now.Reason, now.Message})
			}
			continue
		}
		switch {
		case was != nil && was.Status == now.Status && was.Reason == now.Reason:
		case was != nil && was.Status == now.Status:
			out = append(out, Change{now.Type, "reason", now.Reason, now.Message})
		default:
			out = append(out, Change{now.Type, string(now.Status), now.Reason, now.Message})
		}
	}
	for i := range before {
		was := &before[i]
		if find(after, was.Type) != nil {
			continue
		}
		switch {
		case stepConditions[was.Type] && on(was):
			out = append(out, Change{was.Type, "finished", was.Reason, was.Message})
		case !stepConditions[was.Type]:
			out = append(out, Change{was.Type, "dropped", was.Reason, was.Message})
		}
	}
	return out
}

// progressCount is the part of a Defragmenting message that counts members done ("pass T: 1 done, 2 to
// go; ..."): it moves when sizes or alarms are reported anew without any step starting or finishing.
var progressCount = regexp.MustCompile(`\d+ done, \d+ to go`)

// stepKey is what identifies a step in a step condition's message.
func stepKey(msg string) string { return progressCount.ReplaceAllString(msg, "") }
