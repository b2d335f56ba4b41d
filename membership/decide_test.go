package membership

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdhook/etcdhook/api"
)

func TestDecideStart(t *testing.T) {
	const me, other = "http://m1:2380", "http://m0:2380"
	bound := &Binding{ClusterUID: "p"}
	data := func(id uint64) DataFacts {
		return DataFacts{Present: true, MemberID: id, ClusterID: 0xc, Binding: bound}
	}
	list := []api.Member{{ID: api.FormatID(1), PeerURL: other, Started: true, Name: "m0"}, {ID: api.FormatID(2), PeerURL: me, Started: true, Name: "m1"}}
	static := []api.Member{{Name: "m0", PeerURL: other}, {Name: "m1", PeerURL: me}, {Name: "m2", PeerURL: "http://m2:2380"}}
	for _, tc := range []struct {
		name string
		f    StartFacts
		want Action
	}{
		{"no Lease intent yet", StartFacts{}, Wait},
		{"seed, nothing anywhere", StartFacts{Intent: "member", Seed: true}, StartNew},
		{"not the seed, not bootstrapped", StartFacts{Intent: "member"}, Wait},
		{"seed mark but cluster known: never new", StartFacts{Intent: "member", Seed: true, Bootstrapped: true, Members: list[:1]}, Wait},
		{"own data, nobody answers (full restart)", StartFacts{Intent: "member", Bootstrapped: true, ClusterID: 0xc, Data: data(2)}, StartExisting},
		{"own data, still a member", StartFacts{Intent: "member", Bootstrapped: true, ClusterID: 0xc, Data: data(2), Members: list}, StartExisting},
		{"own data of a removed member", StartFacts{Intent: "member", Bootstrapped: true, ClusterID: 0xc, Data: data(9), Members: list}, MoveAside},
		{"data of another parent", StartFacts{Intent: "member", ClusterUID: "q", Data: data(2)}, Refuse},
		{"data of another parent, adopted", StartFacts{Intent: "member", ClusterUID: "q", Adopt: true, Data: data(2)}, StartExisting},
		{"unbound data of another cluster", StartFacts{Intent: "member", ClusterUID: "p", ClusterID: 0xd, Data: DataFacts{Present: true, MemberID: 2, ClusterID: 0xc}}, Refuse},
		{"unbound data of this cluster", StartFacts{Intent: "member", ClusterUID: "p", ClusterID: 0xc, Data: DataFacts{Present: true, MemberID: 2, ClusterID: 0xc}}, StartExisting},
		{"no data, no permission", StartFacts{Intent: "member", Bootstrapped: true, Members: list[:1]}, Wait},
		{"no data, permitted, not in list", StartFacts{Intent: "member", Bootstrapped: true, JoinPermitted: true, Members: list[:1], PeerURL: me}, Join},
		{"no data, permitted, old ID started", StartFacts{Intent: "member", Bootstrapped: true, JoinPermitted: true, Members: list, PeerURL: me}, Replace},
		{"no data, permitted, learner never started", StartFacts{Intent: "member", Bootstrapped: true, JoinPermitted: true,
			Members: []api.Member{list[0], {ID: "3", PeerURL: me, Learner: true}}, PeerURL: me}, StartLearner},
		{"no data, nobody answers", StartFacts{Intent: "member", Bootstrapped: true, JoinPermitted: true}, Wait},
		{"leave, not a member", StartFacts{Intent: "leave", Data: data(9), Members: list, PeerURL: me}, Park},
		{"leave, still a member", StartFacts{Intent: "leave", Data: data(2), Members: list, PeerURL: me}, StartExisting},
		{"leave, no data", StartFacts{Intent: "leave"}, Park},
		{"leave, own data, nobody answers (2->1 shrink, leaver restarted)", StartFacts{Intent: "leave", Data: data(2)}, StartExisting},
		{"leave, foreign data, nobody answers", StartFacts{Intent: "leave", ClusterUID: "q", Data: data(2)}, Park},
		{"half-initialised data directory of ours", StartFacts{Intent: "member", Bootstrapped: true, Data: DataFacts{Partial: true, Binding: bound}, Members: list}, MoveAside},
		{"half-initialised data directory of another cluster", StartFacts{Intent: "member", Bootstrapped: true, ClusterID: 0xc, Data: DataFacts{Partial: true}, Members: list}, Refuse},
		// An intent the agent does not know acts as member: it never keeps a member from starting.
		{"unknown intent, own data, still a member", StartFacts{Intent: "Leave", Bootstrapped: true, ClusterID: 0xc, Data: data(2), Members: list}, StartExisting},
		{"unknown intent, own data, nobody answers", StartFacts{Intent: "drain", Bootstrapped: true, ClusterID: 0xc, Data: data(2)}, StartExisting},
		{"unknown intent, no data, permitted", StartFacts{Intent: "memeber", Bootstrapped: true, JoinPermitted: true, Members: list[:1], PeerURL: me}, Join},
		{"unknown intent, seed", StartFacts{Intent: "Member", Seed: true}, StartNew},
		{"unknown intent, own data of a removed member", StartFacts{Intent: "x", Bootstrapped: true, ClusterID: 0xc, Data: data(9), Members: list}, MoveAside},
		// A recovery from the freshest survivor (docs/design/19-recovery.md): only on data of the member the
		// intent names, of this EtcdCluster, once per token.
		{"recovery: survivor on its data", StartFacts{Intent: "member", Bootstrapped: true, ClusterID: 0xc, Data: data(2), Recover: api.RecoverIntent{Token: "0000000000000002@9", Role: api.RecoverSurvivor, MemberID: api.FormatID(2)}}, ForceNew},
		{"recovery: survivor already forced for the token", StartFacts{Intent: "member", Bootstrapped: true, ClusterID: 0xc,
			Data:    DataFacts{Present: true, MemberID: 2, ClusterID: 0xc, Binding: &Binding{ClusterUID: "p", Recovered: "0000000000000002@9"}},
			Recover: api.RecoverIntent{Token: "0000000000000002@9", Role: api.RecoverSurvivor, MemberID: api.FormatID(2)}}, StartExisting},
		{"recovery: fence on its data", StartFacts{Intent: "member", Bootstrapped: true, ClusterID: 0xc, Data: data(2), Recover: api.RecoverIntent{Token: "0000000000000001@9", Role: api.RecoverFence, MemberID: api.FormatID(2)}}, MoveAside},
		{"recovery: fence names another member's data", StartFacts{Intent: "member", Bootstrapped: true, ClusterID: 0xc, Data: data(2), Recover: api.RecoverIntent{Token: "0000000000000001@9", Role: api.RecoverFence, MemberID: api.FormatID(7)}}, StartExisting},
		{"recovery: survivor on data of another parent", StartFacts{Intent: "member", ClusterUID: "q", Data: data(2), Recover: api.RecoverIntent{Token: "0000000000000002@9", Role: api.RecoverSurvivor, MemberID: api.FormatID(2)}}, Refuse},
		{"recovery: fence, no data", StartFacts{Intent: "member", Bootstrapped: true, Recover: api.RecoverIntent{Token: "0000000000000001@9", Role: api.RecoverFence, MemberID: api.FormatID(2)}}, Wait},
		{"recovery: a voter answers (a quorum): never forced", StartFacts{Intent: "member", Bootstrapped: true, ClusterID: 0xc, Data: data(2), Members: list, Recover: api.RecoverIntent{Token: "0000000000000002@9", Role: api.RecoverSurvivor, MemberID: api.FormatID(2)}}, StartExisting},
		{"recovery: a voter answers: never fenced", StartFacts{Intent: "member", Bootstrapped: true, ClusterID: 0xc, Data: data(2), Members: list, Recover: api.RecoverIntent{Token: "0000000000000001@9", Role: api.RecoverFence, MemberID: api.FormatID(2)}}, StartExisting},
		{"recovery: leave wins", StartFacts{Intent: "leave", Data: data(9), Members: list, PeerURL: me, Recover: api.RecoverIntent{Token: "0000000000000009@9", Role: api.RecoverSurvivor, MemberID: api.FormatID(9)}}, Park},
		// An in-place restore retired cluster 0xc (docs/design/16-backup-restore.md §16.8).
		{"data of a replaced cluster, the restored one answers", StartFacts{Intent: "member", Bootstrapped: true, ClusterID: 0xd,
			Retired: map[uint64]bool{0xc: true}, Data: data(2), Members: list, PeerURL: me}, MoveAside},
		{"data of a replaced cluster, nobody answers", StartFacts{Intent: "member", Bootstrapped: true,
			Retired: map[uint64]bool{0xc: true}, Data: data(2), PeerURL: me}, MoveAside},
		{"unbound data of a replaced cluster", StartFacts{Intent: "member", Bootstrapped: true, ClusterID: 0xd,
			Retired: map[uint64]bool{0xc: true}, Data: DataFacts{Present: true, MemberID: 2, ClusterID: 0xc}, Members: list, PeerURL: me}, MoveAside},
		{"data of a replaced cluster ID, of another parent", StartFacts{Intent: "member", ClusterUID: "q", Bootstrapped: true,
			Retired: map[uint64]bool{0xc: true}, Data: data(2), PeerURL: me}, Refuse},
		{"data of a replaced cluster ID, bound to another ordinal", StartFacts{Intent: "member", Bootstrapped: true,
			Retired: map[uint64]bool{0xc: true}, Data: DataFacts{Present: true, MemberID: 1, ClusterID: 0xc, Binding: &Binding{ClusterUID: "p", PeerURL: other}}, PeerURL: me}, Refuse},
		{"the restored data, only replaced IDs on the Leases (dropped)", StartFacts{Intent: "member", Bootstrapped: true,
			Retired: map[uint64]bool{0xc: true}, Data: DataFacts{Present: true, MemberID: 7, ClusterID: 0xd, Binding: bound}, PeerURL: me}, StartExisting},
		// A static creation (docs/design/07-steps.md §7.1): every member starts together, only while no
		// cluster ID is known and no voter answers; a listed voter that never started starts on the list.
		{"static, nothing anywhere", StartFacts{Intent: "member", Static: static}, StartStatic},
		{"static, no intent yet", StartFacts{Static: static}, Wait},
		{"static mark, cluster ID known, nobody answers: never new", StartFacts{Intent: "member", Static: static, Bootstrapped: true, ClusterID: 0xc}, Wait},
		{"static mark, others formed, listed and never started", StartFacts{Intent: "member", Static: static, Bootstrapped: true, ClusterID: 0xc,
			Members: []api.Member{list[0], {ID: "3", PeerURL: me}}}, StartListed},
		{"listed voter never started, no mark, no permission", StartFacts{Intent: "member", Bootstrapped: true, ClusterID: 0xc,
			Members: []api.Member{list[0], {ID: "3", PeerURL: me}}}, StartListed},
		{"static mark, own data lost after it started: replaced under a permission", StartFacts{Intent: "member", Static: static, Bootstrapped: true,
			JoinPermitted: true, ClusterID: 0xc, Members: list}, Replace},
		{"static mark, own data lost after it started, no permission", StartFacts{Intent: "member", Static: static, Bootstrapped: true,
			ClusterID: 0xc, Members: list}, Wait},
		{"static mark, own data", StartFacts{Intent: "member", Static: static, Data: data(2), ClusterID: 0xc}, StartExisting},
		{"static mark, foreign data", StartFacts{Intent: "member", Static: static, ClusterUID: "q", Data: data(2)}, Refuse},
		{"static mark, leave", StartFacts{Intent: "leave", Static: static}, Park},
		{"data bound to another ordinal", StartFacts{Intent: "member", Bootstrapped: true, ClusterID: 0xc,
			Data: DataFacts{Present: true, MemberID: 1, ClusterID: 0xc, Binding: &Binding{ClusterUID: "p", PeerURL: other}}, Members: list}, Refuse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.f.ClusterUID == "" {
				tc.f.ClusterUID = "p"
			}
			if tc.f.PeerURL == "" {
				tc.f.PeerURL = me
			}
			d := DecideStart(tc.f)
			require.Equal(t, tc.want.String(), d.Action.String(), d.String())
		})
	}
}

func TestClassify(t *testing.T) {
	timeout := status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	learner := errors.New("etcdserver: rpc not supported for learner")
	for _, tc := range []struct {
		op   Op
		err  error
		want Outcome
	}{
		{OpAdd, nil, Done},
		{OpAdd, rpctypes.ErrUnhealthy, Retry},
		{OpAdd, rpctypes.ErrTooManyLearners, Retry},
		{OpAdd, rpctypes.ErrMemberNotFound, Retry},
		{OpAdd, rpctypes.ErrPeerURLExist, Done},
		{OpAdd, rpctypes.ErrMemberExist, Done},
		{OpAdd, timeout, Unknown},
		{OpRemove, rpctypes.ErrMemberNotFound, Done},
		{OpRemove, rpctypes.ErrUnhealthy, Retry},
		{OpRemove, rpctypes.ErrMemberNotEnoughStarted, Failed},
		{OpRemove, rpctypes.ErrTimeout, Unknown},
		{OpPromote, rpctypes.ErrMemberLearnerNotReady, Retry},
		{OpPromote, rpctypes.ErrMemberNotLearner, Done},
		{OpPromote, rpctypes.ErrMemberNotFound, Done},
		{OpPromote, learner, Retry},
		{OpPromote, errors.New("boom"), Failed},
	} {
		require.Equal(t, tc.want.String(), Classify(tc.op, tc.err).String(), "%v %v", tc.op, tc.err)
	}
}

func TestQuorumAllows(t *testing.T) {
	ms := []api.Member{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "l", Learner: true}}
	up := func(ids ...string) map[string]*clientv3.StatusResponse {
		out := map[string]*clientv3.StatusResponse{}
		for _, id := range ids {
			out[id] = &clientv3.StatusResponse{}
		}
		return out
	}
	require.NoError(t, QuorumAllows(ms, up("a", "b", "c"), "c"))
	require.Error(t, QuorumAllows(ms, up("a", "b"), "a"), "a healthy one while another is down")
	require.NoError(t, QuorumAllows(ms, up("a", "b"), "c"), "the down one")
	require.NoError(t, QuorumAllows(ms, up(), "l"), "a learner always")
	require.Error(t, QuorumAllows(ms[:2], up("a"), "b"), "two voters, one down")
	require.Error(t, QuorumAllows(ms[:1], up("a"), "a"), "never the last voter")
}

// A member is the same peer under either scheme: the claim Job must not delete the volume of a member
// whose peer URL changed scheme.
func TestSamePeer(t *testing.T) {
	require.True(t, samePeer("https://a-1.a-peer.ns.svc:2380", "http://a-1.a-peer.ns.svc:2380"))
	require.True(t, samePeer("http://a-1.a-peer.ns.svc:2380", "http://a-1.a-peer.ns.svc:2380"))
	require.False(t, samePeer("https://a-1.a-peer.ns.svc:2380", "https://a-2.a-peer.ns.svc:2380"))
}
