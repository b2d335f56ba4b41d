package membership

import (
	"context"
	"time"

	"github.com/etcdhook/etcdhook/api"
)

// learnerJoin is the learner this agent added (or took over) and started, until it is promoted: its ID
// and the voters to ask, from the member list of the add.
type learnerJoin struct {
	id     uint64
	voters []string
}

func (j *learnerJoin) begin(id string, members []api.Member) {
	n, err := api.ParseID(id)
	if err != nil {
		*j = learnerJoin{}
		return
	}
	*j = learnerJoin{id: n, voters: voterEndpoints(members, id)}
}

// earlyPromoteWait bounds one promotion asked before etcd answers: the look after it must still come
// soon (an exit, the pod's deletion).
const earlyPromoteWait = time.Second

// promoteEarly asks the voters to promote the learner this agent started while its own etcd does not
// answer yet (docs/design/07-steps.md §7.4). etcd's client port opens only once the new member has
// published itself through raft, which after a snapshot from the leader can take seconds (etcd retries
// the publish only after its request timeout), while the leader already counts the learner as caught
// up: etcd itself refuses a learner that is not (ErrLearnerNotReady, a refusal that passes, §8.14), so
// this is the same promotion, asked as soon as etcd allows it. Not while the Lease asks the member to
// leave or to take part in a recovery: those are decided on a look at a running etcd.
func (a *Agent) promoteEarly(ctx context.Context) {
	j := a.joining
	if j.id == 0 || len(j.voters) == 0 {
		return
	}
	in, err := a.Store.Read(ctx)
	if err != nil || leaving(in) || in.Recover.Token != "" {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, earlyPromoteWait)
	err = a.Etcd.Promote(pctx, j.voters, j.id)
	cancel()
	if err != nil {
		return // not caught up yet, or not ours to decide now: the next look asks again
	}
	member := api.FormatID(j.id)
	a.promoted(member)
	a.Log.Info("promotion accepted", "member", member, "before", "etcd answered")
	a.env.event(EventMemberPromoted, "Promote", false, "learner %s promoted to voter", member)
}

// promoted: learner id is a voter now. The next look comes at once: it reports the voter, which is what
// the hook waits for before the next step (a look later, 250 ms, was a tenth of a +1 at the floor).
func (a *Agent) promoted(id string) {
	a.joining = learnerJoin{}
	a.lookNow = true
	a.promotedID = id
}

// nextLook is the wait before the next look at a running etcd: none right after a promotion.
func (a *Agent) nextLook(started time.Time) time.Duration {
	if a.lookNow {
		a.lookNow = false
		return 0
	}
	return a.env.nextLook(started, a.rep.settled())
}
