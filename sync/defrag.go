package sync

import (
	"slices"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/steps"
)

// Defragmentation (docs/design/15-maintenance.md §15.5): the hook decides which member defragments, one at a time,
// by writing etcd.io/defrag=<pass token> on that member's Lease; the member's agent executes it and
// reports the token back (etcd.io/defrag-done). A pass is due on the schedule (token "schedule:<time>")
// or for each etcd.io/defrag-now value ("now:<value>", every member whatever its free space).

// defragWindows bound the search for the latest scheduled time: a schedule that fires more often
// than the first window is found there in a few steps, a monthly one in the last.
var defragWindows = []time.Duration{time.Hour, 25 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour}

// noSpaceRaisers are the member IDs with a NOSPACE alarm in a fresh report (nil: none).
func (p *plan) noSpaceRaisers() map[string]bool {
	var out map[string]bool
	for _, id := range p.f.Alarms[api.AlarmNoSpace] {
		if out == nil {
			out = map[string]bool{}
		}
		out[id] = true
	}
	return out
}

// defragPass is the pass due now: the NOSPACE recovery first, then an on-demand token, then the schedule.
func (p *plan) defragPass() (token string, forced bool) {
	if p.noSpaceRaisers() != nil {
		return NoSpacePass, true
	}
	if v := strings.TrimSpace(p.f.Parent.Annotations[api.AnnDefragNow]); v != "" && v != p.f.DefragNowDone {
		return "now:" + v, true
	}
	if p.HasSpec && p.Space.On && len(p.spaceDefragTodo()) > 0 {
		// Before the schedule: a file past the line is a NOSPACE to come (§15.6).
		return api.SpacePass(p.Spec.SpaceActAt()), true
	}
	d := p.Spec.Maintenance.Defrag
	if d == nil || d.Schedule == "" {
		return "", false
	}
	sched, err := api.ParseSchedule(d.Schedule)
	if err != nil {
		return "", false // validated before adoption; a recorded spec that no longer parses runs nothing
	}
	now := p.f.Now.UTC()
	for _, w := range defragWindows {
		var last time.Time
		for t := sched.Next(now.Add(-w)); !t.IsZero() && !t.After(now); t = sched.Next(t) {
			last = t
		}
		if !last.IsZero() {
			return "schedule:" + last.Format(time.RFC3339), false
		}
	}
	return "", false
}

// decideDefrag picks the member to defragment for the pass due: never during a membership step, a roll,
// a pending spec or a restore, never with a member unhealthy; a member already defragmenting keeps the
// turn; followers first by ordinal, the leader last (in the NOSPACE recovery, the raisers after the rest).
func (p *plan) decideDefrag() steps.DefragState {
	f := p.f
	st := steps.DefragState{Target: -1}
	token, forced := p.defragPass()
	if token == "" || !p.HasSpec {
		return st
	}
	st.Token = token
	if i, other := p.unfinishedPass(token); i >= 0 {
		// A pass that is no longer the one due (the schedule fired again, defrag-now changed, NOSPACE
		// came) is still executing, or asked for, on a member: that member finishes it first (its agent
		// does not look at the Lease while it defragments), and no member is asked for the new pass beside it.
		st.Token, st.Target, st.Next = other, i, token
		return st
	}
	minFree := int64(api.DefaultDefragMinFreePercent)
	if d := p.Spec.Maintenance.Defrag; d != nil && d.MinFreePercent != nil {
		minFree = int64(*d.MinFreePercent)
	}
	raisers := p.noSpaceRaisers()
	quota, _ := api.QuotaBackendBytes(p.Spec.Options)
	// turns[0] are followers, turns[1] the leader; in the NOSPACE recovery turns[2] and turns[3] are the
	// raisers (followers, then the leader), after every member that did not raise the alarm.
	var turns [4][]int
	var failed []int
	running, asked := -1, -1
	for _, i := range sortedKeys(f.Truth.Primary) {
		m := f.Truth.Primary[i]
		lv := f.Leases[i]
		if lv == nil || lv.Report.MemberID != m.ID {
			continue
		}
		r := lv.Report
		if p.passDone(token, m, r, raisers[m.ID], quota) {
			st.Done++
			continue
		}
		if r.Defragging == token && lv.Fresh {
			running = i
		}
		if lv.Defrag == token && lv.Fresh && mayExecute(m, r) {
			// The hook's last answer: its agent may be at it before its report says so. A stale
			// Lease means no agent runs there, hence no defragmentation either: the turn passes on,
			// as it does from a member that cannot execute it (mayExecute).
			asked = i
		}
		if !forced && (m.DBSize <= 0 || (m.DBSize-m.DBSizeInUse)*100 < m.DBSize*minFree) {
			continue // not fragmented enough for a scheduled pass
		}
		st.Todo++
		if r.Reason() == api.ReasonDefragmenting {
			failed = append(failed, i) // its agent retries after a minute: the others go first
			continue
		}
		turn := 0
		if m.ID == f.Truth.LeaderID {
			turn = 1
		}
		if token == NoSpacePass && raisers[m.ID] {
			turn += 2
		}
		turns[turn] = append(turns[turn], i)
	}
	if token == NoSpacePass && st.Todo == 0 && running < 0 && asked < 0 {
		// Every member has room and its own alarm is gone, yet an alarm is left: one raised by a member
		// removed since (etcd keeps it, and refuses writes for it). Only another member can disarm it:
		// the first follower is asked, whose agent disarms the alarms of members not in the list.
		for _, i := range sortedKeys(f.Truth.Primary) {
			m, lv := f.Truth.Primary[i], f.Leases[i]
			if lv != nil && lv.Fresh && lv.Report.MemberID == m.ID && m.Voter() && (m.ID != f.Truth.LeaderID || len(f.Truth.Primary) == 1) {
				turns[0], st.Todo = []int{i}, 1
				break
			}
		}
	}
	if running < 0 {
		running = asked
	}
	if running >= 0 {
		// Whatever else changed (a new leader reorders the turns), the member executing this pass, or
		// asked to by the last answer, keeps its turn until it reports the pass done: a second one must
		// not start beside it.
		st.Target = running
		return st
	}
	if st.Todo == 0 {
		return st
	}
	switch {
	case p.Paused:
		st.Held = "spec.paused to be cleared"
	case !f.Bootstrapped || p.QuorumLost || f.SplitBrain:
		st.Held = "a healthy quorum"
	case p.Busy != "":
		st.Held = "the membership change in flight (" + p.Busy + ")"
	case p.Rolling:
		st.Held = "the rolling update to finish"
	case p.PendingSpec:
		st.Held = "the waiting spec change to be adopted"
	case p.CARot.Restart >= 0 || p.restarting(caRestart) != "":
		st.Held = "the CA rotation's member restart"
	case p.TLSSw.Turn >= 0 || p.restarting(peerMove) != "":
		st.Held = "the TLS switch's peer URL move"
	}
	if st.Held == "" {
		for _, m := range f.Truth.Members {
			if !m.Healthy {
				st.Held = "member " + facts.MemberName(f, m) + " to be healthy"
				break
			}
		}
	}
	if st.Held != "" {
		return st
	}
	st.Target = slices.Concat(append(turns[:], failed)...)[0]
	return st
}

// passDone says whether member m (reporting r) is done with the pass token. The NOSPACE recovery and
// the space pass judge the member's state (its alarm, its file), the same token serving every
// occurrence; every other pass the token the member reports done.
func (p *plan) passDone(token string, m *facts.Member, r api.Report, raiser bool, quota int64) bool {
	if token == NoSpacePass {
		return !raiser && !api.OverQuota(m.DBSize, quota)
	}
	if pct, ok := api.ParseSpacePass(token); ok {
		return !api.SpaceWantsDefrag(m.DBSize, m.DBSizeInUse, quota, pct)
	}
	return r.DefragDone == token
}

// stateBased: the pass's turns are judged by the members' state (passDone), not by a reported token: a
// member asked is not known to execute (its agent acts only while its state calls for it).
func stateBased(token string) bool {
	_, space := api.ParseSpacePass(token)
	return token == NoSpacePass || space
}

// spaceDefragTodo are the ordinals of members (fresh reports) whose file is past the space line and
// would give back room to a defragmentation (api.SpaceWantsDefrag).
func (p *plan) spaceDefragTodo() []int {
	var out []int
	pct := p.Spec.SpaceActAt()
	for _, i := range sortedKeys(p.f.Truth.Primary) {
		m, lv := p.f.Truth.Primary[i], p.f.Leases[i]
		if lv != nil && lv.Fresh && lv.Report.MemberID == m.ID && api.SpaceWantsDefrag(m.DBSize, m.DBSizeInUse, p.Space.Quota, pct) {
			out = append(out, i)
		}
	}
	return out
}

// unfinishedPass finds a member on a pass other than token (pendingPass): its ordinal and that pass
// (-1 when none). The NOSPACE recovery waits only for a member executing a pass, not for one merely
// asked (whose agent may keep failing it).
func (p *plan) unfinishedPass(token string) (int, string) {
	for _, i := range sortedKeys(p.f.Truth.Primary) {
		if other, running := p.pendingPass(i); other != "" && other != token && (running || !stateBased(token)) {
			return i, other
		}
	}
	return -1, ""
}

// defragNowDone is the etcd.io/defrag-now value to record as done: this answer's, when its pass just
// went over every member (each member of the cluster reports it done, none executes it), else the
// recorded one.
func (p *plan) defragNowDone() string {
	st, recorded := p.Defrag, p.f.DefragNowDone
	v, ok := strings.CutPrefix(st.Token, "now:")
	if !ok || st.Next != "" || st.Target >= 0 || st.Todo > 0 || len(p.f.Truth.Primary) == 0 || st.Done < len(p.f.Truth.Primary) {
		return recorded
	}
	return v
}

// askDefrag decides and writes the intent on the chosen member's Lease (only a Lease the plan renders).
func (p *plan) askDefrag() {
	p.Defrag = p.decideDefrag()
	if lp, ok := p.leases[p.Defrag.Target]; ok && p.Defrag.Target >= 0 {
		lp.Defrag = p.Defrag.Token
	}
}
