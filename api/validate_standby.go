package api

import (
	"fmt"

	"github.com/etcdhook/etcdhook/internal/backup"
)

// validateStandby: a standby starts from another cluster's folder in an object store (the one thing two
// regions share), on volumes, behind etcd's auth (its write fence, which needs TLS: §21.5), and it is
// the cluster's start, as spec.restore is: not both. The CRD says what CEL can; this holds without it.
func validateStandby(s ClusterSpec) []Problem {
	sb := s.Standby
	if sb == nil {
		return nil
	}
	var ps []Problem
	add := func(reason, format string, args ...any) {
		ps = append(ps, Problem{reason, fmt.Sprintf(format, args...)})
	}
	if f, err := StandbySource(sb.From); err != nil {
		add("InvalidStandby", "spec.standby.from %q %v", backup.Redact(sb.From), err)
	} else {
		CheckStoreAccess(add, "InvalidStandby", "spec.standby", f.Destination, sb.CredentialsSecret, sb.StoreAccess)
	}
	checkSecretName(add, "InvalidStandby", "spec.standby.credentialsSecret", sb.CredentialsSecret)
	checkEncryption(add, "InvalidStandby", "spec.standby.encryption", sb.Encryption)
	if l := sb.MaxLag; l != nil && (l.Duration < minMaxLag || l.Duration > maxMaxLag) {
		add("InvalidStandby", "spec.standby.maxLag %s is outside %s..%s", l.Duration, minMaxLag, maxMaxLag)
	}
	if s.Restore != nil {
		add("InvalidStandby", "spec.standby and spec.restore: a cluster starts from one of them (a standby's seed restores the primary's snapshot itself)")
	}
	if s.Storage.EmptyDir != nil {
		add("InvalidStandby", "spec.standby needs volumes: storage.emptyDir loses the replayed data with its pod")
	}
	if !s.Security.TLS.TLSOn() {
		add("InvalidStandby", "spec.standby needs spec.security.tls.enabled: its write fence is etcd's auth, which needs TLS")
	}
	return ps
}

// StandbySource reads spec.standby.from: the primary's folder followed by /latest, or one of its
// snapshots; the folder is the source's Destination, split into the destination above it and the
// primary's namespace and name. A store's root /latest (which means the reading cluster's own folder
// for spec.restore) and file:// (a claim of this namespace, not another region's store) are refused.
func StandbySource(from string) (StandbyFolder, error) {
	src, err := backup.ParseSource(from)
	if err != nil {
		return StandbyFolder{}, err
	}
	if src.Destination.Scheme == "file" {
		return StandbyFolder{}, fmt.Errorf("is a file:// source: a standby follows an object store (s3:// or gs://) the primary's region writes to")
	}
	parent, ns, name, ok := src.Destination.SplitFolder()
	if !ok {
		return StandbyFolder{}, fmt.Errorf("names no cluster's folder: want <destination>/<namespace>/<name>/latest or a snapshot in that folder")
	}
	return StandbyFolder{Destination: parent, Namespace: ns, Name: name, Snapshot: src.Snapshot}, nil
}

// StandbyFolder is the primary's folder a standby follows: the destination above it, the primary's
// namespace and name, and the snapshot the seed restores (empty: the newest).
type StandbyFolder struct {
	Destination     backup.Destination
	Namespace, Name string
	Snapshot        string
}

// StandbyOwnFolder says why spec.standby.from names this cluster's own folder (in spec.backup's
// destination or its copy), empty when it does not: a standby of itself would read what it writes.
func StandbyOwnFolder(n Names, s ClusterSpec) string {
	if s.Standby == nil || s.Backup == nil {
		return ""
	}
	f, err := StandbySource(s.Standby.From)
	if err != nil || f.Namespace != n.Namespace || f.Name != n.Cluster {
		return ""
	}
	dests := []string{s.Backup.Destination}
	if s.Backup.Copy != nil {
		dests = append(dests, s.Backup.Copy.Destination)
	}
	for _, raw := range dests {
		if d, err := backup.ParseDestination(raw); err == nil && d.String() == f.Destination.String() {
			return fmt.Sprintf("spec.standby.from names this cluster's own folder in %s: a standby follows another cluster", backup.Redact(raw))
		}
	}
	return ""
}

// validateStandbyChange: being a standby is how a cluster starts (its seed restores the primary's
// snapshot without the revision bump), so spec.standby is set at creation and its source never changes;
// its credentials and maxLag may. It stays after promotion (status.standby.promoted says it ended).
func validateStandbyChange(applied *ClusterSpec, next ClusterSpec) []Problem {
	if applied == nil {
		return nil
	}
	a, b := applied.Standby, next.Standby
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		return []Problem{{"StandbyImmutable", "spec.standby can only be set when the cluster is created: this cluster runs on its own data (create a new EtcdCluster as the standby)"}}
	case b == nil:
		return []Problem{{"StandbyImmutable", "spec.standby cannot be removed: promote the standby (kubectl etcd promote) to make it a normal cluster"}}
	case a.From != b.From:
		return []Problem{{"StandbyImmutable", "spec.standby.from cannot change after creation: the standby holds that primary's history"}}
	}
	return nil
}

// SeedRestore is what the seed restores before its first start: spec.restore, or a standby's primary
// snapshot (spec.standby.from), restored with its revisions kept (KeepRevisions, §21.1); nil for a
// cluster that starts empty.
func (s ClusterSpec) SeedRestore() (r *RestoreSpec, keepRevisions bool) {
	if sb := s.Standby; sb != nil && s.Restore == nil {
		return &RestoreSpec{From: sb.From, CredentialsSecret: sb.CredentialsSecret, Encryption: sb.Encryption, StoreAccess: sb.StoreAccess}, true
	}
	return s.Restore, false
}
