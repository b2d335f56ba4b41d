package render

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// restoreStatus is status.restore of a cluster created from a snapshot: the seed's Lease report says
// whether and what it restored, or why it cannot.
func restoreStatus(f *facts.Facts, d *steps.Decision, add func(string, bool, string, string)) *api.RestoreStatus {
	if !d.HasSpec || d.Spec.Restore == nil {
		return nil
	}
	rs := &api.RestoreStatus{Source: d.Spec.Restore.From, Phase: "Restoring", ToTime: d.Spec.Restore.ToTime.DeepCopy()}
	if r := d.Spec.Restore.ToRevision; r != nil {
		rs.ToRevision = *r
	}
	if f.Bootstrapped {
		rs.Phase = "Restored"
	}
	for _, lv := range f.SortedLeases() {
		r := lv.Report
		if r.RestoredFrom != "" {
			rs.Snapshot = r.RestoredFrom
			rs.Revision, _ = strconv.ParseInt(r.RestoredRevision, 10, 64)
			rs.Phase = "Restored"
		}
		if f.Bootstrapped {
			continue
		}
		switch reason := r.Reason(); reason {
		case api.ReasonRestoreFailed, api.ReasonRestoreRefused:
			msg := strings.TrimSpace(strings.TrimPrefix(r.Error, reason+":"))
			rs.Message = msg
			cond := api.ReasonRestoreRetrying // a cause that may pass: the seed retries, for an hour at most
			if reason == api.ReasonRestoreRefused {
				cond, rs.Phase = api.ReasonRestoreRefused, "Failed"
			}
			add(api.CondRestoreFailed, true, cond, fmt.Sprintf("%s: %s", f.Names.Pod(lv.Ordinal), msg))
		}
	}
	return rs
}

// inPlaceStatus is status.restore of a cluster restored in place; nil without a record.
func inPlaceStatus(f *facts.Facts, d *steps.Decision, add func(string, bool, string, string)) *api.RestoreStatus {
	rec := d.InPlace
	if rec == nil || rec.Request == "" {
		return nil
	}
	rs := &api.RestoreStatus{Source: rec.Request, Phase: d.InPlacePhase, InPlace: true, ReplacedClusterIDs: slices.Clone(rec.Retired), LostMembers: slices.Clone(rec.Lost)}
	rs.SetPoint(rec.ParsedPoint())
	if lv := f.Leases[0]; lv != nil && rec.Committed && lv.Report.RestoredFrom != "" {
		rs.Snapshot = lv.Report.RestoredFrom
		fmt.Sscan(lv.Report.RestoredRevision, &rs.Revision)
	}
	if len(rec.Lost) > 0 {
		rs.Message = fmt.Sprintf("restoreOnQuorumLoss: %s ran without their data, a quorum of the last members", strings.Join(rec.Lost, ", "))
	}
	switch {
	case rec.Verifying:
		rs.Message = strings.TrimPrefix(rs.Message+"; ", "; ") + fmt.Sprintf("Job %s verifies the snapshot before any member is stopped; they stop only once it passed", f.Names.RestoreVerifyJob(rec.Key()))
	case rec.Snapshot != "" && !rec.Committed:
		rs.Snapshot = rec.Snapshot
	}
	if d.InPlaceFailure != "" && !rec.Done {
		rs.Message = d.InPlaceFailure
		add(api.CondRestoreFailed, true, "RestoreFailed", d.InPlaceFailure)
	}
	return rs
}
