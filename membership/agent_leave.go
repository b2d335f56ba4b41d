package membership

import (
	"context"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// Leaving: a member the hook asks to leave removes itself, then parks (its pod idles until removed).

// leave moves leadership away, checks the quorum rule and removes this member.
func (a *Agent) leave(ctx context.Context, members []api.Member, leader, self uint64, r *api.Report) bool {
	id := api.FormatID(self)
	healthy := a.Etcd.Health(ctx, members)
	if err := QuorumAllows(members, healthy, id); err != nil {
		r.SetError(api.ReasonLeaving, err.Error())
		return false
	}
	if leader == self {
		for _, m := range members {
			if m.ID != id && !m.Learner && healthy[m.ID] != nil {
				to, _ := api.ParseID(m.ID)
				if err := a.Etcd.MoveLeader(ctx, a.Cfg.ClientURL, to); err != nil {
					r.SetError(api.ReasonLeaving, "moving leadership away: "+err.Error())
					return false
				}
				a.Log.Info("moved leadership away before leaving", "to", m.ID)
				break
			}
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := a.Etcd.Remove(rctx, voterEndpoints(members, id), self); err != nil {
		r.SetError(api.ReasonLeaving, err.Error())
		return false
	}
	a.Log.Info("removed itself from the cluster", "member", id)
	a.markLeft(ctx, *r)
	return true
}

func (a *Agent) markLeft(ctx context.Context, r api.Report) {
	a.left = true
	a.event(EventMemberLeft, "Leave", false, "member %s removed itself from the cluster (intent leave); parked without etcd", r.MemberID)
	r.Role, r.Healthy, r.Members, r.LeaderID = api.RoleLeft, false, nil, ""
	r.SetError(api.ReasonParked, "removed from the cluster")
	a.report(ctx, r, true)
}

// park keeps the container alive without etcd after leaving, reporting "left", until the pod stops or
// the hook wants this ordinal as a member again (then the agent decides again and rejoins).
func (a *Agent) park(ctx context.Context, f StartFacts, d Decision) {
	a.setState("parked", false)
	r := a.idleReport(f, d.Reason, d.Detail)
	r.Role = api.RoleLeft
	for {
		a.report(ctx, r, false)
		if !a.sleep(ctx, a.tick()) {
			return
		}
		if in, err := a.Store.Read(ctx); err == nil {
			a.leaseProblems = in.Problems
			if intent, _ := StartIntent(in.Intent); intent == api.IntentMember {
				a.Log.Info("intent is no longer leave: deciding again", "intent", in.Intent)
				return
			}
		}
	}
}

// leaving says whether the hook wants this member to leave (only the exact intent: anything unknown
// keeps the member, see StartIntent).
func leaving(in Intent) bool {
	intent, _ := StartIntent(in.Intent)
	return intent == api.IntentLeave
}
