package membership

import (
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdhook/etcdhook/api"
)

// A leaving member stops before its removal only when the healthy others are a quorum of the current
// membership: the removal must commit without its vote.
func TestOthersKeepQuorum(t *testing.T) {
	up := &clientv3.StatusResponse{}
	members := func(n int, learner bool) []api.Member {
		var ms []api.Member
		for i := range n {
			ms = append(ms, api.Member{ID: string(rune('a' + i))})
		}
		if learner {
			ms = append(ms, api.Member{ID: "l", Learner: true})
		}
		return ms
	}
	all := func(ids ...string) map[string]*clientv3.StatusResponse {
		h := map[string]*clientv3.StatusResponse{}
		for _, id := range ids {
			h[id] = up
		}
		return h
	}
	for _, tc := range []struct {
		name    string
		members []api.Member
		healthy map[string]*clientv3.StatusResponse
		want    bool
	}{
		{"3 voters, all healthy", members(3, false), all("a", "b", "c"), true},
		{"2 voters: the other alone is no quorum of 2", members(2, false), all("a", "b"), false},
		{"3 voters, another down", members(3, false), all("a", "b"), false},
		{"5 voters, another down", members(5, false), all("a", "b", "c", "d"), true},
		{"a learner does not count", members(2, true), all("a", "b", "l"), false},
	} {
		require.Equal(t, tc.want, othersKeepQuorum(tc.members, tc.healthy, "a"), tc.name)
	}
}
