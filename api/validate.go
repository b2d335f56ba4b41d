package api

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

// MinVersion is the oldest etcd the agent supports: /livez and /readyz exist from 3.5.11 on.
var MinVersion = SemVer{3, 5, 11}

var (
	optionKey  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	repoRe     = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*$`)
	dnsLabelRe = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
)

// Bounds of the built-in CA's lifetimes: a certificate is replaced at 2/3 of its lifetime and agents
// look every minute, so an hour leaves 20 minutes of slack. The CA is rotated at 2/3 of its lifetime
// (docs/design/14-tls.md §14.6), each member restarting twice: at least a year keeps that rare; at most 20 years
// (x509 and clocks beyond that are nobody's tested path).
const (
	minCertDuration = time.Hour
	minCADuration   = 365 * 24 * time.Hour // a rotation restarts every member twice: keep it rare
	maxCADuration   = 20 * 365 * 24 * time.Hour
)

// Bounds of a periodic compaction retention. etcd reads a retention of 0 as no compactor at all (the
// history then grows until NOSPACE), and multiplies a whole number by an hour in a time.Duration, which
// overflows into a negative period past 2.5 million hours: compaction always stays on, within a year.
const (
	minPeriodicRetention = time.Minute
	maxPeriodicRetention = 365 * 24 * time.Hour
	maxRevisionRetention = 1e12
)

// periodicRetention reads a periodic retention as etcd does: a duration, or a whole number of hours.
func periodicRetention(s string) (time.Duration, bool) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, true
	}
	h, err := strconv.ParseInt(s, 10, 64)
	if err != nil || h < 0 || h > int64(maxPeriodicRetention/time.Hour) {
		return 0, false
	}
	return time.Duration(h) * time.Hour, true
}

// UnsafeOption: etcd's unsafe-* flags trade durability for speed (unsafe-no-fsync), and experimental-*
// flags are unstable by definition and renamed or removed between minor releases (an upgrade could
// then not start). Both need spec.allowUnsafeOptions.
func UnsafeOption(k string) bool {
	return strings.HasPrefix(k, "unsafe-") || strings.HasPrefix(k, "experimental-")
}

// Problem is one reason a spec cannot be applied; Reason becomes the InvalidSpec condition's reason.
type Problem struct {
	Reason  string
	Message string
}

// Validate checks a defaulted spec on its own. It mirrors the CRD's schema and CEL rules, so a spec the
// API server accepted normally passes; it exists because the hook must not trust what it is sent.
func Validate(name string, s ClusterSpec) []Problem {
	var ps []Problem
	add := func(reason, format string, args ...any) {
		ps = append(ps, Problem{reason, fmt.Sprintf(format, args...)})
	}
	if len(name) > MaxNameLength || !dnsLabelRe.MatchString(name) {
		add("InvalidName", "metadata.name %q must be a DNS label of at most %d characters (it prefixes pod, claim and Job names)", name, MaxNameLength)
	}
	if strings.HasSuffix(name, "-peer") {
		// Cluster "a-peer"'s client Service would be cluster "a"'s peer Service.
		add("InvalidName", "metadata.name %q may not end in -peer: its client Service would take the name of the peer Service of cluster %q", name, strings.TrimSuffix(name, "-peer"))
	}
	if size := *s.Size; size < 1 || size > MaxSize {
		add("InvalidSize", "spec.size %d is outside 1..%d", size, MaxSize)
	}
	if v, err := ParseVersion(s.Version); err != nil {
		add("InvalidVersion", "spec.version: %v", err)
	} else if msg := supported(v); msg != "" {
		add("UnsupportedVersion", "spec.version %s: %s", s.Version, msg)
	}
	if !repoRe.MatchString(s.Repository) {
		add("InvalidRepository", "spec.repository %q must be an image repository without tag or digest", s.Repository)
	}
	if s.Storage.EmptyDir != nil {
		if s.Storage.StorageClassName != nil {
			add("InvalidStorage", "spec.storage: emptyDir and storageClassName are exclusive")
		}
	} else if s.Storage.Size.Sign() <= 0 {
		add("InvalidStorage", "spec.storage.size must be positive")
	}
	if t := s.Security.TLS; t.TLSOn() {
		ca, cert := t.BuiltIn.CADuration.Duration, t.BuiltIn.CertDuration.Duration
		if ca < minCADuration || ca > maxCADuration {
			add("InvalidTLS", "spec.security.tls.builtIn.caDuration %s is outside %s..%s", ca, minCADuration, maxCADuration)
		}
		if cert < minCertDuration || cert > ca {
			add("InvalidTLS", "spec.security.tls.builtIn.certDuration %s is outside %s..caDuration (%s)", cert, minCertDuration, ca)
		}
		if g := t.BuiltIn.RotationGrace; g != nil && (g.Duration < 0 || g.Duration > time.Hour) {
			add("InvalidTLS", "spec.security.tls.builtIn.rotationGrace %s is outside 0s..1h", g.Duration)
		}
	}
	switch c := s.Maintenance.Compaction; c.Mode {
	case "periodic":
		if d, ok := periodicRetention(c.Retention); !ok || d < minPeriodicRetention || d > maxPeriodicRetention {
			add("InvalidCompaction", "spec.maintenance.compaction.retention %q: periodic retention is a duration from %s to %s such as 1h or 30m (a whole number is hours)", c.Retention, minPeriodicRetention, maxPeriodicRetention)
		}
	case "revision":
		if r, err := strconv.ParseInt(c.Retention, 10, 64); err != nil || r < 1 || r > maxRevisionRetention {
			add("InvalidCompaction", "spec.maintenance.compaction.retention %q: revision retention is a number of revisions from 1 to %d", c.Retention, int64(maxRevisionRetention))
		}
	default:
		add("InvalidCompaction", "spec.maintenance.compaction.mode %q must be periodic or revision", c.Mode)
	}
	keys := make([]string, 0, len(s.Options))
	for k := range s.Options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case !optionKey.MatchString(k):
			add("InvalidOption", "spec.options key %q must be an etcd flag name without dashes in front", k)
		case strings.HasPrefix(k, "auto-compaction-"):
			add("ManagedOption", "spec.options %q: compaction is set in spec.maintenance.compaction (an option is taken from there only when the spec sets no compaction)", k)
		case ManagedOptions[k]:
			add("ManagedOption", "spec.options %q is managed by etcdhook and cannot be set", k)
		case strings.ContainsAny(s.Options[k], "\n\x00"):
			add("InvalidOption", "spec.options %q: value must be a single line", k)
		case k == "quota-backend-bytes" && !quotaParses(s.Options):
			add("InvalidOption", "spec.options %q: %q is not a whole number of bytes (0: etcd's default of 2 GiB)", k, s.Options[k])
		case UnsafeOption(k) && !s.AllowUnsafeOptions:
			add("UnsafeOption", "spec.options %q can lose data or changes meaning between etcd releases: set spec.allowUnsafeOptions: true to accept the risk", k)
		}
	}
	for _, t := range []struct {
		name string
		v    int32
		min  int32
	}{
		{"learnerPromotionSeconds", *s.Timeouts.LearnerPromotionSeconds, 30},
		{"deadMemberSeconds", *s.Timeouts.DeadMemberSeconds, 60},
		{"leaveSeconds", *s.Timeouts.LeaveSeconds, 30},
	} {
		if t.v < t.min || t.v > 86400 {
			add("InvalidTimeout", "spec.timeouts.%s %d is outside %d..86400", t.name, t.v, t.min)
		}
	}
	ps = append(ps, validateUserNames(name, s)...)
	ps = append(ps, validateBackup(s)...)
	ps = append(ps, validateDefrag(s)...)
	ps = append(ps, validateRecovery(s)...)
	ps = append(ps, validateSpace(s)...)
	ps = append(ps, validateAuth(name, s)...)
	ps = append(ps, validateStandby(s)...)
	return append(ps, validateNetwork(s)...)
}

// validateUserNames refuses every Secret and claim the spec names that the hook owns
// (Names.HookOwnedSecret, HookOwnedClaim). The CRD says the same (CEL); this check holds when the
// CRD is older.
func validateUserNames(name string, s ClusterSpec) []Problem {
	n := Names{Cluster: name}
	var ps []Problem
	check := func(reason, field, v string, owned func(string) bool) {
		if v != "" && owned(v) {
			ps = append(ps, Problem{reason, fmt.Sprintf("%s %q is an object etcdhook owns for this cluster: name your own", field, v)})
		}
	}
	if b := s.Backup; b != nil {
		check("InvalidBackup", "spec.backup.credentialsSecret", b.CredentialsSecret, n.HookOwnedSecret)
		check("InvalidBackup", "spec.backup.volumeClaimName", b.VolumeClaimName, n.HookOwnedClaim)
		if e := b.Encryption; e != nil {
			check("InvalidBackup", "spec.backup.encryption.secretName", e.SecretName, n.HookOwnedSecret)
		}
		if c := b.Copy; c != nil {
			check("InvalidBackup", "spec.backup.copy.credentialsSecret", c.CredentialsSecret, n.HookOwnedSecret)
		}
	}
	if r := s.Restore; r != nil {
		check("InvalidRestore", "spec.restore.credentialsSecret", r.CredentialsSecret, n.HookOwnedSecret)
		check("InvalidRestore", "spec.restore.volumeClaimName", r.VolumeClaimName, n.HookOwnedClaim)
		if e := r.Encryption; e != nil {
			check("InvalidRestore", "spec.restore.encryption.secretName", e.SecretName, n.HookOwnedSecret)
		}
	}
	check("InvalidTLS", "spec.security.tls.peer.secretName", s.Security.TLS.Peer.SecretName, n.HookOwnedSecret)
	check("InvalidTLS", "spec.security.tls.client.secretName", s.Security.TLS.Client.SecretName, n.HookOwnedSecret)
	return ps
}

// ValidateChange checks a valid spec against the spec the cluster runs (applied), the versions its
// members report (running), the versions in the images its pods' etcd ran (images) and the
// largest size its claims ask for (storageFloor, nil when none is observed): immutable fields, the
// upgrade path, volumes that only grow.
func ValidateChange(applied *ClusterSpec, next ClusterSpec, running, images []SemVer, storageFloor *resource.Quantity) []Problem {
	var ps []Problem
	if applied != nil {
		ps = append(ps, validateStorageChange(applied.Storage, next.Storage, storageFloor)...)
		if a, b := applied.Security.TLS, next.Security.TLS; a.TLSOn() && b.TLSOn() &&
			(a.Peer.SecretName != b.Peer.SecretName || a.Client.SecretName != b.Client.SecretName) {
			// Another source can mean another CA: members trusting different CAs cannot talk, so the switch
			// needs the trust-bundle rotation of docs/design/14-tls.md §14.6. A Secret's content may change.
			ps = append(ps, Problem{"TLSSecretChange", fmt.Sprintf("spec.security.tls peer/client secretName cannot change on a running cluster in this release (from %q/%q to %q/%q); renew the certificates inside the Secrets instead", a.Peer.SecretName, a.Client.SecretName, b.Peer.SecretName, b.Client.SecretName)})
		}
		if a, b := applied.Security.TLS, next.Security.TLS; a.TLSOn() && !b.TLSOn() &&
			(a.Peer.SecretName != b.Peer.SecretName || a.Client.SecretName != b.Client.SecretName) {
			// Switching off runs a transition on the certificates the members use now (docs/design/14-tls.md §14.8).
			ps = append(ps, Problem{"TLSSecretChange", fmt.Sprintf("spec.security.tls peer/client secretName must stay %q/%q while TLS is switched off (the members move to plaintext on the certificates they use now); got %q/%q", a.Peer.SecretName, a.Client.SecretName, b.Peer.SecretName, b.Client.SecretName)})
		}
	}
	if applied != nil && applied.Auth != nil && applied.Auth.Enabled && next.Auth == nil {
		// etcd would go on enforcing auth while the Jobs fall back to the shared client Secret, whose CN
		// is no etcd user: every membership step would be refused (docs/design/20-auth.md §20.6).
		ps = append(ps, Problem{"InvalidAuth", "spec.auth cannot be removed while spec.auth.enabled is true: set enabled: false first, then remove it"})
	}
	if applied != nil && applied.Security.TLS.ClientAuth() != next.Security.TLS.ClientAuth() &&
		(applied.Auth != nil && applied.Auth.Enabled || next.Auth != nil && next.Auth.Enabled) {
		// With client certificates required etcd takes the user from the certificate, without it only from
		// a password login: switched under enforced auth, every client (and every agent's own call, until
		// its agent moves) would be refused for a while (docs/design/20-auth.md §20.6).
		ps = append(ps, Problem{"InvalidAuth", "spec.security.tls.client.auth cannot change while spec.auth.enabled is true: set enabled: false first, change it, then enable auth again"})
	}
	ps = append(ps, validateRestoreChange(applied, next)...)
	ps = append(ps, validateStandbyChange(applied, next)...)
	to, err := ParseVersion(next.Version)
	if err != nil {
		return ps
	}
	if len(running) > 0 {
		if msg := upgradePath(running, to); msg != "" {
			return append(ps, Problem{"UpgradeRefused", msg})
		}
	}
	// The images are evidence even when no member reports and every record is gone (all members
	// restarting, status wiped): data written by a minor release is never handed to an older minor.
	// A patch below an image stays possible: reverting a bad image (a tag that never started) is one.
	if len(images) > 0 {
		hi := images[0]
		for _, v := range images[1:] {
			if hi.Less(v) {
				hi = v
			}
		}
		if to.Major < hi.Major || to.Major == hi.Major && to.Minor < hi.Minor {
			ps = append(ps, Problem{"UpgradeRefused", fmt.Sprintf("version %s is below %d.%d, which a member pod's etcd ran (image %s): downgrades across a minor version are not supported", to, hi.Major, hi.Minor, hi)})
		}
	}
	return ps
}

// validateStorageChange: only spec.storage.size may change (docs/design/17-growing-volumes.md §17), and it may go down only
// as far as no claim has been asked to grow (floor): a growth the StorageClass refuses can be withdrawn,
// but Kubernetes never shrinks a volume. Another class or emptyDir would need the data moved.
func validateStorageChange(applied, next StorageSpec, floor *resource.Quantity) []Problem {
	a, b := applied, next
	a.Size, b.Size = nil, nil
	if !equality.Semantic.DeepEqual(a, b) {
		return []Problem{{"StorageImmutable", "spec.storage: only size may change after creation (storageClassName and emptyDir would need the data moved to new volumes)"}}
	}
	if applied.Size != nil && next.Size != nil && next.Size.Cmp(*applied.Size) < 0 && (floor == nil || next.Size.Cmp(*floor) < 0) {
		have := "no claim observed"
		if floor != nil {
			have = "claims ask for up to " + floor.String()
		}
		return []Problem{{"StorageShrink", fmt.Sprintf("spec.storage.size cannot shrink from %s to %s (%s): volumes only grow (to use smaller volumes, restore a backup into a new EtcdCluster)", applied.Size.String(), next.Size.String(), have)}}
	}
	return nil
}

// upgradePath allows patch changes upwards, one minor up, 3.5 -> 3.6 only from 3.5.20 and 3.6 -> 3.7 only
// from 3.6.11 (etcd's upgrade guides): never below
// the newest version a member runs, never more than one minor above the oldest.
func upgradePath(running []SemVer, to SemVer) string {
	lo, hi := running[0], running[0]
	for _, v := range running[1:] {
		if v.Less(lo) {
			lo = v
		}
		if hi.Less(v) {
			hi = v
		}
	}
	switch {
	case to.Less(hi):
		return fmt.Sprintf("version %s is below %s, which members run: downgrades are not supported", to, hi)
	case to.Major != lo.Major || to.Minor > lo.Minor+1:
		return fmt.Sprintf("version %s is more than one minor version above %s, which members run: upgrade one minor version at a time", to, lo)
	case to.Minor == lo.Minor+1 && lo.Major == 3 && lo.Minor == 5 && lo.Patch < 20:
		return fmt.Sprintf("upgrading to %s needs every member on 3.5.20 or newer first (members run %s)", to, lo)
	case to.Minor == lo.Minor+1 && lo.Major == 3 && lo.Minor == 6 && lo.Patch < 11:
		// etcd's 3.6 -> 3.7 guide: earlier 3.6 patch releases may not survive a rolling upgrade.
		return fmt.Sprintf("upgrading to %s needs every member on 3.6.11 or newer first (members run %s)", to, lo)
	}
	return ""
}

func supported(v SemVer) string {
	if v.Less(MinVersion) {
		return fmt.Sprintf("etcd older than %s lacks /livez and /readyz", MinVersion)
	}
	if v.Major != 3 || v.Minor > 7 {
		return "supported versions are 3.5.x (from 3.5.11), 3.6.x and 3.7.x"
	}
	return ""
}

func quotaParses(options map[string]string) bool {
	_, ok := QuotaBackendBytes(options)
	return ok
}
