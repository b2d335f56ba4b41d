package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Each bad backup or restore input is refused with a problem naming its field.
func TestValidateBackup(t *testing.T) {
	ok := func(s *ClusterSpec) {}
	for _, tc := range []struct {
		name  string
		edit  func(*ClusterSpec)
		want  string // "" means valid
		field string
	}{
		{"valid s3 schedule", ok, "", ""},
		{"descriptor", func(s *ClusterSpec) { s.Backup.Schedule = "@daily" }, "", ""},
		{"on demand only", func(s *ClusterSpec) { s.Backup.Schedule = "" }, "", ""},
		{"time zone prefix", func(s *ClusterSpec) { s.Backup.Schedule = "CRON_TZ=Europe/Paris 0 3 * * *" }, "InvalidBackup", "spec.backup.schedule"},
		{"tz prefix", func(s *ClusterSpec) { s.Backup.Schedule = "TZ=UTC 0 3 * * *" }, "InvalidBackup", "spec.backup.schedule"},
		{"six fields", func(s *ClusterSpec) { s.Backup.Schedule = "0 0 3 * * *" }, "InvalidBackup", "spec.backup.schedule"},
		{"never fires", func(s *ClusterSpec) { s.Backup.Schedule = "0 0 30 2 *" }, "InvalidBackup", "never fires"},
		// robfig/cron reads @every too: a CronJob firing every second, a defrag pass moving at every sync.
		{"@every", func(s *ClusterSpec) { s.Backup.Schedule = "@every 1s" }, "InvalidBackup", "spec.backup.schedule"},
		{"@every a year", func(s *ClusterSpec) { s.Backup.Schedule = "@every 8760h" }, "InvalidBackup", "at most once a minute"},
		{"unknown descriptor", func(s *ClusterSpec) { s.Backup.Schedule = "@reboot" }, "InvalidBackup", "spec.backup.schedule"},
		{"every descriptor named", func(s *ClusterSpec) { s.Backup.Schedule = "@midnight" }, "", ""},
		{"defrag @every", func(s *ClusterSpec) {
			s.Maintenance.Defrag = &DefragSpec{Schedule: "@every 1h"}
		}, "InvalidDefrag", "spec.maintenance.defrag.schedule"},
		{"unknown scheme", func(s *ClusterSpec) { s.Backup.Destination = "azblob://c/p" }, "InvalidBackup", "spec.backup.destination"},
		{"file without claim", func(s *ClusterSpec) { s.Backup.Destination = "file:///etcd" }, "InvalidBackup", "spec.backup.volumeClaimName"},
		{"claim with s3", func(s *ClusterSpec) { s.Backup.VolumeClaimName = "x" }, "InvalidBackup", "spec.backup.volumeClaimName"},
		{"bad secret name", func(s *ClusterSpec) { s.Backup.CredentialsSecret = "Not_A_Name" }, "InvalidBackup", "spec.backup.credentialsSecret"},
		{"encryption", func(s *ClusterSpec) { s.Backup.Encryption = &EncryptionSpec{SecretName: "backup-keys"} }, "", ""},
		{"copy", func(s *ClusterSpec) {
			s.Backup.Copy = &BackupCopySpec{Destination: "gs://dr-bucket/etcd", CredentialsSecret: "gcs", Retention: &BackupRetention{KeepDaily: ptrTo(int32(30))}}
		}, "", ""},
		{"copy to a claim", func(s *ClusterSpec) {
			s.Backup.Copy = &BackupCopySpec{Destination: "file:///etcd"}
		}, "InvalidBackup", "spec.backup.copy.destination"},
		{"copy to itself", func(s *ClusterSpec) {
			s.Backup.Copy = &BackupCopySpec{Destination: s.Backup.Destination, CredentialsSecret: "creds"}
		}, "InvalidBackup", "spec.backup.copy.destination is spec.backup.destination itself"},
		{"copy without credentials", func(s *ClusterSpec) {
			s.Backup.Copy = &BackupCopySpec{Destination: "gs://dr/etcd"}
		}, "InvalidBackup", "spec.backup.copy.credentialsSecret is required"},
		{"copy retention", func(s *ClusterSpec) {
			s.Backup.Copy = &BackupCopySpec{Destination: "gs://dr/etcd", CredentialsSecret: "gcs", Retention: &BackupRetention{KeepLast: ptrTo(int32(0))}}
		}, "InvalidBackup", "spec.backup.copy.retention.keepLast"},
		{"encryption without a Secret", func(s *ClusterSpec) { s.Backup.Encryption = &EncryptionSpec{} }, "InvalidBackup", "spec.backup.encryption.secretName is required"},
		{"encryption bad Secret name", func(s *ClusterSpec) { s.Backup.Encryption = &EncryptionSpec{SecretName: "Keys!"} }, "InvalidBackup", "spec.backup.encryption.secretName"},
		{"restore encryption bad Secret name", func(s *ClusterSpec) {
			s.Restore = &RestoreSpec{From: "gs://b/p/latest", CredentialsSecret: "creds", Encryption: &EncryptionSpec{SecretName: "Keys!"}}
		}, "InvalidRestore", "spec.restore.encryption.secretName"},
		{"keepLast 0", func(s *ClusterSpec) { s.Backup.Retention.KeepLast = ptrTo(int32(0)) }, "InvalidBackup", "spec.backup.retention.keepLast"},
		{"maxAge 10m", func(s *ClusterSpec) { s.Backup.Retention.MaxAge = &metav1.Duration{Duration: 10 * time.Minute} }, "InvalidBackup", "spec.backup.retention.maxAge"},
		{"restoreOnQuorumLoss on emptyDir", func(s *ClusterSpec) {
			s.Backup.RestoreOnQuorumLoss = true
			s.Storage.EmptyDir = &corev1.EmptyDirVolumeSource{}
		}, "InvalidBackup", "spec.backup.restoreOnQuorumLoss needs volumes"},
		{"restoreOnQuorumLoss", func(s *ClusterSpec) { s.Backup.RestoreOnQuorumLoss = true }, "", ""},
		{"restore latest", func(s *ClusterSpec) {
			s.Restore = &RestoreSpec{From: "gs://b/p/latest", CredentialsSecret: "creds"}
		}, "", ""},
		// Ambient credentials are the node's rights: an explicit opt-in (issue 24 §5).
		{"restore without credentials", func(s *ClusterSpec) { s.Restore = &RestoreSpec{From: "gs://b/p/latest"} }, "InvalidRestore", "spec.restore.ambientCredentials"},
		{"restore with ambient credentials", func(s *ClusterSpec) {
			s.Restore = &RestoreSpec{From: "gs://b/p/latest", StoreAccess: StoreAccess{AmbientCredentials: true}}
		}, "", ""},
		{"backup without credentials", func(s *ClusterSpec) { s.Backup.CredentialsSecret = "" }, "InvalidBackup", "spec.backup.credentialsSecret is required"},
		{"backup with ambient credentials", func(s *ClusterSpec) {
			s.Backup.CredentialsSecret, s.Backup.AmbientCredentials = "", true
		}, "", ""},
		{"file backup needs no credentials", func(s *ClusterSpec) {
			s.Backup.Destination, s.Backup.VolumeClaimName, s.Backup.CredentialsSecret = "file:///etcd", "backups", ""
		}, "", ""},
		{"metadata service endpoint", func(s *ClusterSpec) { s.Backup.Destination = "s3://b/p?endpoint=http://169.254.169.254" }, "InvalidBackup", "link-local"},
		{"loopback endpoint", func(s *ClusterSpec) { s.Backup.Destination = "s3://b/p?endpoint=http://127.0.0.1:9000" }, "InvalidBackup", "loopback"},
		{"IPv6 loopback endpoint", func(s *ClusterSpec) { s.Backup.Destination = "s3://b/p?endpoint=http://[::1]:9000" }, "InvalidBackup", "loopback"},
		{"localhost endpoint", func(s *ClusterSpec) { s.Backup.Destination = "s3://b/p?endpoint=http://localhost:9000" }, "InvalidBackup", "localhost"},
		{"metadata service by name", func(s *ClusterSpec) { s.Backup.Destination = "s3://b/p?endpoint=http://metadata.google.internal" }, "InvalidBackup", "metadata"},
		{"AWS IMDS over IPv6", func(s *ClusterSpec) { s.Backup.Destination = "s3://b/p?endpoint=http://[fd00:ec2::254]" }, "InvalidBackup", "metadata"},
		{"restore from the metadata service", func(s *ClusterSpec) {
			s.Restore = &RestoreSpec{From: "gs://b/p/latest?endpoint=http://169.254.169.254", CredentialsSecret: "creds"}
		}, "InvalidRestore", "link-local"},
		{"local endpoint opted in", func(s *ClusterSpec) {
			s.Backup.Destination, s.Backup.AllowLocalEndpoint = "s3://b/p?endpoint=http://127.0.0.1:9000", true
		}, "", ""},
		{"a store in the cluster", func(s *ClusterSpec) { s.Backup.Destination = "s3://b/p?endpoint=http://10.244.0.1:9000" }, "", ""},
		{"restore of a folder", func(s *ClusterSpec) { s.Restore = &RestoreSpec{From: "gs://b/p"} }, "InvalidRestore", "spec.restore.from"},
		// Objects the hook owns are never the user's to name (issue 24 §5): member 0's data claim was
		// mounted read-write into the backup Job, the CA key Secret used as store credentials.
		{"credentials are the CA Secret", func(s *ClusterSpec) { s.Backup.CredentialsSecret = "demo-ca" }, "InvalidBackup", "spec.backup.credentialsSecret \"demo-ca\" is an object etcdhook owns"},
		{"backup claim is member 0's", func(s *ClusterSpec) {
			s.Backup.Destination, s.Backup.VolumeClaimName = "file:///etcd", "data-demo-0"
		}, "InvalidBackup", "spec.backup.volumeClaimName"},
		{"restore claim is member 1's", func(s *ClusterSpec) {
			s.Restore = &RestoreSpec{From: "file:///b/latest", VolumeClaimName: "data-demo-1"}
		}, "InvalidRestore", "spec.restore.volumeClaimName"},
		{"restore credentials are the client Secret", func(s *ClusterSpec) {
			s.Restore = &RestoreSpec{From: "gs://b/p/latest", CredentialsSecret: "demo-client-tls"}
		}, "InvalidRestore", "spec.restore.credentialsSecret"},
		{"TLS Secret is the built-in CA", func(s *ClusterSpec) { s.Security.TLS.Peer.SecretName = "demo-ca" }, "InvalidTLS", "spec.security.tls.peer.secretName"},
		{"a claim of another name", func(s *ClusterSpec) {
			s.Backup.Destination, s.Backup.VolumeClaimName = "file:///etcd", "data-demo-backups"
		}, "", ""},
		{"restore file without claim", func(s *ClusterSpec) { s.Restore = &RestoreSpec{From: "file:///b/latest"} }, "InvalidRestore", "spec.restore.volumeClaimName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ClusterSpec{Backup: &BackupSpec{Schedule: "0 * * * *", Destination: "s3://b/p?region=eu-west-1", CredentialsSecret: "creds"}}
			tc.edit(&s)
			ps := Validate("demo", Defaulted(s))
			if tc.want == "" {
				require.Empty(t, ps)
				return
			}
			require.Len(t, ps, 1, "%v", ps)
			require.Equal(t, tc.want, ps[0].Reason)
			require.Contains(t, ps[0].Message, tc.field)
		})
	}
}

// spec.restore belongs to the creation: adding, changing or removing it later is refused.
func TestValidateRestoreChange(t *testing.T) {
	r := &RestoreSpec{From: "s3://b/p/latest"}
	for _, tc := range []struct {
		name          string
		applied, next *RestoreSpec
		refused       bool
	}{
		{"none", nil, nil, false},
		{"kept", r, &RestoreSpec{From: "s3://b/p/latest"}, false},
		{"added", nil, r, true},
		{"removed", r, nil, true},
		{"changed", r, &RestoreSpec{From: "s3://b/q/latest"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := validateRestoreChange(&ClusterSpec{Restore: tc.applied}, ClusterSpec{Restore: tc.next})
			require.Equal(t, tc.refused, len(ps) > 0, "%v", ps)
		})
	}
}
