package membership

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/api"
)

// Leaving: a member the hook asks to leave removes itself, then parks (its pod idles until removed).

// leave checks the quorum rule, moves leadership away, takes this member out of the client Service and
// stops its etcd (drain.go), and only then removes it through the other voters: a member removed while
// it serves fails its clients' requests in flight with "raft: stopped" (a write the e2e suite counted
// lost in each shrink step); stopped first, etcd finishes them and closes its connections, and the
// clients reconnect to the others. A removal that fails after the stop leaves a stopped member that is
// still listed: the run ends in an error and the agent decides again (it starts as the member it still
// is, and the leave is tried again; the hook's remove Job is the fallback past spec.timeouts.leaveSeconds).
func (a *Agent) leave(ctx context.Context, members []api.Member, leader, self uint64, r *api.Report) observation {
	id := api.FormatID(self)
	healthy := a.Etcd.Health(ctx, members)
	if err := QuorumAllows(members, healthy, id); err != nil {
		r.SetError(api.ReasonLeaving, err.Error())
		return stillRunning
	}
	if leader == self {
		// No healthy voter to take over although the quorum rule let the leave through: the leave goes
		// on as it always did, and the others elect a leader once this one is removed.
		switch to, err := a.env.handOver(ctx, members, healthy, id, staysLongest(a.Cfg.Name)); {
		case errors.Is(err, errNoTransferee):
		case err != nil:
			r.SetError(api.ReasonLeaving, "moving leadership away: "+err.Error())
			return stillRunning
		default:
			a.Log.Info("moved leadership away before leaving", "to", to)
		}
	}
	stopped := false
	if a.stopRunning != nil {
		a.proc.drain(a.Log, "leaving the cluster", a.Cfg.DrainWait)
		if othersKeepQuorum(members, healthy, id) {
			a.stopRunning()
			stopped = true
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := a.Etcd.Remove(rctx, voterEndpoints(members, id), self); err != nil {
		r.SetError(api.ReasonLeaving, err.Error())
		if stopped {
			a.rep.report(ctx, *r, true)
			return stoppedToLeave
		}
		return stillRunning
	}
	a.Log.Info("removed itself from the cluster", "member", id)
	a.markLeft(ctx, *r)
	return selfRemoved
}

// othersKeepQuorum: the healthy voters other than id are a quorum of the current membership, so the
// removal commits with this member already stopped. Not so when leaving a cluster of two (or with
// another voter down): stopped first, the removal could not commit, and the cluster would have no
// quorum meanwhile (the e2e suite's scale 3->1 failed 14 writes that way). Then the member is removed
// while it runs, as before the drain: its readiness is off by then, so only connections already open to
// it see its stop.
func othersKeepQuorum(members []api.Member, healthy map[string]*clientv3.StatusResponse, id string) bool {
	voters, others := 0, 0
	for _, m := range members {
		if m.Learner {
			continue
		}
		voters++
		if m.ID != id && healthy[m.ID] != nil {
			others++
		}
	}
	return others >= api.Quorum(voters)
}

func (a *Agent) markLeft(ctx context.Context, r api.Report) {
	a.left = true
	a.env.event(EventMemberLeft, "Leave", false, "member %s removed itself from the cluster (intent leave); parked without etcd", r.MemberID)
	r.Role, r.Healthy, r.Members, r.LeaderID = api.RoleLeft, false, nil, ""
	r.SetError(api.ReasonParked, "removed from the cluster")
	a.rep.report(ctx, r, true)
}

// park keeps the container alive without etcd after leaving, reporting "left", until the pod stops or
// the hook wants this ordinal as a member again (then the agent decides again and rejoins).
func (a *Agent) park(ctx context.Context, f StartFacts, d Decision) {
	a.proc.setState("parked", false)
	r := a.rep.idle(f, d.Reason, d.Detail)
	r.Role = api.RoleLeft
	for {
		a.rep.report(ctx, r, false)
		if !sleep(ctx, a.env.tick()) {
			return
		}
		if in, err := a.Store.Read(ctx); err == nil {
			a.rep.problems = in.Problems
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
