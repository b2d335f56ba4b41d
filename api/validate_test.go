package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
		{"size 0", func(s *ClusterSpec) { s.Size = ptrTo(int32(0)) }, "demo", "InvalidSize"},
		{"size 10", func(s *ClusterSpec) { s.Size = ptrTo(int32(10)) }, "demo", "InvalidSize"},
		{"size 9", func(s *ClusterSpec) { s.Size = ptrTo(int32(9)) }, "demo", ""},
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
			s.Storage.EmptyDir = &corev1.EmptyDirVolumeSource{}
			s.Storage.StorageClassName = ptrTo("x")
		}, "demo", "InvalidStorage"},
		{"tls cert outlives CA", func(s *ClusterSpec) {
			s.Security.TLS.BuiltIn.CADuration = &metav1.Duration{Duration: 48 * time.Hour}
			s.Security.TLS.BuiltIn.CertDuration = &metav1.Duration{Duration: 72 * time.Hour}
		}, "demo", "InvalidTLS"},
		{"tls cert too short", func(s *ClusterSpec) {
			s.Security.TLS.BuiltIn.CertDuration = &metav1.Duration{Duration: time.Minute}
		}, "demo", "InvalidTLS"},
		{"tls rotation grace too long", func(s *ClusterSpec) {
			s.Security.TLS.BuiltIn.RotationGrace = &metav1.Duration{Duration: 2 * time.Hour}
		}, "demo", "InvalidTLS"},
		{"tls rotation grace none", func(s *ClusterSpec) {
			s.Security.TLS.BuiltIn.RotationGrace = &metav1.Duration{}
		}, "demo", ""},
		{"tls off", func(s *ClusterSpec) { s.Security.TLS.Enabled = ptrTo(false) }, "demo", ""},
		{"compaction revision", func(s *ClusterSpec) {
			s.Maintenance.Compaction = CompactionSpec{Mode: "revision", Retention: "1000"}
		}, "demo", ""},
		{"compaction bad mode", func(s *ClusterSpec) { s.Maintenance.Compaction.Mode = "hourly" }, "demo", "InvalidCompaction"},
		{"compaction bad duration", func(s *ClusterSpec) { s.Maintenance.Compaction.Retention = "soon" }, "demo", "InvalidCompaction"},
		{"compaction zero", func(s *ClusterSpec) { s.Maintenance.Compaction.Retention = "0s" }, "demo", "InvalidCompaction"},
		{"compaction hours as number", func(s *ClusterSpec) { s.Maintenance.Compaction.Retention = "5" }, "demo", ""},
		// etcd reads 0 as no compactor at all, and overflows hours past 2.5 million into a negative period.
		{"compaction zero hours", func(s *ClusterSpec) { s.Maintenance.Compaction.Retention = "0" }, "demo", "InvalidCompaction"},
		{"compaction overflowing hours", func(s *ClusterSpec) { s.Maintenance.Compaction.Retention = "3000000" }, "demo", "InvalidCompaction"},
		{"compaction over a year", func(s *ClusterSpec) { s.Maintenance.Compaction.Retention = "8761h" }, "demo", "InvalidCompaction"},
		{"compaction a year", func(s *ClusterSpec) { s.Maintenance.Compaction.Retention = "8760" }, "demo", ""},
		{"compaction under a minute", func(s *ClusterSpec) { s.Maintenance.Compaction.Retention = "30s" }, "demo", "InvalidCompaction"},
		{"compaction zero from options", func(s *ClusterSpec) {
			s.Maintenance.Compaction = CompactionSpec{}
			s.Options = map[string]string{"auto-compaction-retention": "0"}
			*s = Defaulted(*s)
		}, "demo", "InvalidCompaction"},
		{"compaction revisions past the bound", func(s *ClusterSpec) {
			s.Maintenance.Compaction = CompactionSpec{Mode: "revision", Retention: "10000000000000"}
		}, "demo", "InvalidCompaction"},
		{"compaction revision not a number", func(s *ClusterSpec) {
			s.Maintenance.Compaction = CompactionSpec{Mode: "revision", Retention: "1h"}
		}, "demo", "InvalidCompaction"},
		{"compaction in options and spec", func(s *ClusterSpec) { s.Options = map[string]string{"auto-compaction-retention": "2h"} }, "demo", "ManagedOption"},
		{"managed option", func(s *ClusterSpec) { s.Options = map[string]string{"data-dir": "/x"} }, "demo", "ManagedOption"},
		{"space defaults", func(s *ClusterSpec) { s.Maintenance.Space = &SpaceSpec{} }, "demo", ""},
		{"space raising", func(s *ClusterSpec) {
			s.Maintenance.Space = &SpaceSpec{ActAtPercent: ptr.To(int32(60)), MaxQuota: ptr.To(resource.MustParse("8Gi")), MaxStorage: ptr.To(resource.MustParse("20Gi"))}
		}, "demo", ""},
		{"space line too high", func(s *ClusterSpec) { s.Maintenance.Space = &SpaceSpec{ActAtPercent: ptr.To(int32(95))} }, "demo", "InvalidSpace"},
		{"space max below the quota", func(s *ClusterSpec) {
			s.Maintenance.Space = &SpaceSpec{MaxQuota: ptr.To(resource.MustParse("1Gi"))}
		}, "demo", "InvalidSpace"},
		{"space max past 8 GiB", func(s *ClusterSpec) {
			s.Maintenance.Space = &SpaceSpec{MaxQuota: ptr.To(resource.MustParse("9Gi"))}
		}, "demo", "InvalidSpace"},
		{"space max without a quota", func(s *ClusterSpec) {
			s.Options = map[string]string{"quota-backend-bytes": "-1"}
			s.Maintenance.Space = &SpaceSpec{MaxQuota: ptr.To(resource.MustParse("4Gi"))}
		}, "demo", "InvalidSpace"},
		{"space storage without a quota max", func(s *ClusterSpec) {
			s.Maintenance.Space = &SpaceSpec{MaxStorage: ptr.To(resource.MustParse("20Gi"))}
		}, "demo", "InvalidSpace"},
		{"space storage below the size", func(s *ClusterSpec) {
			s.Maintenance.Space = &SpaceSpec{MaxQuota: ptr.To(resource.MustParse("4Gi")), MaxStorage: ptr.To(resource.MustParse("1Gi"))}
		}, "demo", "InvalidSpace"},
		{"space storage on emptyDir", func(s *ClusterSpec) {
			s.Storage = StorageSpec{EmptyDir: &corev1.EmptyDirVolumeSource{}}
			s.Maintenance.Space = &SpaceSpec{MaxQuota: ptr.To(resource.MustParse("4Gi")), MaxStorage: ptr.To(resource.MustParse("20Gi"))}
		}, "demo", "InvalidSpace"},
		{"option with dashes", func(s *ClusterSpec) { s.Options = map[string]string{"--snapshot-count": "1"} }, "demo", "InvalidOption"},
		{"multi-line option", func(s *ClusterSpec) { s.Options = map[string]string{"log-level": "info\n--force-new-cluster"} }, "demo", "InvalidOption"},
		{"free option", func(s *ClusterSpec) { s.Options = map[string]string{"snapshot-count": "10000"} }, "demo", ""},
		{"timeout too small", func(s *ClusterSpec) { s.Timeouts.DeadMemberSeconds = ptrTo(int32(5)) }, "demo", "InvalidTimeout"},
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
