package sync

import (
	"fmt"
	"slices"
	"strings"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// databaseConditions say how full the members' databases are (docs/design/15-maintenance.md §15.3):
// DatabaseNearQuota when a member's file reaches api.DatabaseNearQuotaPercent of the backend quota,
// DatabaseFull when etcd raised NOSPACE, DataCorrupt when it raised CORRUPT. Sizes are the members'
// reports (api.SizeMoved steps); alarms are the cluster's, as any fresh report reads them.
func (p *plan) databaseConditions(add func(typ string, ok bool, reason, msg string)) {
	f := p.f
	options := map[string]string(nil)
	if p.HasSpec {
		options = p.Spec.Options
	}
	if quota, ok := api.QuotaBackendBytes(options); ok && quota > 0 {
		var near []string
		for _, m := range f.Truth.Members {
			if m.DBSize*100 >= quota*api.DatabaseNearQuotaPercent {
				near = append(near, fmt.Sprintf("%s %s (%d%%, %s in use)", facts.MemberName(f, m), humanBytes(m.DBSize),
					m.DBSize*100/quota, humanBytes(m.DBSizeInUse)))
			}
		}
		if len(near) > 0 {
			add(api.CondDatabaseNearQuota, true, "NearQuota", fmt.Sprintf("of a %s quota: %s; at the quota etcd refuses writes (NOSPACE): defragment (spec.maintenance.defrag, or the annotation etcd.io/defrag-now; operations.md §5.12) or raise spec.options quota-backend-bytes (spec.maintenance.space.maxQuota lets the hook raise it, docs/spec.md)",
				humanBytes(quota), strings.Join(near, ", ")))
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

// humanBytes renders a size with a binary unit, one decimal.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
