package sync

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidateReasons(t *testing.T) {
	base := func() ClusterSpec { return Defaulted(ClusterSpec{}) }
	for _, tc := range []struct {
		name   string
		edit   func(*ClusterSpec)
		cname  string
		reason string
	}{
		{"defaults are valid", func(*ClusterSpec) {}, "demo", ""},
		{"size 0", func(s *ClusterSpec) { s.Size = ptr(int32(0)) }, "demo", "InvalidSize"},
		{"size 10", func(s *ClusterSpec) { s.Size = ptr(int32(10)) }, "demo", "InvalidSize"},
		{"size 9", func(s *ClusterSpec) { s.Size = ptr(int32(9)) }, "demo", ""},
		{"v prefix", func(s *ClusterSpec) { s.Version = "v3.6.16" }, "demo", "InvalidVersion"},
		{"3.4", func(s *ClusterSpec) { s.Version = "3.4.30" }, "demo", "UnsupportedVersion"},
		{"3.5.10 lacks livez", func(s *ClusterSpec) { s.Version = "3.5.10" }, "demo", "UnsupportedVersion"},
		{"3.5.11", func(s *ClusterSpec) { s.Version = "3.5.11" }, "demo", ""},
		{"3.8", func(s *ClusterSpec) { s.Version = "3.8.0" }, "demo", "UnsupportedVersion"},
		{"unsafe option", func(s *ClusterSpec) { s.Options = map[string]string{"unsafe-no-fsync": "true"} }, "demo", "UnsafeOption"},
		{"experimental option", func(s *ClusterSpec) { s.Options = map[string]string{"experimental-initial-corrupt-check": "true"} }, "demo", "UnsafeOption"},
		{"peer suffix", func(s *ClusterSpec) {}, "a-peer", "InvalidName"},
		{"repository with tag", func(s *ClusterSpec) { s.Repository = "quay.io/coreos/etcd:v3.6.16" }, "demo", "InvalidRepository"},
		{"registry with port", func(s *ClusterSpec) { s.Repository = "registry.local:5000/etcd" }, "demo", ""},
		{"emptyDir with class", func(s *ClusterSpec) {
			s.Storage.EmptyDir = &corev1EmptyDir
			s.Storage.StorageClassName = ptr("x")
		}, "demo", "InvalidStorage"},
		{"tls", func(s *ClusterSpec) { s.Security.TLS.Enabled = true }, "demo", "TLSNotSupported"},
		{"managed option", func(s *ClusterSpec) { s.Options = map[string]string{"data-dir": "/x"} }, "demo", "ManagedOption"},
		{"option with dashes", func(s *ClusterSpec) { s.Options = map[string]string{"--snapshot-count": "1"} }, "demo", "InvalidOption"},
		{"multi-line option", func(s *ClusterSpec) { s.Options = map[string]string{"log-level": "info\n--force-new-cluster"} }, "demo", "InvalidOption"},
		{"free option", func(s *ClusterSpec) { s.Options = map[string]string{"snapshot-count": "10000"} }, "demo", ""},
		{"timeout too small", func(s *ClusterSpec) { s.Timeouts.DeadMemberSeconds = ptr(int32(5)) }, "demo", "InvalidTimeout"},
		{"name too long", func(*ClusterSpec) {}, "a-very-long-cluster-name-that-exceeds-forty", "InvalidName"},
		{"name not a label", func(*ClusterSpec) {}, "Demo", "InvalidName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.edit(&s)
			ps := Validate(tc.cname, s)
			if tc.reason == "" {
				require.Empty(t, ps)
				return
			}
			require.NotEmpty(t, ps)
			require.Equal(t, tc.reason, ps[0].Reason, ps[0].Message)
		})
	}
}

func TestUpgradePath(t *testing.T) {
	v := func(s string) SemVer {
		out, err := ParseVersion(s)
		require.NoError(t, err)
		return out
	}
	for _, tc := range []struct {
		running []string
		to      string
		ok      bool
	}{
		{[]string{"3.6.15"}, "3.6.16", true},
		{[]string{"3.6.16"}, "3.6.16", true},
		{[]string{"3.6.16"}, "3.6.15", false},
		{[]string{"3.5.21"}, "3.6.0", true},
		{[]string{"3.5.20"}, "3.6.16", true},
		{[]string{"3.5.19"}, "3.6.16", false},
		{[]string{"3.5.21", "3.6.16"}, "3.6.16", true},
		{[]string{"3.5.21", "3.6.16"}, "3.5.22", false},
		{[]string{"3.5.21"}, "3.7.0", false},
		{[]string{"3.6.10"}, "3.7.3", false},
		{[]string{"3.6.11"}, "3.7.3", true},
		{[]string{"3.6.16"}, "3.7.3", true},
		{[]string{"3.6.16", "3.7.3"}, "3.6.16", false},
		{[]string{"3.5.21", "3.5.30"}, "3.5.25", false},
	} {
		var run []SemVer
		for _, r := range tc.running {
			run = append(run, v(r))
		}
		msg := upgradePath(run, v(tc.to))
		require.Equal(t, tc.ok, msg == "", "%v -> %s: %s", tc.running, tc.to, msg)
	}
}

func TestQuorumRule(t *testing.T) {
	mk := func(voters, healthy int, targetHealthy, learner bool) bool {
		f := &facts{}
		for i := 0; i < voters; i++ {
			f.members = append(f.members, &memberView{Member: Member{ID: FormatID(uint64(i + 1))}, healthy: i < healthy})
		}
		target := f.members[voters-1]
		if targetHealthy {
			target = f.members[0]
		}
		if learner {
			target = &memberView{Member: Member{ID: "l", Learner: true}}
		}
		return (&plan{f: f}).quorumAllowsRemoving(target)
	}
	for _, tc := range []struct {
		voters, healthy int
		targetHealthy   bool
		learner         bool
		ok              bool
	}{
		{3, 3, true, false, true},   // leave from a healthy 3
		{3, 2, true, false, false},  // leave a healthy one while one is down: 1 of 2 left
		{3, 2, false, false, true},  // remove the dead one: 2 of 2 left
		{2, 1, false, false, false}, // 2 voters, 1 down: no removal (docs/design.md §11)
		{2, 2, true, false, true},   // 2 -> 1 when both healthy
		{1, 1, true, false, false},  // never the last voter
		{5, 3, false, false, true},  // 3 of 5, remove a dead: 3 of 4
		{4, 2, false, false, false}, // 2 of 4 is no quorum
		{3, 1, false, true, true},   // a learner always
	} {
		require.Equal(t, tc.ok, mk(tc.voters, tc.healthy, tc.targetHealthy, tc.learner), "%+v", tc)
	}
}

func TestNamesAndOrdinals(t *testing.T) {
	n := Names{Cluster: "demo", Namespace: "prod"}
	require.Equal(t, "http://demo-2.demo-peer.prod.svc:2380", n.PeerURL(2))
	require.Equal(t, 2, n.PeerURLOrdinal("http://demo-2.demo-peer.prod.svc:2380"))
	require.Equal(t, -1, n.PeerURLOrdinal("http://demo-2.other.prod.svc:2380"))
	require.Equal(t, -1, n.PeerURLOrdinal("http://demo-02.demo-peer.prod.svc:2380"))
	require.Equal(t, -1, n.PeerURLOrdinal("http://demox-2.demo-peer.prod.svc:2380"))
	require.Equal(t, 3, n.LeaseOrdinal("demo-3-member"))
	require.Equal(t, -1, n.LeaseOrdinal("demo-x-member"))
	require.Equal(t, 4, n.PVCOrdinal("data-demo-4"))
	require.Equal(t, "demo-rm-00000000000000ff-2", n.RemoveJob(FormatID(255), 2))
	require.LessOrEqual(t, len(Names{Cluster: "abcdefghij-abcdefghij-abcdefghij-abcdefg"}.RemoveJob(FormatID(1<<63), 99)), 63)
}

func TestReportRoundTrip(t *testing.T) {
	r := Report{MemberID: "a", ClusterID: "b", ParentUID: "u", Role: RoleLeader, Healthy: true, Version: "3.6.16", LeaderID: "a",
		Members: []Member{{ID: "b", PeerURL: "p2", Started: true}, {ID: "a", PeerURL: "p1", Started: true, Learner: true}}}
	got, err := ParseReport(r.Annotations())
	require.NoError(t, err)
	require.Equal(t, "a", got.Members[0].ID, "members are sorted by ID")
	got.Members = r.Members
	require.Equal(t, r, got)
	_, err = ParseReport(map[string]string{AnnMembers: "{broken"})
	require.Error(t, err)
	empty, err := ParseReport(map[string]string{})
	require.NoError(t, err)
	require.Nil(t, empty.Members, "no list is not an empty list")
}

func TestBackoff(t *testing.T) {
	require.Equal(t, 30e9, float64(backoff(1)))
	require.Equal(t, 60e9, float64(backoff(2)))
	require.Equal(t, 600e9, float64(backoff(9)))
}
