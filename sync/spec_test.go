package sync

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

func TestValidateReasons(t *testing.T) {
	base := func() api.ClusterSpec { return api.Defaulted(api.ClusterSpec{}) }
	for _, tc := range []struct {
		name   string
		edit   func(*api.ClusterSpec)
		cname  string
		reason string
	}{
		{"defaults are valid", func(*api.ClusterSpec) {}, "demo", ""},
		{"size 0", func(s *api.ClusterSpec) { s.Size = ptr(int32(0)) }, "demo", "InvalidSize"},
		{"size 10", func(s *api.ClusterSpec) { s.Size = ptr(int32(10)) }, "demo", "InvalidSize"},
		{"size 9", func(s *api.ClusterSpec) { s.Size = ptr(int32(9)) }, "demo", ""},
		{"v prefix", func(s *api.ClusterSpec) { s.Version = "v3.6.16" }, "demo", "InvalidVersion"},
		{"3.4", func(s *api.ClusterSpec) { s.Version = "3.4.30" }, "demo", "UnsupportedVersion"},
		{"3.5.10 lacks livez", func(s *api.ClusterSpec) { s.Version = "3.5.10" }, "demo", "UnsupportedVersion"},
		{"3.5.11", func(s *api.ClusterSpec) { s.Version = "3.5.11" }, "demo", ""},
		{"3.8", func(s *api.ClusterSpec) { s.Version = "3.8.0" }, "demo", "UnsupportedVersion"},
		{"unsafe option", func(s *api.ClusterSpec) { s.Options = map[string]string{"unsafe-no-fsync": "true"} }, "demo", "UnsafeOption"},
		{"experimental option", func(s *api.ClusterSpec) { s.Options = map[string]string{"experimental-initial-corrupt-check": "true"} }, "demo", "UnsafeOption"},
		{"peer suffix", func(s *api.ClusterSpec) {}, "a-peer", "InvalidName"},
		{"repository with tag", func(s *api.ClusterSpec) { s.Repository = "quay.io/coreos/etcd:v3.6.16" }, "demo", "InvalidRepository"},
		{"registry with port", func(s *api.ClusterSpec) { s.Repository = "registry.local:5000/etcd" }, "demo", ""},
		{"emptyDir with class", func(s *api.ClusterSpec) {
			s.Storage.EmptyDir = &corev1EmptyDir
			s.Storage.StorageClassName = ptr("x")
		}, "demo", "InvalidStorage"},
		{"tls cert outlives CA", func(s *api.ClusterSpec) {
			s.Security.TLS.BuiltIn.CADuration = &metav1.Duration{Duration: 48 * time.Hour}
			s.Security.TLS.BuiltIn.CertDuration = &metav1.Duration{Duration: 72 * time.Hour}
		}, "demo", "InvalidTLS"},
		{"tls cert too short", func(s *api.ClusterSpec) {
			s.Security.TLS.BuiltIn.CertDuration = &metav1.Duration{Duration: time.Minute}
		}, "demo", "InvalidTLS"},
		{"tls rotation grace too long", func(s *api.ClusterSpec) {
			s.Security.TLS.BuiltIn.RotationGrace = &metav1.Duration{Duration: 2 * time.Hour}
		}, "demo", "InvalidTLS"},
		{"tls rotation grace none", func(s *api.ClusterSpec) {
			s.Security.TLS.BuiltIn.RotationGrace = &metav1.Duration{}
		}, "demo", ""},
		{"tls off", func(s *api.ClusterSpec) { s.Security.TLS.Enabled = ptr(false) }, "demo", ""},
		{"compaction revision", func(s *api.ClusterSpec) {
			s.Maintenance.Compaction = api.CompactionSpec{Mode: "revision", Retention: "1000"}
		}, "demo", ""},
		{"compaction bad mode", func(s *api.ClusterSpec) { s.Maintenance.Compaction.Mode = "hourly" }, "demo", "InvalidCompaction"},
		{"compaction bad duration", func(s *api.ClusterSpec) { s.Maintenance.Compaction.Retention = "soon" }, "demo", "InvalidCompaction"},
		{"compaction zero", func(s *api.ClusterSpec) { s.Maintenance.Compaction.Retention = "0s" }, "demo", "InvalidCompaction"},
		{"compaction hours as number", func(s *api.ClusterSpec) { s.Maintenance.Compaction.Retention = "5" }, "demo", ""},
		// etcd reads 0 as no compactor at all, and overflows hours past 2.5 million into a negative period.
		{"compaction zero hours", func(s *api.ClusterSpec) { s.Maintenance.Compaction.Retention = "0" }, "demo", "InvalidCompaction"},
		{"compaction overflowing hours", func(s *api.ClusterSpec) { s.Maintenance.Compaction.Retention = "3000000" }, "demo", "InvalidCompaction"},
		{"compaction over a year", func(s *api.ClusterSpec) { s.Maintenance.Compaction.Retention = "8761h" }, "demo", "InvalidCompaction"},
		{"compaction a year", func(s *api.ClusterSpec) { s.Maintenance.Compaction.Retention = "8760" }, "demo", ""},
		{"compaction under a minute", func(s *api.ClusterSpec) { s.Maintenance.Compaction.Retention = "30s" }, "demo", "InvalidCompaction"},
		{"compaction zero from options", func(s *api.ClusterSpec) {
			s.Maintenance.Compaction = api.CompactionSpec{}
			s.Options = map[string]string{"auto-compaction-retention": "0"}
			*s = api.Defaulted(*s)
		}, "demo", "InvalidCompaction"},
		{"compaction revisions past the bound", func(s *api.ClusterSpec) {
			s.Maintenance.Compaction = api.CompactionSpec{Mode: "revision", Retention: "10000000000000"}
		}, "demo", "InvalidCompaction"},
		{"compaction revision not a number", func(s *api.ClusterSpec) {
			s.Maintenance.Compaction = api.CompactionSpec{Mode: "revision", Retention: "1h"}
		}, "demo", "InvalidCompaction"},
		{"compaction in options and spec", func(s *api.ClusterSpec) { s.Options = map[string]string{"auto-compaction-retention": "2h"} }, "demo", "ManagedOption"},
		{"managed option", func(s *api.ClusterSpec) { s.Options = map[string]string{"data-dir": "/x"} }, "demo", "ManagedOption"},
		{"option with dashes", func(s *api.ClusterSpec) { s.Options = map[string]string{"--snapshot-count": "1"} }, "demo", "InvalidOption"},
		{"multi-line option", func(s *api.ClusterSpec) { s.Options = map[string]string{"log-level": "info\n--force-new-cluster"} }, "demo", "InvalidOption"},
		{"free option", func(s *api.ClusterSpec) { s.Options = map[string]string{"snapshot-count": "10000"} }, "demo", ""},
		{"timeout too small", func(s *api.ClusterSpec) { s.Timeouts.DeadMemberSeconds = ptr(int32(5)) }, "demo", "InvalidTimeout"},
		{"name too long", func(*api.ClusterSpec) {}, "a-very-long-cluster-name-that-exceeds-forty", "InvalidName"},
		{"name not a label", func(*api.ClusterSpec) {}, "Demo", "InvalidName"},
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
			f.members = append(f.members, &memberView{Member: api.Member{ID: api.FormatID(uint64(i + 1))}, healthy: i < healthy})
		}
		target := f.members[voters-1]
		if targetHealthy {
			target = f.members[0]
		}
		if learner {
			target = &memberView{Member: api.Member{ID: "l", Learner: true}}
		}
		f.countVoters()
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
		{2, 1, false, false, false}, // 2 voters, 1 down: no removal (docs/design/11-failure-sequences.md §11)
		{2, 2, true, false, true},   // 2 -> 1 when both healthy
		{1, 1, true, false, false},  // never the last voter
		{5, 3, false, false, true},  // 3 of 5, remove a dead: 3 of 4
		{4, 2, false, false, false}, // 2 of 4 is no quorum
		{3, 1, false, true, true},   // a learner always
	} {
		require.Equal(t, tc.ok, mk(tc.voters, tc.healthy, tc.targetHealthy, tc.learner), "%+v", tc)
	}
}

func TestBackoff(t *testing.T) {
	require.Equal(t, 30e9, float64(backoff(1)))
	require.Equal(t, 60e9, float64(backoff(2)))
	require.Equal(t, 600e9, float64(backoff(9)))
}
