package render

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// storageStatus is status.storage: the member claims against the size in force.
func storageStatus(f *facts.Facts, d *steps.Decision) *api.StorageStatus {
	size, ok := steps.StorageSize(d.Spec)
	if !ok {
		return nil
	}
	st := &api.StorageStatus{Size: size.String()}
	st.AtSize, st.Claims = steps.ClaimsAtSize(f, d.Replicas, size)
	for _, i := range slices.Sorted(maps.Keys(f.GrowJobs)) {
		js := f.GrowJobs[i]
		if js[len(js)-1].State == facts.JobActive {
			st.Growing = f.Names.PVC(i)
		}
	}
	if d.Growing != "" {
		st.Growing = d.Growing
	}
	if f.StatefulSet != nil {
		if q, ok := api.TemplateSize(f.StatefulSet.Spec.VolumeClaimTemplates); ok {
			st.TemplateSize = q.String()
		}
	} else {
		st.TemplateSize = size.String() // rendered by this answer
	}
	return st
}

// spaceStatus is status.space: nil while nothing was raised and nothing is asked.
func spaceStatus(d *steps.Decision) *api.SpaceStatus {
	st := d.Space
	if !st.On {
		return nil
	}
	msg := st.Message
	if st.Quota == st.SpecQuota && st.Storage == nil && msg == "" {
		return nil
	}
	out := &api.SpaceStatus{QuotaBytes: st.Quota, SpecQuotaBytes: st.SpecQuota, Message: msg}
	if st.Storage != nil {
		out.Storage = st.Storage.String()
	}
	return out
}

// databaseConditions say how full the members' databases are (docs/design/15-maintenance.md §15.3):
// DatabaseNearQuota when a member's file reaches api.DatabaseNearQuotaPercent of the backend quota,
// DatabaseFull when etcd raised NOSPACE, DataCorrupt when it raised CORRUPT. Sizes are the members'
// reports (api.SizeMoved steps); alarms are the cluster's, as any fresh report reads them.
func databaseConditions(f *facts.Facts, d *steps.Decision, add func(typ string, ok bool, reason, msg string)) {
	options := map[string]string(nil)
	if d.HasSpec {
		options = d.Spec.Options
	}
	if quota, ok := api.QuotaBackendBytes(options); ok && quota > 0 {
		var near []string
		for _, m := range f.Truth.Members {
			if m.DBSize*100 >= quota*api.DatabaseNearQuotaPercent {
				near = append(near, fmt.Sprintf("%s %s (%d%%, %s in use)", facts.MemberName(f, m), steps.HumanBytes(m.DBSize),
					m.DBSize*100/quota, steps.HumanBytes(m.DBSizeInUse)))
			}
		}
		if len(near) > 0 {
			add(api.CondDatabaseNearQuota, true, "NearQuota", fmt.Sprintf("of a %s quota: %s; at the quota etcd refuses writes (NOSPACE): defragment (spec.maintenance.defrag, or the annotation etcd.io/defrag-now; operations.md §5.12) or raise spec.options quota-backend-bytes (spec.maintenance.space.maxQuota lets the hook raise it, docs/spec.md)",
				steps.HumanBytes(quota), strings.Join(near, ", ")))
		}
	}
	byType := map[string][]string{}
	for typ, ids := range f.Alarms {
		for _, id := range ids {
			name := id
			if m := f.Truth.Member(id); m != nil {
				name = facts.MemberName(f, m)
			}
			byType[typ] = append(byType[typ], name)
		}
	}
	if on := byType[api.AlarmNoSpace]; len(on) > 0 {
		slices.Sort(on)
		add(api.CondDatabaseFull, true, "NoSpaceAlarm", "etcd raised NOSPACE (raised by "+strings.Join(on, ", ")+"): it serves reads and deletes only until the alarms are disarmed; the history is compacted, every member whose file is at the quota defragmented, then each alarm disarmed, one member at a time (Defragmenting says how far; operations.md §5.12)")
	}
	if on := byType[api.AlarmCorrupt]; len(on) > 0 {
		slices.Sort(on)
		add(api.CondDataCorrupt, true, "CorruptAlarm", "etcd raised CORRUPT (members "+strings.Join(on, ", ")+" disagree with the others): writes are refused; see operations.md §5.12")
	}
}

// defragCondition says what the pass due is doing.
func defragCondition(f *facts.Facts, d *steps.Decision, st steps.DefragState, add func(typ string, ok bool, reason, msg string)) {
	if st.Token == "" || (st.Target < 0 && st.Held == "") {
		return
	}
	if st.Next != "" {
		add(api.CondDefragmenting, true, "MemberDefragmenting", fmt.Sprintf("%s finishes pass %s first (one member at a time); pass %s follows", f.Names.Pod(st.Target), st.Token, st.Next))
		return
	}
	progress := fmt.Sprintf("pass %s: %d done, %d to go", st.Token, st.Done, st.Todo)
	if st.Target >= 0 {
		add(api.CondDefragmenting, true, "MemberDefragmenting", fmt.Sprintf("%s; %s defragments (one member at a time, the leader last)", progress, f.Names.Pod(st.Target)))
		return
	}
	add(api.CondDefragmenting, false, "Held", fmt.Sprintf("%s; waits for %s", progress, st.Held))
}
