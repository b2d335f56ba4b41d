package membership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/api"
)

// Defragmentation (docs/design/15-maintenance.md §15.5). The hook asks one member at a time, by writing a pass token
// on its Lease (etcd.io/defrag); the member executes it once and reports the token back.

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
	if inErr != nil || in.Defrag == "" {
		return
	}
	if time.Since(a.defragFailed) < defragRetry {
		// The failure stays in the report until the retry: the hook passes the turn on meanwhile and
		// holds no step for a member that is not executing (sync.mayExecute).
		if r.Error == "" {
			r.SetError(api.ReasonDefragmenting, a.defragErr)
		}
		return
	}
	var err error
	switch {
	case in.Defrag == api.NoSpacePass:
		err = a.recoverNoSpace(ctx, st, members, r)
	case isSpace(in.Defrag):
		err = a.spaceDefrag(ctx, in.Defrag, st, members, r)
	case in.Defrag != a.defragDone:
		err = a.defragment(ctx, in.Defrag, st, members, r, "")
	}
	a.defragErr = ""
	if err != nil {
		a.defragFailed = time.Now()
		a.defragErr = err.Error()
		r.SetError(api.ReasonDefragmenting, a.defragErr)
		a.env.event(EventDefragFailed, "Defragment", true, "defragmentation for pass %s failed (etcd keeps serving; retried in %s): %v", in.Defrag, defragRetry, err)
	}
}

// ownAlarm says whether alarms hold a NOSPACE alarm raised by member self.
func ownAlarm(alarms []string, self uint64) bool {
	return slices.Contains(alarms, api.AlarmNoSpace+"@"+api.FormatID(self))
}

// recoverNoSpace is this member's turn in the NOSPACE recovery (docs/design/15-maintenance.md §15.5), asked while any
// member's alarm is raised and again at every look until this member is done: its own alarm disarmed
// and its file below the quota line (api.OverQuota). The history is what fills the files: compact it
// (cluster-wide, idempotent), defragment this member if its file is at the line, and disarm its own
// alarm once its file has room. When the data itself fills the quota nothing is given back: the next
// attempt waits noSpaceAgain, not the next look.
func (a *Agent) recoverNoSpace(ctx context.Context, st *clientv3.StatusResponse, members []api.Member, r *api.Report) error {
	self := st.Header.MemberId
	quota := quotaOf(a.Cfg.EtcdCommand)
	own, over := ownAlarm(r.Alarms, self), api.OverQuota(st.DbSize, quota)
	orphans := orphanNoSpace(r.Alarms, members)
	if !own && !over && len(orphans) == 0 {
		return nil
	}
	if !over {
		// Its file has room (defragmented in an earlier turn, or by another pass): only alarms are left,
		// its own, or (the turn the hook asks for last) those of members removed since.
		if own {
			return a.disarm(ctx, self)
		}
		return a.disarmOrphans(ctx, orphans)
	}
	again := noSpaceAgain
	if a.Cfg.NoSpaceAgain > 0 {
		again = a.Cfg.NoSpaceAgain
	}
	if a.noSpaceStuck && time.Since(a.noSpaceAt) < again {
		return nil
	}
	return a.defragment(ctx, api.NoSpacePass, st, members, r, map[bool]string{true: "own", false: "other"}[own])
}

// disarm disarms this member's NOSPACE alarm.
func (a *Agent) disarm(ctx context.Context, self uint64) error {
	if err := a.Etcd.DisarmNoSpace(ctx, a.Cfg.ClientURL, self); err != nil {
		return err
	}
	a.Log.Info("disarmed this member's NOSPACE alarm: its file has room")
	return nil
}

// orphanNoSpace are the members IDs of NOSPACE alarms that name no member of the list (nil without a
// list: a learner's agent cannot tell).
func orphanNoSpace(alarms []string, members []api.Member) []uint64 {
	if members == nil {
		return nil
	}
	var out []uint64
	for _, a := range alarms {
		typ, id, _ := strings.Cut(a, "@")
		if typ != api.AlarmNoSpace || slices.ContainsFunc(members, func(m api.Member) bool { return m.ID == id }) {
			continue
		}
		if n, err := api.ParseID(id); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// disarmOrphans disarms NOSPACE alarms raised by members removed since: etcd keeps them and refuses
// writes for them, and no agent of theirs is left to disarm them. The hook asks for this only once every
// member's file has room (sync.decideDefrag).
func (a *Agent) disarmOrphans(ctx context.Context, ids []uint64) error {
	for _, id := range ids {
		if err := a.Etcd.DisarmNoSpace(ctx, a.Cfg.ClientURL, id); err != nil {
			return err
		}
		a.Log.Info("disarmed the NOSPACE alarm of a member no longer in the cluster", "member", api.FormatID(id))
		a.env.event(EventAlarmDisarmed, "Disarm", false, "disarmed the NOSPACE alarm of member %s, which is no longer in the cluster (etcd keeps a removed member's alarm)", api.FormatID(id))
	}
	return nil
}

// defragment defragments this member for the pass token, the leader handing over first. noSpace is
// "" outside the NOSPACE recovery, else whether the alarm it recovers from is this member's ("own",
// disarmed once the file has room) or another's ("other"): then the history is compacted first.
func (a *Agent) defragment(ctx context.Context, token string, st *clientv3.StatusResponse, members []api.Member, r *api.Report, noSpace string) error {
	// Said before it starts: the hook keeps this member's turn while it runs, and asks no other.
	running := *r
	running.Defragging = token
	a.rep.report(ctx, running, true)

	self := st.Header.MemberId
	if st.Leader == self && members != nil {
		// A defragmenting member blocks its reads and writes: a leader hands over first.
		to, err := a.handOver(ctx, members, a.Etcd.Health(ctx, members), api.FormatID(self), nil)
		switch {
		case errors.Is(err, errNoTransferee) && len(members) == 1:
			// The only member: nobody to hand over to, and nobody else to serve meanwhile.
		case errors.Is(err, errNoTransferee):
			return fmt.Errorf("%w: not defragmenting the leader", err)
		case err != nil:
			return err
		default:
			a.Log.Info("moved leadership away before defragmenting", "to", to)
		}
	}
	if noSpace != "" {
		// Under NOSPACE (the alarm stops writes cluster-wide) the history is what fills the files: compact
		// it so that the defragmentation gives the space back (the first member's turn does it).
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
	a.defragDone, a.defragLast = token, time.Now().UTC().Format(time.RFC3339)
	outcome := ""
	if noSpace != "" {
		a.noSpaceAt = time.Now()
		a.noSpaceStuck = api.OverQuota(after, quotaOf(a.Cfg.EtcdCommand))
		switch {
		case a.noSpaceStuck:
			outcome = "; the file is still at the quota (the data itself fills it): delete data or raise quota-backend-bytes"
		case noSpace == "own":
			if err := a.disarm(ctx, self); err != nil {
				return err
			}
			outcome = "; NOSPACE disarmed"
		}

	}
	a.Log.Info("defragmented", "pass", token, "before", before, "after", after, "took", took.String())
	a.env.event(EventDefragmented, "Defragment", a.noSpaceStuck && noSpace != "", "defragmented for pass %s in %s: %d -> %d bytes%s", token, took.Round(time.Millisecond), before, after, outcome)
	return nil
}

// isSpace says whether token is a space pass (api.SpacePass).
func isSpace(token string) bool {
	_, ok := api.ParseSpacePass(token)
	return ok
}

// spaceLine is the line of the last space pass asked, the default before one.
func (a *Agent) spaceLine() int32 {
	if a.spacePct > 0 {
		return a.spacePct
	}
	return api.DefaultSpaceActAtPercent
}

// spaceDefrag is this member's turn in a space pass (docs/design/15-maintenance.md §15.6), asked while
// its reported file is past the line with room to give back, and acted on only while etcd's own figures
// say so (api.SpaceWantsDefrag); after one that left it wanting (nothing the pages freed could give
// back), not again for a defragRetry. Under revision compaction a compaction
// that is behind (the auto-compactor runs every five minutes) is caught up first: the history it would
// drop is room the defragmentation then gives back. A periodic compactor's revision at the retention's
// start is not known to the agent; that history stays until the compactor's next run.
func (a *Agent) spaceDefrag(ctx context.Context, token string, st *clientv3.StatusResponse, members []api.Member, r *api.Report) error {
	pct, _ := api.ParseSpacePass(token)
	a.spacePct = pct
	quota := quotaOf(a.Cfg.EtcdCommand)
	if !api.SpaceWantsDefrag(st.DbSize, st.DbSizeInUse, quota, pct) || (a.spaceStuck && time.Since(a.spaceAt) < defragRetry) {
		return nil
	}
	a.spaceAt = time.Now()
	if keep, ok := revisionRetention(a.Cfg.EtcdCommand); ok && st.Header.Revision > keep {
		if err := a.Etcd.Compact(ctx, a.Cfg.ClientURL, st.Header.Revision-keep); err != nil {
			return err
		}
	}
	if err := a.defragment(ctx, token, st, members, r, ""); err != nil {
		return err
	}
	a.spaceStuck = api.SpaceWantsDefrag(r.DBSize, r.DBSizeInUse, quota, pct)
	return nil
}

// revisionRetention is the revisions etcd keeps under --auto-compaction-mode=revision; false otherwise.
func revisionRetention(command []string) (int64, bool) {
	mode, _ := etcdFlag(command, "auto-compaction-mode")
	retention, _ := etcdFlag(command, "auto-compaction-retention")
	n, err := strconv.ParseInt(retention, 10, 64)
	return n, mode == "revision" && err == nil && n > 0
}

// quotaChanged posts QuotaChanged once, at the first look, when this etcd runs with another quota
// than the Lease's earlier report said (reported 0: a first start, or an agent from before the key).
func (a *Agent) quotaChanged(reported, now int64) {
	if a.quotaRead {
		return
	}
	a.quotaRead = true
	if reported <= 0 || now <= 0 || reported == now {
		return
	}
	verb := "raised"
	if now < reported {
		verb = "lowered"
	}
	a.Log.Info("etcd runs with another backend quota", "from", reported, "to", now)
	a.env.event(EventQuotaChanged, "Restart", false, "backend quota %s from %d to %d bytes (spec.maintenance.space, or spec.options quota-backend-bytes)", verb, reported, now)
}
