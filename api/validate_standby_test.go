package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Each bad standby input is refused with a problem naming its field; a good one passes.
func TestValidateStandby(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*ClusterSpec)
		field string // "" means valid
	}{
		{"the primary's folder", func(*ClusterSpec) {}, ""},
		{"a snapshot of the primary", func(s *ClusterSpec) {
			s.Standby.From = "s3://b/p/prod/main/20250101T000000Z-r42.db?region=eu-west-1"
		}, ""},
		{"a store's root latest (this cluster's own folder for spec.restore)", func(s *ClusterSpec) { s.Standby.From = "s3://b/latest" }, "spec.standby.from"},
		{"a file source", func(s *ClusterSpec) { s.Standby.From = "file:///b/prod/main/latest" }, "spec.standby.from"},
		{"neither latest nor a snapshot", func(s *ClusterSpec) { s.Standby.From = "s3://b/p/prod/main" }, "spec.standby.from"},
		{"no credentials", func(s *ClusterSpec) { s.Standby.CredentialsSecret = "" }, "spec.standby.credentialsSecret"},
		{"ambient credentials", func(s *ClusterSpec) {
			s.Standby.CredentialsSecret, s.Standby.AmbientCredentials = "", true
		}, ""},
		{"maxLag too short", func(s *ClusterSpec) { s.Standby.MaxLag = &metav1.Duration{Duration: time.Second} }, "spec.standby.maxLag"},
		{"with restore", func(s *ClusterSpec) { s.Restore = &RestoreSpec{From: "s3://b/p/latest", CredentialsSecret: "creds"} }, "spec.restore"},
		{"on emptyDir", func(s *ClusterSpec) { s.Storage = StorageSpec{EmptyDir: &corev1.EmptyDirVolumeSource{}} }, "emptyDir"},
		{"without TLS", func(s *ClusterSpec) { s.Security.TLS.Enabled = new(false) }, "spec.security.tls.enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ClusterSpec{Standby: &StandbySpec{From: "s3://b/p/prod/main/latest?region=eu-west-1", CredentialsSecret: "creds"}}
			tc.edit(&s)
			ps := Validate("demo", Defaulted(s))
			if tc.field == "" {
				require.Empty(t, ps)
				return
			}
			require.Len(t, ps, 1, "%v", ps)
			require.Equal(t, "InvalidStandby", ps[0].Reason)
			require.Contains(t, ps[0].Message, tc.field)
		})
	}
}

// A standby whose source is its own folder (in its backup destination or the copy) is refused; the
// same name in another namespace, or another destination, is another cluster.
func TestStandbyOwnFolder(t *testing.T) {
	n := Names{Namespace: "prod", Cluster: "main"}
	spec := func(from string) ClusterSpec {
		return ClusterSpec{
			Standby: &StandbySpec{From: from},
			Backup: &BackupSpec{Destination: "s3://b/p?region=eu-west-1",
				Copy: &BackupCopySpec{Destination: "s3://c/q?region=us-east-1"}},
		}
	}
	require.Contains(t, StandbyOwnFolder(n, spec("s3://b/p/prod/main/latest?region=eu-west-1")), "own folder")
	require.Contains(t, StandbyOwnFolder(n, spec("s3://c/q/prod/main/latest?region=us-east-1")), "own folder")
	require.Empty(t, StandbyOwnFolder(n, spec("s3://b/p/dr/main/latest?region=eu-west-1")))
	require.Empty(t, StandbyOwnFolder(n, spec("s3://other/p/prod/main/latest?region=eu-west-1")))
}

// spec.standby belongs to the creation: adding it later, removing it or changing its source is
// refused; its credentials and maxLag may change.
func TestValidateStandbyChange(t *testing.T) {
	sb := &StandbySpec{From: "s3://b/p/prod/main/latest", CredentialsSecret: "creds"}
	other := *sb
	other.CredentialsSecret, other.MaxLag = "creds-2", &metav1.Duration{Duration: 5 * time.Minute}
	moved := *sb
	moved.From = "s3://b/p/prod/other/latest"
	for _, tc := range []struct {
		name          string
		applied, next *StandbySpec
		wantImmutable bool
	}{
		{"added", nil, sb, true},
		{"removed", sb, nil, true},
		{"source changed", sb, &moved, true},
		{"credentials and maxLag changed", sb, &other, false},
		{"kept", sb, sb, false},
	} {
		ps := validateStandbyChange(&ClusterSpec{Standby: tc.applied}, ClusterSpec{Standby: tc.next})
		if !tc.wantImmutable {
			require.Empty(t, ps, tc.name)
			continue
		}
		require.Len(t, ps, 1, tc.name)
		require.Equal(t, "StandbyImmutable", ps[0].Reason, tc.name)
	}
}
