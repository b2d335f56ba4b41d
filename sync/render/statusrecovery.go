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

// recoveryStatus is status.recovery: the plan while the quorum is lost; Recovered while a member still
// reports the survivor's token and the cluster has not its size again; nil otherwise.
func recoveryStatus(f *facts.Facts, d *steps.Decision) *api.RecoveryStatus {
	if d.Recovery.Status != nil {
		return d.Recovery.Status
	}
	if !f.Truth.Known() || !d.HasSpec || len(f.Truth.Primary) >= d.Target() {
		return nil
	}
	for _, i := range slices.Sorted(maps.Keys(f.Truth.Primary)) {
		m, lv := f.Truth.Primary[i], f.Leases[i]
		if lv == nil || !lv.Fresh || lv.Report.MemberID != m.ID || lv.Report.Recovered == "" || !strings.HasPrefix(lv.Report.Recovered, m.ID+"@") {
			continue
		}
		return &api.RecoveryStatus{Phase: api.RecoveryRecovered, Token: lv.Report.Recovered, Survivor: facts.MemberName(f, m),
			Message: fmt.Sprintf("%s runs on its data; the others rejoin as learners, one at a time (%d of %d members)", facts.MemberName(f, m), len(f.Truth.Primary), d.Target())}
	}
	return nil
}
