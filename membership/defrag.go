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

// defragger executes the defragmentation passes the Lease asks this member for (one member at a time,
// by token), its turns in the NOSPACE recovery (§15.5) and in the space passes (§15.6), and posts
// QuotaChanged.
type defragger struct {
	*env
	// rep: a defragmentation is reported before it starts (the hook keeps the turn meanwhile).
	rep *reporter

	// The last pass completed (done) and when (last), read back from the Lease once (read) so that a
	// restarted agent does not repeat it; the last failure and when, for the backoff (reported until the
	// retry).
	read     bool
	done     string
	last     string
	failedAt time.Time
	err      string
	// noSpaceAt: this member's last NOSPACE defragmentation; noSpaceStuck: it left the file at the quota.
	noSpaceAt    time.Time
	noSpaceStuck bool
	// spaceAt: this member's last space defragmentation, spaceStuck: it left the file wanting another
	// (then the next waits a defragRetry); spacePct: the line of the last space pass asked
	// (api.DefaultSpaceActAtPercent before one), which keepSizes watches.
	spaceAt    time.Time
	spacePct   int32
	spaceStuck bool
	// quotaRead: the quota of the Lease's earlier report was compared with this etcd's (QuotaChanged).
	quotaRead bool
}

// maybe executes the pass the Lease asks for, if this member has not done it yet; the report
// carries the outcome. members is the member list (nil for a learner, which never leads).
func (d *defragger) maybe(ctx context.Context, in Intent, inErr error, st *clientv3.StatusResponse, members []api.Member, r *api.Report) {
	if inErr == nil && !d.read {
		d.read = true
		d.done, d.last = in.Report.DefragDone, in.Report.LastDefrag
	}
	defer func() { r.DefragDone, r.LastDefrag = d.done, d.last }()
	if inErr != nil || in.Defrag == "" {
		return
	}
	if time.Since(d.failedAt) < defragRetry {
		// The failure stays in the report until the retry: the hook passes the turn on meanwhile and
		// holds no step for a member that is not executing (sync.mayExecute).
		if r.Error == "" {
			r.SetError(api.ReasonDefragmenting, d.err)
		}
		return
	}
	var err error
	switch {
	case in.Defrag == api.NoSpacePass:
		err = d.recoverNoSpace(ctx, st, members, r)
	case isSpace(in.Defrag):
		err = d.spaceDefrag(ctx, in.Defrag, st, members, r)
	case in.Defrag != d.done:
		err = d.defragment(ctx, in.Defrag, st, members, r, "")
	}
	d.err = ""
	if err != nil {
		d.failedAt = time.Now()
		d.err = err.Error()
		r.SetError(api.ReasonDefragmenting, d.err)
		d.event(EventDefragFailed, "Defragment", true, "defragmentation for pass %s failed (etcd keeps serving; retried in %s): %v", in.Defrag, defragRetry, err)
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
func (d *defragger) recoverNoSpace(ctx context.Context, st *clientv3.StatusResponse, members []api.Member, r *api.Report) error {
	self := st.Header.MemberId
	quota := quotaOf(d.cfg.EtcdCommand)
	own, over := ownAlarm(r.Alarms, self), api.OverQuota(st.DbSize, quota)
	orphans := orphanNoSpace(r.Alarms, members)
	if !own && !over && len(orphans) == 0 {
		return nil
	}
	if !over {
		// Its file has room (defragmented in an earlier turn, or by another pass): only alarms are left,
		// its own, or (the turn the hook asks for last) those of members removed since.
		if own {
			return d.disarm(ctx, self)
		}
		return d.disarmOrphans(ctx, orphans)
	}
	again := noSpaceAgain
	if d.cfg.NoSpaceAgain > 0 {
		again = d.cfg.NoSpaceAgain
	}
	if d.noSpaceStuck && time.Since(d.noSpaceAt) < again {
		return nil
	}
	return d.defragment(ctx, api.NoSpacePass, st, members, r, map[bool]string{true: "own", false: "other"}[own])
}

// disarm disarms this member's NOSPACE alarm.
func (d *defragger) disarm(ctx context.Context, self uint64) error {
	if err := d.etcd.DisarmNoSpace(ctx, d.cfg.ClientURL, self); err != nil {
		return err
	}
	d.log.Info("disarmed this member's NOSPACE alarm: its file has room")
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
func (d *defragger) disarmOrphans(ctx context.Context, ids []uint64) error {
	for _, id := range ids {
		if err := d.etcd.DisarmNoSpace(ctx, d.cfg.ClientURL, id); err != nil {
			return err
		}
		d.log.Info("disarmed the NOSPACE alarm of a member no longer in the cluster", "member", api.FormatID(id))
		d.event(EventAlarmDisarmed, "Disarm", false, "disarmed the NOSPACE alarm of member %s, which is no longer in the cluster (etcd keeps a removed member's alarm)", api.FormatID(id))
	}
	return nil
}

// defragment defragments this member for the pass token, the leader handing over first. noSpace is
// "" outside the NOSPACE recovery, else whether the alarm it recovers from is this member's ("own",
// disarmed once the file has room) or another's ("other"): then the history is compacted first.
func (d *defragger) defragment(ctx context.Context, token string, st *clientv3.StatusResponse, members []api.Member, r *api.Report, noSpace string) error {
	// Said before it starts: the hook keeps this member's turn while it runs, and asks no other.
	running := *r
	running.Defragging = token
	d.rep.report(ctx, running, true)

	self := st.Header.MemberId
	if st.Leader == self && members != nil {
		// A defragmenting member blocks its reads and writes: a leader hands over first.
		to, err := d.handOver(ctx, members, d.etcd.Health(ctx, members), api.FormatID(self), nil)
		switch {
		case errors.Is(err, errNoTransferee) && len(members) == 1:
			// The only member: nobody to hand over to, and nobody else to serve meanwhile.
		case errors.Is(err, errNoTransferee):
			return fmt.Errorf("%w: not defragmenting the leader", err)
		case err != nil:
			return err
		default:
			d.log.Info("moved leadership away before defragmenting", "to", to)
		}
	}
	if noSpace != "" {
		// Under NOSPACE (the alarm stops writes cluster-wide) the history is what fills the files: compact
		// it so that the defragmentation gives the space back (the first member's turn does it).
		if err := d.etcd.Compact(ctx, d.cfg.ClientURL, st.Header.Revision); err != nil {
			return err
		}
	}
	start, before := time.Now(), st.DbSize
	if err := d.etcd.Defragment(ctx, d.cfg.ClientURL, defragTimeout); err != nil {
		return err
	}
	took := time.Since(start)
	after := before
	if st2, err := d.etcd.Status(ctx, d.cfg.ClientURL); err == nil {
		after = st2.DbSize
		r.DBSize, r.DBSizeInUse = st2.DbSize, st2.DbSizeInUse
	}
	d.done, d.last = token, time.Now().UTC().Format(time.RFC3339)
	outcome := ""
	if noSpace != "" {
		d.noSpaceAt = time.Now()
		d.noSpaceStuck = api.OverQuota(after, quotaOf(d.cfg.EtcdCommand))
		switch {
		case d.noSpaceStuck:
			outcome = "; the file is still at the quota (the data itself fills it): delete data or raise quota-backend-bytes"
		case noSpace == "own":
			if err := d.disarm(ctx, self); err != nil {
				return err
			}
			outcome = "; NOSPACE disarmed"
		}

	}
	d.log.Info("defragmented", "pass", token, "before", before, "after", after, "took", took.String())
	d.event(EventDefragmented, "Defragment", d.noSpaceStuck && noSpace != "", "defragmented for pass %s in %s: %d -> %d bytes%s", token, took.Round(time.Millisecond), before, after, outcome)
	return nil
}

// isSpace says whether token is a space pass (api.SpacePass).
func isSpace(token string) bool {
	_, ok := api.ParseSpacePass(token)
	return ok
}

// spaceLine is the line of the last space pass asked, the default before one.
func (d *defragger) spaceLine() int32 {
	if d.spacePct > 0 {
		return d.spacePct
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
func (d *defragger) spaceDefrag(ctx context.Context, token string, st *clientv3.StatusResponse, members []api.Member, r *api.Report) error {
	pct, _ := api.ParseSpacePass(token)
	d.spacePct = pct
	quota := quotaOf(d.cfg.EtcdCommand)
	if !api.SpaceWantsDefrag(st.DbSize, st.DbSizeInUse, quota, pct) || (d.spaceStuck && time.Since(d.spaceAt) < defragRetry) {
		return nil
	}
	d.spaceAt = time.Now()
	if keep, ok := revisionRetention(d.cfg.EtcdCommand); ok && st.Header.Revision > keep {
		if err := d.etcd.Compact(ctx, d.cfg.ClientURL, st.Header.Revision-keep); err != nil {
			return err
		}
	}
	if err := d.defragment(ctx, token, st, members, r, ""); err != nil {
		return err
	}
	d.spaceStuck = api.SpaceWantsDefrag(r.DBSize, r.DBSizeInUse, quota, pct)
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
func (d *defragger) quotaChanged(reported, now int64) {
	if d.quotaRead {
		return
	}
	d.quotaRead = true
	if reported <= 0 || now <= 0 || reported == now {
		return
	}
	verb := "raised"
	if now < reported {
		verb = "lowered"
	}
	d.log.Info("etcd runs with another backend quota", "from", reported, "to", now)
	d.event(EventQuotaChanged, "Restart", false, "backend quota %s from %d to %d bytes (spec.maintenance.space, or spec.options quota-backend-bytes)", verb, reported, now)
}
