package sync

import (
	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// Which member is on a defragmentation pass now: a defragmenting member serves nothing, so every other
// disruptive step (restarts in place, rolls, joins, removals, growth) waits for it, and it for them.

// pendingPass is the pass member i is on: the one its agent reports executing (running), or the one the
// last answer asked of it that it has not reported done and may still execute (mayExecute; a NOSPACE
// turn asked is not counted: its agent acts only while an alarm or a full file calls for it). "" when
// none, or when its Lease is stale or another member's: no agent runs behind a stale one.
func (p *plan) pendingPass(i int) (token string, running bool) {
	m, lv := p.f.Truth.Primary[i], p.f.Leases[i]
	if m == nil || lv == nil || !lv.Fresh || lv.Report.MemberID != m.ID {
		return "", false
	}
	r := lv.Report
	if r.Defragging != "" {
		return r.Defragging, true
	}
	if lv.Defrag != "" && !stateBased(lv.Defrag) && r.DefragDone != lv.Defrag && mayExecute(m, r) {
		return lv.Defrag, false
	}
	return "", false
}

// defragmenting names the pod of a member on a pass (pendingPass: it defragments now, or the last answer
// asked it to and it may be at it before its report says so); "" when none. A
// defragmenting member serves no reads or writes for the duration: no planned step (a member leaving or
// joining, a pod restarted by a roll) starts beside it, as no defragmentation starts beside a step.
func (p *plan) defragmenting() string {
	for _, i := range sortedKeys(p.f.Truth.Primary) {
		if tok, _ := p.pendingPass(i); tok != "" {
			return p.f.Names.Pod(i)
		}
	}
	return ""
}

// mayExecute says whether a member asked for a pass (not yet reporting it running) may still be about to
// execute it: it is healthy and its last attempt did not fail. A member whose etcd is down never looks
// at the request, and one whose attempt failed retries only after a minute (errNoTransferee, a failing
// MoveLeader may fail every time): neither keeps the turn, nor holds a step, on the strength of a
// request alone. A member reporting the pass running keeps both whatever its health (a defragmenting
// member may answer Status slowly).
func mayExecute(m *facts.Member, r api.Report) bool {
	return m.Healthy && r.Reason() != api.ReasonDefragmenting
}

// NoSpacePass is the token of the NOSPACE recovery: while any member reports a NOSPACE alarm, every
// member that raised one or whose file is at the quota (api.OverQuota) is asked in turn, those that did
// not raise one first; the agent compacts (cluster-wide, once), defragments its member if its file is
// at the quota, and disarms its own alarm once its file has room. Etcd checks writes against the file
// size: a member left at the quota would raise the alarm again at the next write it receives, so the
// raisers, whose disarming lets writes in, go last. The member's state (its alarm, its file), not a
// token it reported, says whether it is done, so the same token serves every occurrence.
const NoSpacePass = api.NoSpacePass
