package api

import (
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Defaults, identical to the CRD's.
const (
	DefaultSize                    = 3
	DefaultVersion                 = "3.7.3"
	DefaultRepository              = "quay.io/coreos/etcd"
	DefaultStorageSize             = "10Gi"
	DefaultLearnerPromotionSeconds = 600
	DefaultDeadMemberSeconds       = 300
	DefaultLeaveSeconds            = 120
	// MaxLearnerPromotionSeconds is the validation bound of learnerPromotionSeconds, and so the longest
	// join permission the hook ever writes.
	MaxLearnerPromotionSeconds = 86400
	// DefaultCADuration and DefaultCertDuration: the built-in CA's lifetime (5 years; rotated at 2/3,
	// docs/design/14-tls.md §14.6) and its member and client certificates' (90 days, replaced at 2/3).
	DefaultCADuration   = 5 * 365 * 24 * time.Hour
	DefaultCertDuration = 90 * 24 * time.Hour
	// DefaultCompactionMode and DefaultCompactionRetention: keep an hour of history.
	DefaultCompactionMode      = "periodic"
	DefaultCompactionRetention = "1h"
	// CertExpiringDays: a certificate in use this close to its expiry raises CertificatesExpiring.
	CertExpiringDays = 14
	// DefaultQuotaBackendBytes is etcd's own backend quota when quota-backend-bytes is unset or 0 (2 GiB,
	// the same in v3.5, v3.6 and v3.7).
	DefaultQuotaBackendBytes = 2 << 30
	// DatabaseNearQuotaPercent: a member's database this full raises DatabaseNearQuota (as the
	// monitoring component's EtcdDatabaseNearQuota alert does).
	DatabaseNearQuotaPercent = 80
	// DefaultMetricsNamespace may scrape the members' metrics port through the NetworkPolicy.
	DefaultMetricsNamespace = "monitoring"
	// DefaultDefragMinFreePercent: a scheduled pass defragments members whose file is half free.
	DefaultDefragMinFreePercent = 50
)

// QuotaBackendBytes is the backend quota etcd runs with for these options: the quota-backend-bytes
// option, etcd's default for 0 or unset, and 0 (no quota) for a negative value, which etcd reads as
// "quota disabled". ok is false when the option is not an integer.
func QuotaBackendBytes(options map[string]string) (quota int64, ok bool) {
	v, set := options["quota-backend-bytes"]
	if !set {
		return DefaultQuotaBackendBytes, true
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	switch {
	case err != nil:
		return 0, false
	case n == 0:
		return DefaultQuotaBackendBytes, true
	case n < 0:
		return 0, true
	}
	return n, true
}

// ManagedOptions are etcd flags the hook or agent sets; spec.options may not override them.
var ManagedOptions = map[string]bool{
	"name": true, "data-dir": true, "wal-dir": true, "config-file": true,
	"listen-client-urls": true, "listen-peer-urls": true, "listen-metrics-urls": true, "listen-client-http-urls": true,
	"advertise-client-urls": true, "initial-advertise-peer-urls": true,
	"initial-cluster": true, "initial-cluster-state": true, "initial-cluster-token": true,
	"discovery": true, "discovery-srv": true, "discovery-srv-name": true, "discovery-token": true, "discovery-endpoints": true,
	"force-new-cluster": true, "strict-reconfig-check": true, "max-learners": true, "experimental-max-learners": true,
	// TLS flags are the hook's: they follow spec.security.tls and the files the agent writes.
	"cert-file": true, "key-file": true, "trusted-ca-file": true, "client-cert-auth": true, "auto-tls": true,
	"peer-cert-file": true, "peer-key-file": true, "peer-trusted-ca-file": true, "peer-client-cert-auth": true,
	"peer-auto-tls": true, "client-crl-file": true, "peer-crl-file": true,
}

// Compaction flags follow spec.maintenance.compaction. They are not ManagedOptions (which the CRD
// refuses outright, and clusters set them as options before the field existed): an option naming them
// is taken as that setting when the spec sets none (Defaulted), and refused by the hook when both do.

var defaultStorageSize = resource.MustParse(DefaultStorageSize)

// Defaulted returns the spec with every CRD default applied.
func Defaulted(s ClusterSpec) ClusterSpec {
	s = *s.DeepCopy()
	if s.Size == nil {
		s.Size = ptr.To(int32(DefaultSize))
	}
	if s.Version == "" {
		s.Version = DefaultVersion
	}
	if s.Repository == "" {
		s.Repository = DefaultRepository
	}
	if s.Storage.EmptyDir == nil && s.Storage.Size == nil {
		q := defaultStorageSize.DeepCopy()
		s.Storage.Size = &q
	}
	if s.Security.TLS.Enabled == nil {
		// A new cluster: TLS on. A running cluster's unset value is the applied one (WithAppliedDefaults).
		s.Security.TLS.Enabled = ptr.To(true)
	}
	if s.Security.TLS.TLSOn() {
		if s.Security.TLS.Client.Auth == nil {
			s.Security.TLS.Client.Auth = ptr.To(true)
		}
		if s.Security.TLS.BuiltIn.CADuration == nil {
			s.Security.TLS.BuiltIn.CADuration = &metav1.Duration{Duration: DefaultCADuration}
		}
		if s.Security.TLS.BuiltIn.CertDuration == nil {
			s.Security.TLS.BuiltIn.CertDuration = &metav1.Duration{Duration: DefaultCertDuration}
		}
	}
	if c := &s.Maintenance.Compaction; c.Mode == "" && c.Retention == "" {
		// Clusters that set compaction through options before spec.maintenance existed keep their values
		// (the options are moved here), so the new default does not contradict them.
		if m, r := s.Options["auto-compaction-mode"], s.Options["auto-compaction-retention"]; m != "" || r != "" {
			c.Mode, c.Retention = m, r
			delete(s.Options, "auto-compaction-mode")
			delete(s.Options, "auto-compaction-retention")
			if len(s.Options) == 0 {
				s.Options = nil
			}
		}
	}
	if s.Maintenance.Compaction.Mode == "" {
		s.Maintenance.Compaction.Mode = DefaultCompactionMode
	}
	if s.Maintenance.Compaction.Retention == "" {
		s.Maintenance.Compaction.Retention = DefaultCompactionRetention
		if s.Maintenance.Compaction.Mode == "revision" {
			s.Maintenance.Compaction.Retention = "10000"
		}
	}
	if s.Network.Policy == nil {
		// A new cluster: the policy on. A running cluster's unset value is the applied one
		// (WithAppliedDefaults): switching it on under running clients could cut them off.
		s.Network.Policy = ptr.To(true)
	}
	if s.Network.MetricsNamespace == "" {
		s.Network.MetricsNamespace = DefaultMetricsNamespace
	}
	if d := s.Maintenance.Defrag; d != nil && d.MinFreePercent == nil {
		s.Maintenance.Defrag.MinFreePercent = ptr.To(int32(DefaultDefragMinFreePercent))
	}
	if s.Timeouts.LearnerPromotionSeconds == nil {
		s.Timeouts.LearnerPromotionSeconds = ptr.To(int32(DefaultLearnerPromotionSeconds))
	}
	if s.Timeouts.DeadMemberSeconds == nil {
		s.Timeouts.DeadMemberSeconds = ptr.To(int32(DefaultDeadMemberSeconds))
	}
	if s.Timeouts.LeaveSeconds == nil {
		s.Timeouts.LeaveSeconds = ptr.To(int32(DefaultLeaveSeconds))
	}
	if b := s.Backup; b != nil && b.Retention.KeepLast == nil && b.Retention.MaxAge == nil && !b.Retention.Tiered() {
		// Without a word on retention, a week of daily snapshots: never an unbounded bucket.
		b.Retention.KeepLast = ptr.To(int32(DefaultBackupKeepLast))
	}
	return s
}

// DefaultBackupKeepLast is how many snapshots are kept when spec.backup.retention says nothing.
const DefaultBackupKeepLast = 7

// WithAppliedDefaults fills an unset spec.security.tls.enabled and spec.network.policy from the spec the
// cluster runs, before Defaulted: those defaults (on) are for new clusters only. A record written before
// a field existed has no value there, and such a cluster runs without it (facts reads it as off).
func WithAppliedDefaults(s ClusterSpec, applied *ClusterSpec) ClusterSpec {
	if applied == nil || (s.Security.TLS.Enabled != nil && s.Network.Policy != nil) {
		return s
	}
	s = *s.DeepCopy()
	if s.Security.TLS.Enabled == nil {
		s.Security.TLS.Enabled = ptr.To(applied.Security.TLS.TLSOn())
	}
	if s.Network.Policy == nil {
		s.Network.Policy = ptr.To(applied.Network.PolicyOn())
	}
	return s
}
