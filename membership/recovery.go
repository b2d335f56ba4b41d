package membership

import (
	"errors"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/api"
)

// Recovery from the freshest survivor (docs/design/19-recovery.md), the agent's part. The hook asks one
// member to restart on its data as a one-member cluster (role survivor) once every other member that
// holds data of the cluster set it aside (role fence); the others rejoin as learners through the usual
// join. The start decision (DecideStart, StartFacts.recovery) carries both out; a running member asked
// stops etcd first.

// errRecovery: etcd was stopped for this member's part in a recovery; the start decision carries it out.
var errRecovery = errors.New("stopped for a recovery from the freshest survivor")

// recoveryPart is this member's part in a recovery as the agent carries it out.
type recoveryPart struct {
	*env
	// forcing: the recovery token etcd is being started for with --force-new-cluster ("" none).
	forcing string
	// recovered: the recovery token whose part this member carried out, reported (read back from the
	// Lease at the agent's start).
	recovered string
}

// asked says whether the Lease asks this running member (self) for a part it has not carried out yet,
// while it knows no leader (leader 0): a member of a cluster with a quorum never stops for one.
func (p *recoveryPart) asked(in Intent, self string, leader uint64) bool {
	rc := in.Recover
	return rc.Token != "" && rc.MemberID == self && rc.Token != p.recovered && leader == 0
}

// leaderless fills what a recovery plan compares while the member knows no leader: its revision and raft
// term. Written only then: with a leader they move at the write rate, and nothing compares them.
func leaderless(st *clientv3.StatusResponse, r *api.Report) {
	if st.Leader == 0 {
		r.Revision, r.RaftTerm = st.Header.Revision, int64(st.RaftTerm)
	}
}

// forcedUp records, at the first look that finds etcd up after a --force-new-cluster start, that the
// token is done: in the binding (the start decision never forces again for it) and in the report.
func (p *recoveryPart) forcedUp(b *Binding) {
	if p.forcing == "" {
		return
	}
	b.Recovered = p.forcing
	p.recovered, p.forcing = p.forcing, ""
	p.log.Info("running as a one-member cluster on this member's data", "recovery", p.recovered)
}

// fill reports the recovery this member carried out.
func (p *recoveryPart) fill(r *api.Report) {
	if p.recovered != "" {
		r.Recovered = p.recovered
	}
}
