package render

import (
	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// memberStatus lists the truth's members; without a member list the last known members are kept, unhealthy.
func memberStatus(f *facts.Facts, d *steps.Decision) []api.MemberStatus {
	if !f.Truth.Known() {
		var out []api.MemberStatus
		for _, m := range f.Parent.Status.Members {
			m.Healthy = false
			out = append(out, m)
		}
		return out
	}
	out := []api.MemberStatus{}
	for _, m := range f.Truth.Members {
		ms := api.MemberStatus{ID: m.ID, PeerURL: m.PeerURL, ClientURL: m.ClientURL, Healthy: m.Healthy, Version: m.Version, Role: api.RoleVoter,
			DBSize: m.DBSize, DBSizeInUse: m.DBSizeInUse, LastDefragTime: m.LastDefrag}
		switch {
		case m.Learner:
			ms.Role = api.RoleLearner
		case m.ID == f.Truth.LeaderID:
			ms.Role = api.RoleLeader
		}
		ms.Name = facts.MemberName(f, m)
		if m.Ordinal >= 0 && ms.ClientURL == "" {
			ms.ClientURL = d.Names.ClientURL(m.Ordinal)
		}
		out = append(out, ms)
	}
	return out
}
