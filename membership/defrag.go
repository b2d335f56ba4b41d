package membership

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/api"
)

// Defragmentation (docs/design.md §15.5). The hook asks one member at a time, by writing a pass token
// on its Lease (etcd.io/defrag); the member executes it once and reports the token back.

// errNoTransferee: the leader must defragment last, but no other voter is healthy to take over.
var errNoTransferee = errors.New("this member leads and no other voter is healthy to take over: not defragmenting the leader")

const (
	// defragTimeout bounds one defragmentation: etcd rewrites the file at tens of MiB/s, so 8 GiB (the
	// largest quota etcd recommends) fits.
	defragTimeout = 10 * time.Minute
	// defragRetry: a failed defragmentation is tried again after this long, not at every look.
	defragRetry = time.Minute
	// noSpaceAgain: a member whose alarm is raised again right after its recovery (its data itself
	// exceeds the quota) is not compacted and defragmented at every look: at most this often.
	noSpaceAgain = 5 * time.Minute
)

// maybeDefragment executes the pass the Lease asks for, if this member has not done it yet; the report
// carries the outcome. members is the member list (nil for a learner, which never leads).
func (a *Agent) maybeDefragment(ctx context.Context, in Intent, inErr error, st *clientv3.StatusResponse, members []api.Member, r *api.Report) {
	if inErr == nil && !a.defragRead {
		a.defragRead = true
		a.defragDone, a.defragLast = in.Report.DefragDone, in.Report.LastDefrag
	}
	defer func() { r.DefragDone, r.LastDefrag = a.defragDone, a.defragLast }()
	if inErr != nil || in.Defrag == "" || time.Since(a.defragFailed) < defragRetry {
		return
	}
	// A pass is executed once; the NOSPACE recovery whenever this member's own alarm is raised (the
	// same token serves every occurrence: the alarm, not the token, says whether it is needed).
	again := noSpaceAgain
	if a.Cfg.NoSpaceAgain > 0 {
		again = a.Cfg.NoSpaceAgain
	}
	if in.Defrag == a.defragDone && (in.Defrag != api.NoSpacePass || !ownAlarm(r.Alarms, st.Header.MemberId) || time.Since(a.noSpaceAt) < again) {
		return
	}
	if err := a.defragment(ctx, in.Defrag, st, members, r); err != nil {
		a.defragFailed = time.Now()
		r.Error = "Defragmenting: " + err.Error()
		a.event(EventDefragFailed, "Defragment", true, "defragmentation for pass %s failed (etcd keeps serving; retried in %s): %v", in.Defrag, defragRetry, err)
	}
}

// ownAlarm says whether alarms hold a NOSPACE alarm raised by member self.
func ownAlarm(alarms []string, self uint64) bool {
	return slices.Contains(alarms, api.AlarmNoSpace+"@"+api.FormatID(self))
}

func (a *Agent) defragment(ctx context.Context, token string, st *clientv3.StatusResponse, members []api.Member, r *api.Report) error {
	// Said before it starts: the hook keeps this member's turn while it runs, and asks no other.
	running := *r
	running.Defragging = token
	a.report(ctx, running, true)

	self := st.Header.MemberId
	if st.Leader == self && members != nil {
		// A defragmenting member blocks its reads and writes: a leader hands over first.
		healthy := a.Etcd.Health(ctx, members)
		moved := false
		for _, m := range members {
			if m.ID == api.FormatID(self) || m.Learner || healthy[m.ID] == nil {
				continue
			}
			to, _ := api.ParseID(m.ID)
			if err := a.Etcd.MoveLeader(ctx, a.Cfg.ClientURL, to); err != nil {
				return err
			}
			a.Log.Info("moved leadership away before defragmenting", "to", m.ID)
			moved = true
			break
		}
		if !moved && len(members) > 1 {
			return errNoTransferee
		}
	}
	noSpace, ownNoSpace := false, ownAlarm(r.Alarms, self)
	for _, al := range r.Alarms {
		if typ, _, _ := strings.Cut(al, "@"); typ == api.AlarmNoSpace {
			noSpace = true
		}
	}
	if noSpace {
		// Under NOSPACE (raised by any member: the alarm stops writes cluster-wide) the history is what
		// fills the files: compact it (cluster-wide, idempotent) so that each defragmentation gives the
		// space back, this member's first.
		if err := a.Etcd.Compact(ctx, a.Cfg.ClientURL, st.Header.Revision); err != nil {
			return err
		}
	}
	start, before := time.Now(), st.DbSize
	if err := a.Etcd.Defragment(ctx, a.Cfg.ClientURL, defragTimeout); err != nil {
		return err
	}
	took := time.Since(start)
	after := before
	if st2, err := a.Etcd.Status(ctx, a.Cfg.ClientURL); err == nil {
		after = st2.DbSize
		r.DBSize, r.DBSizeInUse = st2.DbSize, st2.DbSizeInUse
	}
	if ownNoSpace {
		if err := a.Etcd.DisarmNoSpace(ctx, a.Cfg.ClientURL, self); err != nil {
			return err
		}
		a.Log.Info("disarmed this member's NOSPACE alarm after defragmenting")
	}
	a.defragDone, a.defragLast = token, time.Now().UTC().Format(time.RFC3339)
	if token == api.NoSpacePass {
		a.noSpaceAt = time.Now()
	}
	a.Log.Info("defragmented", "pass", token, "before", before, "after", after, "took", took.String())
	a.event(EventDefragmented, "Defragment", false, "defragmented for pass %s in %s: %d -> %d bytes%s", token, took.Round(time.Millisecond), before, after,
		map[bool]string{true: "; NOSPACE disarmed", false: ""}[ownNoSpace])
	return nil
}
