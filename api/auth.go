package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// etcd users and roles, declared (docs/design/20-auth.md): spec.auth says which roles exist with which
// key ranges, and which users hold which roles. Each user's Secret carries a client certificate whose CN
// is the user name, issued by the cluster's CA, and a generated password: with client certificates
// required (spec.security.tls.client.auth) applications present the certificate; without, they log in
// with the password. The operator's own access (agents, Jobs, the plugin) uses a dedicated root identity
// (Names.RootSecret, a certificate and a password) that no application Secret carries.

// RootUser is etcd's administrator, and RootRole its role: reserved, never declared by a user.
const (
	RootUser = "root"
	RootRole = "root"
)

// Keys a user's Secret (and the root identity's) carries besides cert-manager's tls.crt, tls.key and
// ca.crt: the etcd user name to log in as and its password (docs/design/20-auth.md §20.4); during a
// password rotation's grace, the login it replaces and until when that one works
// (previous-until, RFC 3339); and the rotation mark the login was made for.
const (
	SecretKeyUsername         = "username"
	SecretKeyPassword         = "password"
	SecretKeyPreviousUsername = "previous-username"
	SecretKeyPreviousPassword = "previous-password"
	SecretKeyPreviousUntil    = "previous-until"
	SecretKeyLoginMark        = "login-mark"
)

// loginSlotSep separates a declared user's name from its login slot: declared names cannot hold it.
const loginSlotSep = "~"

// LoginSlot is the etcd user a declared user's applications log in as with a password: slot 1 or 2,
// in turn at each rotation, so that the previous login works while applications take the new one
// (§20.5). The declared user itself is the certificates' (CN), with no password.
func LoginSlot(user string, n int) string { return fmt.Sprintf("%s%s%d", user, loginSlotSep, n) }

// SlotOwner is the declared user whose login slot name is, and false for any other name.
func SlotOwner(name string) (string, bool) {
	owner, n, ok := strings.Cut(name, loginSlotSep)
	if !ok || owner == "" || n != "1" && n != "2" {
		return "", false
	}
	return owner, true
}

// Access kinds of a permission (spec.auth.roles[].permissions[].access).
const (
	AccessRead      = "read"
	AccessWrite     = "write"
	AccessReadWrite = "readwrite"
)

// Bounds of spec.auth: etcd keeps every user and role in memory and checks each request against the
// user's ranges, and the spec is recorded whole in spec.json (BoundSpecRecord: 64 KiB, 4096 tokens):
// a spec at every bound stays within that record with room for the rest of the spec.
const (
	MaxAuthRoles       = 32
	MaxAuthUsers       = 32
	MaxRolePermissions = 16
	MaxAuthPermissions = 128
	MaxAuthKeyBytes    = 1024
	MaxAuthKeyTotal    = 8 << 10
	maxAuthNameBytes   = 64
)

// AuthSpec declares etcd's authentication: the roles, the users and whether etcd enforces them.
type AuthSpec struct {
	// Enabled: etcd enforces authentication (etcd's auth enable). Roles and users are reconciled also
	// while it is false, so that applications can take their Secrets before it is switched on.
	Enabled bool       `json:"enabled,omitempty"`
	Roles   []AuthRole `json:"roles,omitempty"`
	Users   []AuthUser `json:"users,omitempty"`
}

// AuthRole is a named set of key-range permissions.
type AuthRole struct {
	Name        string           `json:"name"`
	Permissions []AuthPermission `json:"permissions,omitempty"`
}

// AuthPermission is one key (or, with Prefix, every key under it) and what may be done to it.
type AuthPermission struct {
	Key    string `json:"key"`
	Prefix bool   `json:"prefix,omitempty"`
	// Access: read, write or readwrite.
	Access string `json:"access"`
}

// AuthUser is an application's identity: a certificate with CN Name and a password, in SecretName.
type AuthUser struct {
	Name  string   `json:"name"`
	Roles []string `json:"roles,omitempty"`
	// SecretName receives the user's certificate, key and the CA (cert-manager's layout), its name and
	// its password; default <cluster>-user-<name>. It must start with <cluster>-: the member Role may
	// update it.
	SecretName string `json:"secretName,omitempty"`
}

// UserSecret is the Secret a user's credentials are written to.
func (n Names) UserSecret(u AuthUser) string {
	if u.SecretName != "" {
		return u.SecretName
	}
	return n.Cluster + "-user-" + u.Name
}

// RootSecret holds the operator's root identity (CN root): agents, Jobs and the plugin use it once
// spec.auth is set. No application Secret carries it.
func (n Names) RootSecret() string { return n.Cluster + "-root-tls" }

// RangeEnd is the etcd range end of a permission: "" for one key, the prefix's end for a prefix.
func (p AuthPermission) RangeEnd() string {
	if !p.Prefix {
		return ""
	}
	return PrefixEnd(p.Key)
}

// PrefixEnd is the first key after every key that starts with prefix (clientv3.GetPrefixRangeEnd);
// "\x00" (every key from prefix on) when prefix is all 0xff bytes.
func PrefixEnd(prefix string) string {
	end := []byte(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return string(end[:i+1])
		}
	}
	return "\x00"
}

// overlaps says whether two permissions' key ranges share a key.
func overlaps(a, b AuthPermission) bool {
	aEnd, bEnd := rangeEndExclusive(a), rangeEndExclusive(b)
	return a.Key < bEnd && b.Key < aEnd
}

// rangeEndExclusive is the first key after the permission's range, for comparisons ("\x00" sorts
// before every key, so "to the end" is represented by a key above every valid one).
func rangeEndExclusive(p AuthPermission) string {
	if !p.Prefix {
		return p.Key + "\x00"
	}
	if e := PrefixEnd(p.Key); e != "\x00" {
		return e
	}
	return strings.Repeat("\xff", MaxAuthKeyBytes+1)
}

var authNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]*$`)

// validateAuth checks spec.auth: names, ranges, role references and Secret names.
func validateAuth(cluster string, s ClusterSpec) []Problem {
	a := s.Auth
	if a == nil {
		return nil
	}
	var ps []Problem
	add := func(format string, args ...any) {
		ps = append(ps, Problem{"InvalidAuth", fmt.Sprintf(format, args...)})
	}
	t := s.Security.TLS
	switch {
	case !t.TLSOn():
		add("spec.auth needs spec.security.tls.enabled: users' certificates and passwords must not cross the network in the clear")
	case t.Client.SecretName != "":
		add("spec.auth needs the built-in CA on the client plane (spec.security.tls.client.secretName is set): the agents issue the users' certificates from it")
	}
	if len(a.Roles) > MaxAuthRoles {
		add("spec.auth.roles has %d roles, more than %d", len(a.Roles), MaxAuthRoles)
	}
	if len(a.Users) > MaxAuthUsers {
		add("spec.auth.users has %d users, more than %d", len(a.Users), MaxAuthUsers)
	}
	// checkName checks a role's or user's name, and that seen does not hold it yet (then adds it).
	checkName := func(field, v string, seen map[string]bool) {
		switch {
		case v == "":
			add("%s is empty", field)
		case len(v) > maxAuthNameBytes || !authNameRe.MatchString(v):
			add("%s %q must be at most %d characters of letters, digits, '.', '_', '@' and '-', starting with a letter or digit", field, v, maxAuthNameBytes)
		case v == RootRole:
			add("%s %q is reserved for etcdhook's own root identity", field, v)
		case seen[v]:
			add("%s %q is declared twice", field, v)
		default:
			seen[v] = true
		}
	}
	perms, keyBytes := 0, 0
	for _, r := range a.Roles {
		perms += len(r.Permissions)
		for _, p := range r.Permissions {
			keyBytes += len(p.Key)
		}
	}
	if perms > MaxAuthPermissions {
		add("spec.auth.roles hold %d permissions in all, more than %d", perms, MaxAuthPermissions)
	}
	if keyBytes > MaxAuthKeyTotal {
		add("spec.auth.roles' keys are %d bytes in all, more than %d", keyBytes, MaxAuthKeyTotal)
	}
	roles := map[string]bool{}
	for i, r := range a.Roles {
		f := fmt.Sprintf("spec.auth.roles[%d]", i)
		checkName(f+".name", r.Name, roles)
		if len(r.Permissions) > MaxRolePermissions {
			add("%s.permissions has %d entries, more than %d", f, len(r.Permissions), MaxRolePermissions)
		}
		for j, p := range r.Permissions {
			pf := fmt.Sprintf("%s.permissions[%d]", f, j)
			switch {
			case p.Key == "" && !p.Prefix:
				add("%s.key is empty (every key is key \"\" with prefix: true)", pf)
			case len(p.Key) > MaxAuthKeyBytes:
				add("%s.key is %d bytes, more than %d", pf, len(p.Key), MaxAuthKeyBytes)
			case strings.ContainsRune(p.Key, 0):
				add("%s.key contains a NUL byte", pf)
			}
			switch p.Access {
			case AccessRead, AccessWrite, AccessReadWrite:
			default:
				add("%s.access %q is none of read, write, readwrite", pf, p.Access)
			}
			for k := 0; k < j; k++ {
				if overlaps(r.Permissions[k], p) {
					add("%s (%s) overlaps %s.permissions[%d] (%s): give each key one permission", pf, p.describe(), f, k, r.Permissions[k].describe())
					break
				}
			}
		}
	}
	n := Names{Cluster: cluster}
	users, secrets, named := map[string]bool{}, map[string]string{}, specSecrets(s)
	for i, u := range a.Users {
		f := fmt.Sprintf("spec.auth.users[%d]", i)
		checkName(f+".name", u.Name, users)
		for j, r := range u.Roles {
			if !roles[r] {
				add("%s.roles[%d] %q is not declared in spec.auth.roles", f, j, r)
			}
		}
		sec := n.UserSecret(u)
		switch {
		case len(sec) > 253 || !dnsSubdomainRe.MatchString(sec):
			add("%s.secretName %q is not a DNS subdomain name", f, sec)
		case !strings.HasPrefix(sec, cluster+"-"):
			add("%s.secretName %q must start with %q: the members' Role may update it, so it cannot name another application's Secret", f, sec, cluster+"-")
		case n.HookOwnedSecret(sec) || sec == n.RootSecret():
			add("%s.secretName %q is a Secret etcdhook owns for this cluster: name your own", f, sec)
		case named[sec] != "":
			add("%s.secretName %q is the Secret %s names: name your own", f, sec, named[sec])
		case secrets[sec] != "":
			add("%s.secretName %q is user %q's Secret too", f, sec, secrets[sec])
		default:
			secrets[sec] = u.Name
		}
	}
	return ps
}

// specSecrets are the Secrets the spec names for other uses (TLS, backups, restore), each with the first
// field naming it. A user's Secret must be none of them: the member Role may get and update a user's
// Secret, and the backup credentials and keys are no member's to read.
func specSecrets(s ClusterSpec) map[string]string {
	out := map[string]string{}
	set := func(field, name string) {
		if name != "" && out[name] == "" {
			out[name] = field
		}
	}
	set("spec.security.tls.peer.secretName", s.Security.TLS.Peer.SecretName)
	set("spec.security.tls.client.secretName", s.Security.TLS.Client.SecretName)
	if b := s.Backup; b != nil {
		set("spec.backup.credentialsSecret", b.CredentialsSecret)
		if b.Encryption != nil {
			set("spec.backup.encryption.secretName", b.Encryption.SecretName)
		}
		if b.Copy != nil {
			set("spec.backup.copy.credentialsSecret", b.Copy.CredentialsSecret)
		}
	}
	if r := s.Restore; r != nil {
		set("spec.restore.credentialsSecret", r.CredentialsSecret)
		if r.Encryption != nil {
			set("spec.restore.encryption.secretName", r.Encryption.SecretName)
		}
	}
	return out
}

var dnsSubdomainRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

func (p AuthPermission) describe() string {
	if p.Prefix {
		return fmt.Sprintf("prefix %q", p.Key)
	}
	return fmt.Sprintf("key %q", p.Key)
}

// AuthConfig is spec.auth as the agents apply it (ConfigMap key auth.json): the roles with their
// permissions and the users with their roles, each sorted, so that one spec gives one Hash whatever
// order the user wrote it in.
type AuthConfig struct {
	Enabled bool       `json:"enabled"`
	Roles   []AuthRole `json:"roles"`
	Users   []AuthUser `json:"users"`
	// RootSecret: the root identity's Secret (Names.RootSecret), which the agents keep once they read this.
	RootSecret string `json:"rootSecret"`
	// Passwords: etcd does not require client certificates (spec.security.tls.client.auth false), so it
	// takes no user from them: applications log in with their passwords, and etcdhook's own calls with
	// root's (the root Secret's password, for a token).
	Passwords bool `json:"passwords,omitempty"`
	// Rotations: the rotation mark each user's certificate must carry (AnnRotateUser; absent: none).
	// A certificate without its user's mark is replaced, with a new key.
	Rotations map[string]string `json:"rotations,omitempty"`
	// Hash identifies the rest: an agent reports the hash it applied (Report.AuthApplied).
	Hash string `json:"hash"`
}

// DesiredAuth is the normalised AuthConfig of a valid spec, nil without spec.auth. Secret names are
// filled in.
// The users authenticate by certificate.
func DesiredAuth(n Names, a *AuthSpec) *AuthConfig { return DesiredAuthRotated(n, a, false, nil) }

// DesiredAuthRotated is DesiredAuth with the login (passwords: the client plane requires no
// certificate, AuthConfig.Passwords) and the users' rotation marks (user name to mark).
func DesiredAuthRotated(n Names, a *AuthSpec, passwords bool, rotations map[string]string) *AuthConfig {
	if a == nil {
		return nil
	}
	c := &AuthConfig{Enabled: a.Enabled, Roles: []AuthRole{}, Users: []AuthUser{}, RootSecret: n.RootSecret(), Passwords: passwords}
	if len(rotations) > 0 {
		c.Rotations = rotations
	}
	for _, r := range a.Roles {
		ps := slices.Clone(r.Permissions)
		sort.Slice(ps, func(i, j int) bool {
			return ps[i].Key < ps[j].Key || ps[i].Key == ps[j].Key && !ps[i].Prefix && ps[j].Prefix
		})
		if ps == nil {
			ps = []AuthPermission{}
		}
		c.Roles = append(c.Roles, AuthRole{Name: r.Name, Permissions: ps})
	}
	sort.Slice(c.Roles, func(i, j int) bool { return c.Roles[i].Name < c.Roles[j].Name })
	for _, u := range a.Users {
		rs := slices.Clone(u.Roles)
		sort.Strings(rs)
		rs = slices.Compact(rs)
		if rs == nil {
			rs = []string{}
		}
		c.Users = append(c.Users, AuthUser{Name: u.Name, Roles: rs, SecretName: n.UserSecret(u)})
	}
	sort.Slice(c.Users, func(i, j int) bool { return c.Users[i].Name < c.Users[j].Name })
	c.Hash = c.contentHash()
	return c
}

// ParseAuthConfig reads auth.json as the agent does: a document that does not decode, or whose hash
// does not match its content (a hand edit of the ConfigMap), is refused, never applied.
func ParseAuthConfig(b []byte) (*AuthConfig, error) {
	var c AuthConfig
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return nil, fmt.Errorf("auth.json: %w", err)
	}
	if got := c.contentHash(); got != c.Hash {
		return nil, fmt.Errorf("auth.json: hash %q does not match its content (%s): not written by the hook", c.Hash, got)
	}
	return &c, nil
}

// contentHash is the hash of everything but Hash: the one the hook writes and the agent checks.
func (c AuthConfig) contentHash() string {
	c.Hash = ""
	b, _ := json.Marshal(c) // typed: cannot fail
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:6])
}

// AnnAuth is the leader's agent's report of etcd's authentication (AuthReport as JSON); empty on the
// other members' Leases.
const AnnAuth = "etcd.io/auth"

// AnnAuthDeclared on a member Lease is the hook's hint: the hash of the declared auth (Intent.Auth).
const AnnAuthDeclared = "etcd.io/auth-declared"

// authHashRe is AuthConfig.Hash as DesiredAuth writes it.
var authHashRe = regexp.MustCompile(`^[0-9a-f]{12}$`)

// AnnRootIdentity is "true" while the member's agent presents the root identity in its own etcd calls.
const AnnRootIdentity = "etcd.io/root-identity"

// BoundAuthReport bounds AnnAuth: a user's entries are under 200 bytes.
var BoundAuthReport = Bound{Bytes: 24 << 10, Depth: 3, Tokens: 16 + 4*MaxAuthUsers}

// AuthReport is what the leader's agent says of etcd's authentication.
type AuthReport struct {
	// Applied: the hash of the auth config (AuthConfig.Hash) etcd holds in full; "" until one is.
	Applied string `json:"applied,omitempty"`
	// Enabled: etcd enforces authentication.
	Enabled bool `json:"enabled"`
	// Reverted: the hand edits last put back, after the time they were found ("<RFC 3339> <change>; …").
	Reverted string `json:"reverted,omitempty"`
	// Error: why the last reconcile did not finish.
	Error string `json:"error,omitempty"`
	// Expires: each user's certificate expiry (RFC 3339); UserErrors: why a user's Secret is not kept.
	Expires    map[string]string `json:"expires,omitempty"`
	UserErrors map[string]string `json:"userErrors,omitempty"`
}

// String is the annotation's value ("" for nil).
func (r *AuthReport) String() string {
	if r == nil {
		return ""
	}
	c := *r
	c.Reverted, c.Error = Truncate(c.Reverted, BoundText.Bytes/2), Truncate(c.Error, BoundText.Bytes/2)
	b, _ := json.Marshal(c) // typed: cannot fail
	return string(b)
}

// ParseAuthReport reads AnnAuth; "" is nil. A value over its bound or that does not decode is a hand
// edit and is ignored (nil, with the error).
func ParseAuthReport(s string) (*AuthReport, error) {
	if err := BoundAuthReport.Check(s); err != nil { // before decoding: the bound is what keeps it cheap
		return nil, err
	}
	return parseReport[AuthReport](s, nil)
}

// AnnRotateUser on the EtcdCluster asks for a new key and certificate for one user: "<user>=<token>"
// (kubectl etcd rotate-user). Each new token rotates again; the old certificate stays valid until it
// expires (etcd checks no revocation list).
const AnnRotateUser = "etcd.io/rotate-user"

// ParseRotateUser reads AnnRotateUser: the user and its token.
func ParseRotateUser(v string) (user, token string, err error) {
	user, token, ok := strings.Cut(strings.TrimSpace(v), "=")
	if !ok || user == "" || token == "" {
		return "", "", fmt.Errorf("%s %q is not <user>=<token>", AnnRotateUser, v)
	}
	return user, token, nil
}

// CondAuthOutOfSync is True while etcd's users and roles are not as spec.auth declares (being applied,
// or failing), or a user's Secret cannot be kept; False (InSync) once the leader's agent reports the
// declaration applied. Absent without spec.auth.
const CondAuthOutOfSync = "AuthOutOfSync"

// AuthStatus is where spec.auth stands (docs/design/20-auth.md).
type AuthStatus struct {
	// Enabled: etcd enforces authentication, as the leader's agent reports it.
	Enabled bool `json:"enabled"`
	// Declared: the hash of what spec.auth declares; Applied: the one etcd holds in full.
	Declared string `json:"declared"`
	Applied  string `json:"applied,omitempty"`
	// Users: each declared user's Secret and certificate expiry.
	Users []AuthUserStatus `json:"users,omitempty"`
	// LastReverted: the last hand edit put back ("<RFC 3339> <change>; …").
	LastReverted string `json:"lastReverted,omitempty"`
}

// AuthUserStatus is one declared user.
type AuthUserStatus struct {
	Name       string `json:"name"`
	SecretName string `json:"secretName"`
	// NotAfter: the certificate's expiry, once issued.
	NotAfter string `json:"notAfter,omitempty"`
	// Problem: why its Secret is not kept (a Secret of that name that another application owns).
	Problem string `json:"problem,omitempty"`
}
