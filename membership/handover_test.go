package membership

import (
	"slices"
	"testing"
	"time"

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
		{"a roll: the pod restarted before this one, though behind", all, restartedBefore("etcd-1"), "c"},
		{"a roll: none restarted before, the most of the log", map[string]*clientv3.StatusResponse{"b": st(9)}, restartedBefore("etcd-1"), "b"},
		{"a roll from the top: none restarted before", all, restartedBefore("etcd-3"), "b"},
		{"a leave: a pod that stays", all, staysLongest("etcd-1"), "b"},
		{"a leave: none stays healthy, the others still", map[string]*clientv3.StatusResponse{"c": st(1)}, staysLongest("etcd-1"), "c"},
		{"names without ordinals: no preference", all, restartedBefore("member"), "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, transferee(members, tc.healthy, "a", tc.rank))
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
	require.Equal(t, "e0", transferee(members, healthy, "e4", staysLongest("etcd-4")))
	delete(healthy, "e0")
	require.Equal(t, "e1", transferee(members, healthy, "e4", staysLongest("etcd-4")))
}

func TestOrdinal(t *testing.T) {
	for name, want := range map[string]int{"etcd-2": 2, "my-etcd-10": 10, "m0": 0, "etcd": -1, "": -1, "etcd-2x": -1} {
		require.Equal(t, want, ordinal(name), name)
	}
}

// A leader whose pod is deleted (a roll) hands leadership over while its etcd still serves, before its
// drain and its stop (issue 28): its stop is then a follower's, and etcd's own transfer at the stop,
// which drops the proposals forwarded to it meanwhile, does not happen with the clients just moved.
func TestMembershipLeaderStopHandsOver(t *testing.T) {
	forEachVersionParallel(t, func(t *testing.T, v string) {
		c := newCluster(t, v, 3)
		c.terminatingWait = 2 * time.Second
		var w *twriter
		c.bootstrap(&w, 3)
		w.Step("the leader's pod deleted")
		ids := []string{c.memberID(0), c.memberID(1), c.memberID(2)}
		old := c.leader()
		li := slices.Index(ids, old)
		require.GreaterOrEqual(t, li, 0, "the leader %s is one of the three", old)
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- c.stop(li) }()
		// While the stopping member drains, its etcd still answers: it must follow another leader by then.
		var movedAfter time.Duration
		for movedAfter == 0 {
			select {
			case err := <-done:
				require.NoError(t, err)
				t.Fatalf("etcd of the old leader %s stopped before it followed another leader", old)
			case <-time.After(20 * time.Millisecond):
			}
			if l := c.tryLeader(li); l != "" && l != old {
				movedAfter = time.Since(start)
				if li < 2 {
					// A roll restarts the pods from the highest ordinal down: one above has restarted already.
					require.Greater(t, slices.Index(ids, l), li, "leadership goes to a pod restarted before this one")
				}
			}
		}
		require.NoError(t, <-done)
		stopped := time.Since(start)
		w.Step("the old leader back")
		c.start(li, 0)
		c.waitFor("three voters", stepMax, func() bool { return c.running(0, 1, 2) && c.voters(0, 1, 2) })
		w.Verify(t)
		record(t, "leader's pod deleted: leadership handed over "+movedAfter.Round(10*time.Millisecond).String()+
			" after SIGTERM, etcd stopped "+stopped.Round(10*time.Millisecond).String()+" after it (drain 2s); failed writes in the step: "+
			itoa(w.Failed("the leader's pod deleted"))+"\n")
	})
}
