package membership

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// reporter writes this member's report on its Lease (api.Report: the agent-owned half) when it changed,
// or when a renewal is due, and keeps the last one written: the member's identity, role and member list
// as the other phases read them.
type reporter struct {
	*env
	// facts adds what the other phases know to each report (Agent.facts): the certificates, the
	// recovery carried out, the snapshot restored, the root identity. spaceLine is the line of the last
	// space pass asked (keepSizes).
	facts     func(*api.Report)
	spaceLine func() int32

	last  api.Report
	wrote time.Time
	// crashLoop: etcd keeps failing; the Lease is no longer renewed (only changes are written).
	crashLoop bool
	// problems: what the last Lease read held that the agent could not use as written; reported.
	problems []string
}

// report writes the Lease when the report changed, or when a renewal is due (api.RenewInterval).
func (rp *reporter) report(ctx context.Context, r api.Report, force bool) {
	if r.ClusterUID == "" {
		r.ClusterUID = rp.cfg.ClusterUID
	}
	rp.facts(&r)
	if e := withProblems(r.Error, rp.problems); e != r.Error {
		if r.Error == "" {
			r.ErrorReason = api.ReasonLeaseProblem
		}
		r.Error = e
	}
	// Sizes are written when they move by a significant step (api.SizeMoved): until then the report
	// keeps the values last written, so a member under load does not rewrite its Lease at every look.
	// A file crossing the quota line (api.OverQuota) is written whatever the step: the NOSPACE recovery
	// judges a member done by that line, on the hook's side from this report, on the agent's from etcd,
	// and the two must agree or the hook keeps asking a member that has nothing left to do.
	if keepSizes(rp.last, r, quotaOf(rp.cfg.EtcdCommand), rp.spaceLine()) {
		r.DBSize, r.DBSizeInUse = rp.last.DBSize, rp.last.DBSizeInUse
	}
	renew := api.RenewInterval(r, rp.cfg.LeaseDuration)
	same := reportKey(r) == reportKey(rp.last)
	if same && !force && (time.Since(rp.wrote) < renew || rp.crashLoop) {
		return
	}
	if err := rp.store.Write(ctx, r); err != nil {
		rp.log.Warn("writing the member Lease", "error", err)
		return
	}
	if !same {
		rp.log.Info("reported", "role", r.Role, "healthy", r.Healthy, "member", r.MemberID, "error", r.Error)
	}
	rp.last, rp.wrote = r, time.Now()
}

// kept is the last report without what only a running member can say: its identity stays, so
// that a transient error never erases the member and cluster IDs from the Lease.
func (rp *reporter) kept() api.Report {
	r := rp.last
	r.Role, r.Healthy, r.Members, r.LeaderID = api.RoleNone, false, nil, ""
	return r
}

// settled says whether the last report is of a healthy voter (the agent then looks at the normal tick).
func (rp *reporter) settled() bool {
	return rp.last.IsVoter() && rp.last.Healthy
}

// idle is the report of a member that does not run etcd, for the start decision's reason.
func (rp *reporter) idle(f StartFacts, reason, detail string) api.Report {
	r := api.Report{ClusterUID: rp.cfg.ClusterUID, Role: api.RoleNone, Members: nil}
	r.SetError(reason, detail)
	if f.ClusterID != 0 {
		r.ClusterID = api.FormatID(f.ClusterID)
	}
	if f.Data.Present && f.Data.MemberID != 0 {
		r.MemberID = api.FormatID(f.Data.MemberID)
	}
	return r
}

// everyMember says whether every member of the last member list this agent read has a fresh Lease whose
// report satisfies ok (Certs.Confirm). Unknown (no list, a Lease unreadable): false.
func (rp *reporter) everyMember(ctx context.Context, ok func(api.Report) bool) bool {
	members := rp.last.Members
	if len(members) == 0 {
		return false
	}
	reports, err := rp.store.Peers(ctx)
	if err != nil {
		return false
	}
	byID := map[string]api.Report{}
	for _, r := range reports {
		byID[r.MemberID] = r
	}
	for _, m := range members {
		if r, found := byID[m.ID]; !found || !ok(r) {
			return false
		}
	}
	return true
}

// reportKey is the report as compared for a change: the auth report by value (a pointer printed by
// fmt would differ at every look, and every write wakes the hook).
func reportKey(r api.Report) string {
	auth := r.Auth.String()
	r.Auth = nil
	return fmt.Sprint(r) + auth
}

// withProblems adds the Lease problems to a report's error text. The leading reason word stays the
// decision's (the hook acts on reasons such as WaitingForJoin); a report without one gets LeaseProblem.
func withProblems(errText string, problems []string) string {
	if len(problems) == 0 {
		return errText
	}
	p := strings.Join(problems, "; ")
	if strings.Contains(errText, p) {
		return errText
	}
	if errText == "" {
		return api.ReasonLeaseProblem + ": " + p
	}
	return errText + " (" + p + ")"
}

// keepSizes says whether a report keeps the sizes last written rather than now's: neither moved by a
// significant step (api.SizeMoved), the file is on the same side of the quota line (api.OverQuota), and
// the space pass at pct would judge both alike (api.SpaceWantsDefrag): the hook and the agent judge
// those two passes by the member's state, the one from the report and the other from etcd.
func keepSizes(last, now api.Report, quota int64, pct int32) bool {
	return !api.SizeMoved(last.DBSize, now.DBSize) && !api.SizeMoved(last.DBSizeInUse, now.DBSizeInUse) &&
		api.OverQuota(last.DBSize, quota) == api.OverQuota(now.DBSize, quota) &&
		api.SpaceWantsDefrag(last.DBSize, last.DBSizeInUse, quota, pct) == api.SpaceWantsDefrag(now.DBSize, now.DBSizeInUse, quota, pct)
}
