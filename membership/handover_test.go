package membership

import (
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/api"
)

func TestTransferee(t *testing.T) {
	members := []api.Member{{ID: "a", Name: "etcd-1"}, {ID: "b", Name: "etcd-0"}, {ID: "c", Name: "etcd-2"}, {ID: "d", Name: "etcd-3", Learner: true}}
	st := func(index uint64) *clientv3.StatusResponse {
		return &clientv3.StatusResponse{RaftIndex: index, Header: &pb.ResponseHeader{}}
	}
	all := map[string]*clientv3.StatusResponse{"a": st(9), "b": st(9), "c": st(8), "d": st(9)}
	for _, tc := range []struct {
		name    string
		healthy map[string]*clientv3.StatusResponse
		rank    func(api.Member) int
		want    string
	}{
		{"the voter with the most of the log", map[string]*clientv3.StatusResponse{"a": st(9), "b": st(7), "c": st(8)}, nil, "c"},
		{"never itself, even ahead", map[string]*clientv3.StatusResponse{"a": st(99), "b": st(7)}, nil, "b"},
		{"never a learner", map[string]*clientv3.StatusResponse{"a": st(9), "d": st(9)}, nil, ""},
		{"never an unhealthy voter", map[string]*clientv3.StatusResponse{"a": st(9)}, nil, ""},
		{"a tie: the first listed", map[string]*clientv3.StatusResponse{"b": st(5), "c": st(5)}, nil, "b"},
		{"a leave: a pod that stays", all, staysLongest("etcd-1"), "b"},
		{"a leave: none stays healthy, the others still", map[string]*clientv3.StatusResponse{"c": st(1)}, staysLongest("etcd-1"), "c"},
		{"names without ordinals: no preference", all, staysLongest("member"), "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, transferee(members, tc.healthy, "a", tc.rank).ID)
		})
	}
}

// A scale-down 5 -> 3 removes etcd-4, then etcd-3: the leaving leader hands over to the pod that stays
// longest, not to the next to leave, though it has more of the log.
func TestTransfereeLeaveTwice(t *testing.T) {
	members := []api.Member{{ID: "e0", Name: "etcd-0"}, {ID: "e1", Name: "etcd-1"}, {ID: "e2", Name: "etcd-2"}, {ID: "e3", Name: "etcd-3"}, {ID: "e4", Name: "etcd-4"}}
	healthy := map[string]*clientv3.StatusResponse{}
	for i, m := range members {
		healthy[m.ID] = &clientv3.StatusResponse{RaftIndex: uint64(10 + i), Header: &pb.ResponseHeader{}}
	}
	require.Equal(t, "e0", transferee(members, healthy, "e4", staysLongest("etcd-4")).ID)
	delete(healthy, "e0")
	require.Equal(t, "e1", transferee(members, healthy, "e4", staysLongest("etcd-4")).ID)
}

func TestOrdinal(t *testing.T) {
	for name, want := range map[string]int{"etcd-2": 2, "my-etcd-10": 10, "m0": 0, "etcd": -1, "": -1, "etcd-2x": -1} {
		require.Equal(t, want, ordinal(name), name)
	}
}
