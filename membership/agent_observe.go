package membership

import (
	"context"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// What the agent observes of its running member and reports in its Lease.

// observe looks at the running member once: it reports, promotes a learner, and leaves on intent
// leave. It says whether this member removed itself, or finds itself removed by someone else.
func (a *Agent) observe(ctx context.Context, bound *bool) observation {
	r := api.Report{ClusterUID: a.Cfg.ClusterUID, Role: api.RoleNone}
	st, err := a.Etcd.Status(ctx, a.Cfg.ClientURL)
	if err != nil {
		a.promoteEarly(ctx)
		r = a.rep.kept()
		r.SetError(api.ReasonStarting, "etcd does not answer yet: "+err.Error())
		a.rep.report(ctx, r, false)
		return stillRunning
	}
	if !st.IsLearner {
		a.joining = learnerJoin{}
	}
	a.proc.setState("running", true)
	a.rep.crashLoop = false
	self := st.Header.MemberId
	r.MemberID, r.ClusterID = api.FormatID(self), api.FormatID(st.Header.ClusterId)
	r.Version, r.LeaderID = st.Version, api.FormatID(st.Leader)
	if st.Leader == 0 {
		r.LeaderID = ""
	}
	r.DBSize, r.DBSizeInUse = st.DbSize, st.DbSizeInUse
	r.QuotaBytes = quotaOf(a.Cfg.EtcdCommand)
	leaderless(st, &r)
	if len(st.Errors) > 0 {
		// Status lists alarms among its errors as protobuf text; the alarm list says them plainly. Asked
		// only in trouble: a healthy member's look stays one Status call.
		if alarms, err := a.Etcd.Alarms(ctx, a.Cfg.ClientURL); err == nil {
			r.Alarms = alarms
			a.alarmEvents(alarms, st.Header.MemberId)
		}
	} else {
		a.alarmEvents(nil, st.Header.MemberId)
	}
	if !*bound {
		b := Binding{ClusterUID: a.Cfg.ClusterUID, ClusterID: r.ClusterID, MemberID: r.MemberID, PeerURL: a.peers.url, Restored: a.bound.restored, Recovered: a.bound.recovered}
		a.recovery.forcedUp(&b)
		if err := WriteBinding(a.Cfg.DataDir, b); err == nil {
			*bound = true
			a.bound.recovered = b.Recovered
		}
	}
	in, ierr := a.Store.Read(ctx)
	if ierr == nil && a.recovery.asked(in, r.MemberID, st.Leader) {
		a.Log.Info("stopping etcd for this member's part in a recovery", "recovery", in.Recover.String())
		return stopForRecovery
	}
	if ierr == nil {
		a.defrag.quotaChanged(in.Report.QuotaBytes, r.QuotaBytes)
		a.rep.problems = in.Problems
		a.tls.askRenewal(in.Renewal)
		a.tls.askRotation(in)
		a.peers.ask = in.PeerScheme
		a.auth.hint = in.AuthDeclared
	}
	listed := func(l List) bool {
		for _, m := range l.Members {
			if m.ID == r.MemberID {
				return true
			}
		}
		return false
	}
	if st.IsLearner {
		r.Role, r.Healthy = api.RoleLearner, statusHealthy(len(st.Errors), r.Alarms, st.Leader)
		l, err := a.Etcd.MemberList(ctx, a.Cfg.Endpoints)
		if err == nil && !listed(l) {
			return removedByOthers // e.g. removed as a stuck learner
		}
		if ierr == nil && leaving(in) {
			if err == nil {
				if rerr := a.Etcd.Remove(ctx, voterEndpoints(l.Members, r.MemberID), self); rerr == nil {
					a.markLeft(ctx, r)
					return selfRemoved
				}
			}
			return stillRunning
		}
		if a.promotedID == r.MemberID {
			// Promoted, and etcd here has not applied it yet: promoting again would only say so twice.
			return stillRunning
		}
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			perr := a.Etcd.Promote(pctx, voterEndpoints(l.Members, r.MemberID), self)
			cancel()
			if perr == nil {
				// No learner report now: the next look, at once, reports the voter with its member list.
				a.promoted(r.MemberID)
				a.Log.Info("promotion accepted", "member", r.MemberID)
				a.env.event(EventMemberPromoted, "Promote", false, "learner %s promoted to voter", r.MemberID)
				return stillRunning
			} else {
				r.SetError(api.ReasonPromoting, perr.Error())
			}
		}
		a.defrag.maybe(ctx, in, ierr, st, nil, &r)
		a.rep.report(ctx, r, false)
		return stillRunning
	}
	r.Role = api.RoleVoter
	if st.Leader == self {
		r.Role = api.RoleLeader
	}
	l, err := a.Etcd.MemberList(ctx, []string{a.Cfg.ClientURL})
	if err != nil {
		r.SetError(api.ReasonUnhealthy, err.Error())
	} else {
		if !listed(l) {
			return removedByOthers
		}
		r.Healthy = statusHealthy(len(st.Errors), r.Alarms, st.Leader)
		r.Members = l.Members
		a.peers.known = l.Members
	}
	if ierr == nil && leaving(in) && err == nil {
		if o := a.leave(ctx, l.Members, st.Leader, self, &r); o != stillRunning {
			return o
		}
	} else if err == nil {
		a.defrag.maybe(ctx, in, ierr, st, l.Members, &r)
	}
	// Every agent reads the declaration: a follower takes the root identity at its next certificate look,
	// before the leader's agent enables auth (everyMemberUsesRoot).
	if a.auth.read(ctx) {
		a.tls.recheck()
	}
	if r.Role == api.RoleLeader && r.Healthy {
		if a.auth.reconcile(ctx, &r) {
			a.tls.recheck()
		}
	} else {
		a.auth.stop()
	}
	a.rep.report(ctx, r, false)
	return stillRunning
}

// alarmEvents posts AlarmRaised when this member raises an alarm and AlarmDisarmed when its alarm is
// gone: each member speaks for its own alarms only, so a cluster-wide list is not posted once per pod.
func (a *Agent) alarmEvents(alarms []string, self uint64) {
	own := map[string]bool{}
	for _, al := range alarms {
		if typ, id, _ := strings.Cut(al, "@"); id == api.FormatID(self) {
			own[typ] = true
		}
	}
	for typ := range own {
		if !a.ownAlarms[typ] {
			what := map[string]string{
				api.AlarmNoSpace: "its database reached the quota: writes are refused until the alarm is disarmed (the hook starts the recovery)",
				api.AlarmCorrupt: "its data differs from the other members': writes are refused",
			}[typ]
			a.env.event(EventAlarmRaised, "Alarm", true, "member %s raised %s: %s", api.FormatID(self), typ, what)
		}
	}
	for typ := range a.ownAlarms {
		if !own[typ] {
			a.env.event(EventAlarmDisarmed, "Alarm", false, "member %s's %s alarm is disarmed", api.FormatID(self), typ)
		}
	}
	a.ownAlarms = own
}

// certLook is how often a member's certificates are looked at: the files are renewed at 2/3 of a
// lifetime of at least an hour, and each look reads the cluster's two Secrets.
const certLook = time.Minute

// localTime converts an instant on the API server's clock to this machine's.
func (a *Agent) localTime(server time.Time) time.Time {
	if server.IsZero() {
		return server
	}
	return time.Now().Add(server.Sub(a.Store.Now()))
}
