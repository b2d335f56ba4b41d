package steps

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// Defragmentation (docs/design/15-maintenance.md §15.5): the hook decides which member defragments, one at a time,
// by writing etcd.io/defrag=<pass token> on that member's Lease; the member's agent executes it and
// reports the token back (etcd.io/defrag-done). A pass is due on the schedule (token "schedule:<time>")
// or for each etcd.io/defrag-now value ("now:<value>", every member whatever its free space).

// DefragState is what the decision found, for the Lease intent and the status (Decision.Defrag).
type DefragState struct {
	Token  string // the pass due ("" none)
	Target int    // the ordinal asked to defragment, -1 none
	Held   string // why no member is asked now
	Next   string // the pass due, when target finishes an earlier one (token) first
	Done   int    // members done for this pass
	Todo   int    // members that still need it
}

// DefragInput is what Defrag reads of the decisions before it (it runs after every other step).
type DefragInput struct {
	// HasSpec, Spec: the spec rendered (with the space overlay); Space: the space step's state.
	HasSpec bool
	Spec    api.ClusterSpec
	Space   SpaceState
	// What holds a pass: spec.paused, quorum lost, the membership change in flight, a roll, a pending
	// spec.
	Paused, QuorumLost   bool
	Busy                 string
	Rolling, PendingSpec bool
	// CARestart: the ordinal the CA rotation lets restart (-1 none); CARestarting: the pod restarting
	// for it in place now ("" none).
	CARestart    int
	CARestarting string
	// TLSTurn: the ordinal whose peer URL moves now (-1 none); PeerMoving: the pod moving it now ("" none).
	TLSTurn    int
	PeerMoving string
}

// defragWindows bound the search for the latest scheduled time: a schedule that fires more often
// than the first window is found there in a few steps, a monthly one in the last.
var defragWindows = []time.Duration{time.Hour, 25 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour}

// noSpaceRaisers are the member IDs with a NOSPACE alarm in a fresh report (nil: none).
func noSpaceRaisers(f *facts.Facts) map[string]bool {
	var out map[string]bool
	for _, id := range f.Alarms[api.AlarmNoSpace] {
		if out == nil {
			out = map[string]bool{}
		}
		out[id] = true
	}
	return out
}

// DefragPass is the pass due now: the NOSPACE recovery first, then an on-demand token, then the schedule.
func DefragPass(f *facts.Facts, in DefragInput) (token string, forced bool) {
	if noSpaceRaisers(f) != nil {
		return NoSpacePass, true
	}
	if v := strings.TrimSpace(f.Parent.Annotations[api.AnnDefragNow]); v != "" && v != f.DefragNowDone {
		return "now:" + v, true
	}
	if in.HasSpec && in.Space.On && len(spaceDefragTodo(f, in)) > 0 {
		// Before the schedule: a file past the line is a NOSPACE to come (§15.6).
		return api.SpacePass(in.Spec.SpaceActAt()), true
	}
	d := in.Spec.Maintenance.Defrag
	if d == nil || d.Schedule == "" {
		return "", false
	}
	sched, err := api.ParseSchedule(d.Schedule)
	if err != nil {
		return "", false // validated before adoption; a recorded spec that no longer parses runs nothing
	}
	now := f.Now.UTC()
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

// Defrag picks the member to defragment for the pass due: never during a membership step, a roll,
// a pending spec or a restore, never with a member unhealthy; a member already defragmenting keeps the
// turn; followers first by ordinal, the leader last (in the NOSPACE recovery, the raisers after the rest).
func Defrag(f *facts.Facts, in DefragInput) DefragState {
	st := DefragState{Target: -1}
	token, forced := DefragPass(f, in)
	if token == "" || !in.HasSpec {
		return st
	}
	st.Token = token
	if i, other := unfinishedPass(f, token); i >= 0 {
		// A pass that is no longer the one due (the schedule fired again, defrag-now changed, NOSPACE
		// came) is still executing, or asked for, on a member: that member finishes it first (its agent
		// does not look at the Lease while it defragments), and no member is asked for the new pass beside it.
		st.Token, st.Target, st.Next = other, i, token
		return st
	}
	minFree := int64(api.DefaultDefragMinFreePercent)
	if d := in.Spec.Maintenance.Defrag; d != nil && d.MinFreePercent != nil {
		minFree = int64(*d.MinFreePercent)
	}
	raisers := noSpaceRaisers(f)
	quota, _ := api.QuotaBackendBytes(in.Spec.Options)
	// turns[0] are followers, turns[1] the leader; in the NOSPACE recovery turns[2] and turns[3] are the
	// raisers (followers, then the leader), after every member that did not raise the alarm.
	var turns [4][]int
	var failed []int
	running, asked := -1, -1
	for _, i := range slices.Sorted(maps.Keys(f.Truth.Primary)) {
		m := f.Truth.Primary[i]
		lv := f.Leases[i]
		if lv == nil || lv.Report.MemberID != m.ID {
			continue
		}
		r := lv.Report
		if passDone(token, m, r, raisers[m.ID], quota) {
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
		for _, i := range slices.Sorted(maps.Keys(f.Truth.Primary)) {
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
	case in.Paused:
		st.Held = "spec.paused to be cleared"
	case !f.Bootstrapped || in.QuorumLost || f.SplitBrain:
		st.Held = "a healthy quorum"
	case in.Busy != "":
		st.Held = "the membership change in flight (" + in.Busy + ")"
	case in.Rolling:
		st.Held = "the rolling update to finish"
	case in.PendingSpec:
		st.Held = "the waiting spec change to be adopted"
	case in.CARestart >= 0 || in.CARestarting != "":
		st.Held = "the CA rotation's member restart"
	case in.TLSTurn >= 0 || in.PeerMoving != "":
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
func passDone(token string, m *facts.Member, r api.Report, raiser bool, quota int64) bool {
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
func spaceDefragTodo(f *facts.Facts, in DefragInput) []int {
	var out []int
	pct := in.Spec.SpaceActAt()
	for _, i := range slices.Sorted(maps.Keys(f.Truth.Primary)) {
		m, lv := f.Truth.Primary[i], f.Leases[i]
		if lv != nil && lv.Fresh && lv.Report.MemberID == m.ID && api.SpaceWantsDefrag(m.DBSize, m.DBSizeInUse, in.Space.Quota, pct) {
			out = append(out, i)
		}
	}
	return out
}

// unfinishedPass finds a member on a pass other than token (PendingPass): its ordinal and that pass
// (-1 when none). The NOSPACE recovery waits only for a member executing a pass, not for one merely
// asked (whose agent may keep failing it).
func unfinishedPass(f *facts.Facts, token string) (int, string) {
	for _, i := range slices.Sorted(maps.Keys(f.Truth.Primary)) {
		if other, running := PendingPass(f, i); other != "" && other != token && (running || !stateBased(token)) {
			return i, other
		}
	}
	return -1, ""
}

// DefragNowDone is the etcd.io/defrag-now value to record as done: this answer's (st), when its pass
// just went over every member (each member of the cluster reports it done, none executes it), else the
// recorded one.
func DefragNowDone(f *facts.Facts, st DefragState) string {
	recorded := f.DefragNowDone
	v, ok := strings.CutPrefix(st.Token, "now:")
	if !ok || st.Next != "" || st.Target >= 0 || st.Todo > 0 || len(f.Truth.Primary) == 0 || st.Done < len(f.Truth.Primary) {
		return recorded
	}
	return v
}

// Which member is on a defragmentation pass now: a defragmenting member serves nothing, so every other
// disruptive step (restarts in place, rolls, joins, removals, growth) waits for it, and it for them.

// PendingPass is the pass member i is on: the one its agent reports executing (running), or the one the
// last answer asked of it that it has not reported done and may still execute (mayExecute; a NOSPACE
// turn asked is not counted: its agent acts only while an alarm or a full file calls for it). "" when
// none, or when its Lease is stale or another member's: no agent runs behind a stale one.
func PendingPass(f *facts.Facts, i int) (token string, running bool) {
	m, lv := f.Truth.Primary[i], f.Leases[i]
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

// Defragmenting names the pod of a member on a pass (PendingPass: it defragments now, or the last answer
// asked it to and it may be at it before its report says so); "" when none. A
// defragmenting member serves no reads or writes for the duration: no planned step (a member leaving or
// joining, a pod restarted by a roll) starts beside it, as no defragmentation starts beside a step.
func Defragmenting(f *facts.Facts) string {
	for _, i := range slices.Sorted(maps.Keys(f.Truth.Primary)) {
		if tok, _ := PendingPass(f, i); tok != "" {
			return f.Names.Pod(i)
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
