package facts

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// Bounds on the lists of the parent's status the hook reads back: each is the hook's own output, at
// most one entry per member (or per condition type the hook sets), but anyone who may write status can
// put anything there.
const (
	maxStatusMembers    = api.MaxReportedMembers
	maxStatusConditions = 64
	maxStatusIDs        = api.MaxReportedMembers
)

// boundObserved applies every value bound (api/bounds.go) to what the request carries inside strings
// and lists, before anything reads it: the etcd.io/ annotations of the parent and of every child, the
// keys of the hook's ConfigMap, and the lists in the parent's status. A value beyond its bound is
// removed, as if absent, and named in the returned notes (InputIgnored). It runs once per sync and is
// linear in the size of what it looks at.
func boundObserved(o *wire.Observed, configMap string) []string {
	var notes []string
	note := func(what string, err error) {
		notes = append(notes, fmt.Sprintf("%s is ignored: %v", what, err))
	}
	annotations := func(kind, name string, ann map[string]string) {
		// Only the keys beyond their bound are sorted (for the notes' order): sorting every key of every
		// object cost a 9-member sync 3 % of its CPU.
		var over []string
		for k, v := range ann {
			if strings.HasPrefix(k, "etcd.io/") && api.AnnotationBound(k).Check(v) != nil {
				over = append(over, k)
			}
		}
		slices.Sort(over)
		for _, k := range over {
			note(fmt.Sprintf("%s %s annotation %s", kind, name, k), api.AnnotationBound(k).Check(ann[k]))
			delete(ann, k)
		}
	}
	annotations("EtcdCluster", o.Parent.Name, o.Parent.Annotations)
	for name, l := range o.Leases {
		annotations("Lease", name, l.Annotations)
	}
	for name, s := range o.StatefulSets {
		annotations("StatefulSet", name, s.Annotations)
	}
	for name, j := range o.Jobs {
		annotations("Job", name, j.Annotations)
	}
	if cm := o.ConfigMaps[configMap]; cm != nil {
		for _, k := range sortedStringKeys(cm.Data) {
			if err := api.ConfigBound(k).Check(cm.Data[k]); err != nil {
				note(fmt.Sprintf("ConfigMap %s key %s", configMap, k), err)
				delete(cm.Data, k)
			}
		}
	}
	st := &o.Parent.Status
	boundList(note, "status.members", &st.Members, maxStatusMembers)
	boundList(note, "status.conditions", &st.Conditions, maxStatusConditions)
	if r := st.Restore; r != nil {
		boundList(note, "status.restore.replacedClusterIDs", &r.ReplacedClusterIDs, maxStatusIDs)
		boundList(note, "status.restore.lostMembers", &r.LostMembers, maxStatusIDs)
	}
	return notes
}

// boundList drops a status list longer than max, and notes it.
func boundList[T any](note func(string, error), field string, list *[]T, max int) {
	if n := len(*list); n > max {
		note(field, fmt.Errorf("%d entries, over the bound of %d", n, max))
		*list = nil
	}
}

func sortedStringKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
