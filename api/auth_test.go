package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func authSpec() ClusterSpec {
	s := Defaulted(ClusterSpec{})
	s.Security.TLS.Enabled = ptrTo(true)
	s.Auth = &AuthSpec{
		Enabled: true,
		Roles: []AuthRole{
			{Name: "orders", Permissions: []AuthPermission{{Key: "/orders/", Prefix: true, Access: AccessReadWrite}, {Key: "/config", Access: AccessRead}}},
			{Name: "audit", Permissions: []AuthPermission{{Key: "", Prefix: true, Access: AccessRead}}},
		},
		Users: []AuthUser{{Name: "orders-svc", Roles: []string{"orders"}}, {Name: "auditor", Roles: []string{"audit"}, SecretName: "demo-auditor"}},
	}
	return s
}

// Each bad spec.auth is refused with InvalidAuth naming the field and the problem.
func TestValidateAuth(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*ClusterSpec)
		want string // "" means valid; else a piece of the message
	}{
		{"valid", func(*ClusterSpec) {}, ""},
		{"declared but off", func(s *ClusterSpec) { s.Auth.Enabled = false }, ""},
		{"empty auth", func(s *ClusterSpec) { s.Auth = &AuthSpec{} }, ""},
		{"plaintext", func(s *ClusterSpec) { s.Security.TLS.Enabled = ptrTo(false) }, "needs spec.security.tls.enabled"},
		{"no client auth: passwords", func(s *ClusterSpec) { s.Security.TLS.Client.Auth = ptrTo(false) }, ""},
		{"user's client CA", func(s *ClusterSpec) { s.Security.TLS.Client.SecretName = "my-client" }, "built-in CA"},
		{"overlapping prefixes", func(s *ClusterSpec) {
			s.Auth.Roles[0].Permissions = append(s.Auth.Roles[0].Permissions, AuthPermission{Key: "/orders/2026/", Prefix: true, Access: AccessRead})
		}, "spec.auth.roles[0].permissions[2] (prefix \"/orders/2026/\") overlaps spec.auth.roles[0].permissions[0]"},
		{"key inside a prefix", func(s *ClusterSpec) {
			s.Auth.Roles[0].Permissions = append(s.Auth.Roles[0].Permissions, AuthPermission{Key: "/orders/x", Access: AccessRead})
		}, "overlaps"},
		{"same key twice", func(s *ClusterSpec) {
			s.Auth.Roles[0].Permissions = append(s.Auth.Roles[0].Permissions, AuthPermission{Key: "/config", Access: AccessWrite})
		}, "permissions[2] (key \"/config\") overlaps"},
		{"every key beside another", func(s *ClusterSpec) {
			s.Auth.Roles[1].Permissions = append(s.Auth.Roles[1].Permissions, AuthPermission{Key: "/z", Access: AccessRead})
		}, "overlaps"},
		{"adjacent, not overlapping", func(s *ClusterSpec) {
			s.Auth.Roles[0].Permissions = append(s.Auth.Roles[0].Permissions, AuthPermission{Key: "/orders0", Prefix: true, Access: AccessRead}, AuthPermission{Key: "/orders", Access: AccessRead})
		}, ""},
		{"overlap across roles is fine", func(s *ClusterSpec) {
			s.Auth.Roles[1].Permissions = []AuthPermission{{Key: "/orders/", Prefix: true, Access: AccessRead}}
		}, ""},
		{"empty key", func(s *ClusterSpec) { s.Auth.Roles[0].Permissions[1].Key = "" }, "spec.auth.roles[0].permissions[1].key is empty"},
		{"bad access", func(s *ClusterSpec) { s.Auth.Roles[0].Permissions[0].Access = "all" }, "spec.auth.roles[0].permissions[0].access \"all\""},
		{"NUL in key", func(s *ClusterSpec) { s.Auth.Roles[0].Permissions[1].Key = "/a\x00" }, "NUL"},
		{"long key", func(s *ClusterSpec) { s.Auth.Roles[0].Permissions[1].Key = strings.Repeat("k", MaxAuthKeyBytes+1) }, "more than 1024"},
		{"unknown role", func(s *ClusterSpec) { s.Auth.Users[0].Roles = []string{"order"} }, "spec.auth.users[0].roles[0] \"order\" is not declared"},
		{"root role", func(s *ClusterSpec) { s.Auth.Roles[0].Name = RootRole }, "spec.auth.roles[0].name \"root\" is reserved"},
		{"root user", func(s *ClusterSpec) { s.Auth.Users[0].Name = RootUser }, "spec.auth.users[0].name \"root\" is reserved"},
		{"role twice", func(s *ClusterSpec) { s.Auth.Roles[1].Name = "orders" }, "spec.auth.roles[1].name \"orders\" is declared twice"},
		{"user twice", func(s *ClusterSpec) { s.Auth.Users[1].Name = "orders-svc" }, "declared twice"},
		{"bad user name", func(s *ClusterSpec) { s.Auth.Users[0].Name = "a b" }, "spec.auth.users[0].name \"a b\""},
		{"hook-owned Secret", func(s *ClusterSpec) { s.Auth.Users[0].SecretName = "demo-client-tls" }, "spec.auth.users[0].secretName \"demo-client-tls\" is a Secret etcdhook owns"},
		{"root Secret", func(s *ClusterSpec) { s.Auth.Users[0].SecretName = "demo-root-tls" }, "etcdhook owns"},
		{"CA Secret", func(s *ClusterSpec) { s.Auth.Users[0].SecretName = "demo-ca" }, "etcdhook owns"},
		{"another user's Secret", func(s *ClusterSpec) { s.Auth.Users[0].SecretName = "demo-auditor" }, "spec.auth.users[1].secretName \"demo-auditor\" is user \"orders-svc\"'s Secret too"},
		{"another user's default Secret", func(s *ClusterSpec) { s.Auth.Users[1].SecretName = "demo-user-orders-svc" }, "is user \"orders-svc\"'s Secret too"},
		{"the peer TLS Secret", func(s *ClusterSpec) {
			s.Security.TLS.Peer.SecretName = "demo-peer-certs"
			s.Auth.Users[1].SecretName = "demo-peer-certs"
		}, "spec.auth.users[1].secretName \"demo-peer-certs\" is the Secret spec.security.tls.peer.secretName names"},
		{"the backup credentials", func(s *ClusterSpec) {
			s.Backup = &BackupSpec{Schedule: "0 * * * *", Destination: "s3://b/p", CredentialsSecret: "demo-s3"}
			s.Auth.Users[1].SecretName = "demo-s3"
		}, "is the Secret spec.backup.credentialsSecret names"},
		{"the backup encryption keys", func(s *ClusterSpec) {
			s.Backup = &BackupSpec{Schedule: "0 * * * *", Destination: "s3://b/p", CredentialsSecret: "s3", Encryption: &EncryptionSpec{SecretName: "demo-age"}}
			s.Auth.Users[1].SecretName = "demo-age"
		}, "is the Secret spec.backup.encryption.secretName names"},
		{"the copy's credentials", func(s *ClusterSpec) {
			s.Backup = &BackupSpec{Schedule: "0 * * * *", Destination: "s3://b/p", CredentialsSecret: "s3",
				Copy: &BackupCopySpec{Destination: "gs://dr/p", CredentialsSecret: "demo-gcs"}}
			s.Auth.Users[1].SecretName = "demo-gcs"
		}, "is the Secret spec.backup.copy.credentialsSecret names"},
		{"the restore's credentials", func(s *ClusterSpec) {
			s.Restore = &RestoreSpec{From: "s3://b/p/latest", CredentialsSecret: "demo-s3"}
			s.Auth.Users[1].SecretName = "demo-s3"
		}, "is the Secret spec.restore.credentialsSecret names"},
		{"the restore's keys", func(s *ClusterSpec) {
			s.Restore = &RestoreSpec{From: "s3://b/p/latest", CredentialsSecret: "s3", Encryption: &EncryptionSpec{SecretName: "demo-age"}}
			s.Auth.Users[1].SecretName = "demo-age"
		}, "is the Secret spec.restore.encryption.secretName names"},
		{"Secret outside the cluster's names", func(s *ClusterSpec) { s.Auth.Users[0].SecretName = "db-password" }, "must start with \"demo-\""},
		{"Secret not a name", func(s *ClusterSpec) { s.Auth.Users[0].SecretName = "demo-Orders" }, "not a DNS subdomain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := authSpec()
			tc.edit(&s)
			ps := Validate("demo", s)
			if tc.want == "" {
				require.Empty(t, ps)
				return
			}
			require.NotEmpty(t, ps)
			require.Equal(t, "InvalidAuth", ps[0].Reason, "%v", ps)
			require.Contains(t, ps[0].Message, tc.want)
		})
	}
}

// The desired form is the same whatever order the spec lists things in, and its hash follows content.
func TestDesiredAuth(t *testing.T) {
	n := Names{Cluster: "demo"}
	s := authSpec()
	a := DesiredAuth(n, s.Auth)
	require.Equal(t, "audit", a.Roles[0].Name)
	require.Equal(t, "/config", a.Roles[1].Permissions[0].Key)
	require.Equal(t, "demo-user-orders-svc", a.Users[1].SecretName)
	require.Equal(t, "demo-auditor", a.Users[0].SecretName)

	r := s.DeepCopy().Auth
	r.Roles[0], r.Roles[1] = r.Roles[1], r.Roles[0]
	r.Roles[1].Permissions[0], r.Roles[1].Permissions[1] = r.Roles[1].Permissions[1], r.Roles[1].Permissions[0]
	r.Users[0], r.Users[1] = r.Users[1], r.Users[0]
	require.Equal(t, a, DesiredAuth(n, r), "reordering changes nothing")

	r.Roles[0].Permissions[0].Access = AccessReadWrite
	require.NotEqual(t, a.Hash, DesiredAuth(n, r).Hash)
	require.Nil(t, DesiredAuth(n, nil))
}

// The agent reads back exactly what the hook wrote; an edit that leaves the hash behind is refused.
func TestParseAuthConfig(t *testing.T) {
	a := DesiredAuth(Names{Cluster: "demo"}, authSpec().Auth)
	b, err := json.Marshal(a)
	require.NoError(t, err)
	back, err := ParseAuthConfig(b)
	require.NoError(t, err)
	require.Equal(t, a, back)

	edited := strings.Replace(string(b), `"access":"read"`, `"access":"readwrite"`, 1)
	require.NotEqual(t, string(b), edited)
	_, err = ParseAuthConfig([]byte(edited))
	require.ErrorContains(t, err, "does not match its content")
	_, err = ParseAuthConfig([]byte(`{"enabled":true,"extra":1}`))
	require.Error(t, err)
}

func TestPrefixEnd(t *testing.T) {
	require.Equal(t, "/b", PrefixEnd("/a"))
	require.Equal(t, "/b", PrefixEnd("/a\xff"))
	require.Equal(t, "\x00", PrefixEnd(""))
	require.Equal(t, "\x00", PrefixEnd("\xff\xff"))
	require.Equal(t, "", AuthPermission{Key: "/a"}.RangeEnd())
}

// Removing spec.auth while it is enforced is refused: the Jobs would lose their root identity.
func TestValidateAuthRemoval(t *testing.T) {
	on := authSpec()
	next := authSpec()
	next.Auth = nil
	ps := ValidateChange(&on, next, nil, nil, nil)
	require.Len(t, ps, 1)
	require.Equal(t, "InvalidAuth", ps[0].Reason)
	require.Contains(t, ps[0].Message, "set enabled: false first")
	on.Auth.Enabled = false
	require.Empty(t, ValidateChange(&on, next, nil, nil, nil))
}

// Switching between certificate and password logins under enforced auth is refused: etcd would take no
// user from what the clients (and the agents) present for a while.
func TestValidateAuthLoginChange(t *testing.T) {
	on := authSpec()
	next := authSpec()
	next.Security.TLS.Client.Auth = ptrTo(false)
	ps := ValidateChange(&on, next, nil, nil, nil)
	require.Len(t, ps, 1)
	require.Equal(t, "InvalidAuth", ps[0].Reason)
	require.Contains(t, ps[0].Message, "spec.security.tls.client.auth cannot change while spec.auth.enabled is true")
	require.Len(t, ValidateChange(&next, on, nil, nil, nil), 1, "nor the way back")
	on.Auth.Enabled, next.Auth.Enabled = false, false
	require.Empty(t, ValidateChange(&on, next, nil, nil, nil), "with auth not enforced it may change")
	// The login is part of the declaration the agents apply.
	require.False(t, DesiredAuthRotated(Names{Cluster: "demo"}, on.Auth, false, nil).Passwords)
	pw := DesiredAuthRotated(Names{Cluster: "demo"}, on.Auth, true, nil)
	require.True(t, pw.Passwords)
	require.NotEqual(t, DesiredAuth(Names{Cluster: "demo"}, on.Auth).Hash, pw.Hash)
}

// The hook's hint on the Lease round-trips; a value it could not have written is ignored and said.
func TestIntentAuthHint(t *testing.T) {
	h := DesiredAuth(Names{Cluster: "demo"}, authSpec().Auth).Hash
	in, problems := ParseIntent(Intent{Kind: IntentMember, Auth: h}.Annotations())
	require.Empty(t, problems)
	require.Equal(t, h, in.Auth)
	in, problems = ParseIntent(map[string]string{AnnIntent: IntentMember, AnnAuthDeclared: "read-it-now"})
	require.Empty(t, in.Auth)
	require.Len(t, problems, 1)
	_, ok := Intent{Kind: IntentMember}.Annotations()[AnnAuthDeclared]
	require.False(t, ok, "no spec.auth: no key")
}
