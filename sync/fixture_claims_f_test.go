package sync

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

// Claims of the etcd users and roles fixtures (spec.auth, docs/design/20-auth.md).

// claimsFObserved is what the fixture's request shows of the children (what the previous sync
// answered, as the API server keeps it), by kind and name.
func claimsFObserved(t *testing.T, name string) map[string]map[string]any {
	t.Helper()
	var req struct {
		Children map[string]map[string]map[string]any `json:"children"`
	}
	require.NoError(t, json.Unmarshal(syncFixtureRequest(t, name), &req))
	out := map[string]map[string]any{}
	for _, group := range req.Children {
		for n, obj := range group {
			out[obj["kind"].(string)+"/"+n] = obj
		}
	}
	return out
}

// claimsFAuth is the auth config in a ConfigMap (nil without auth.json), failing when it is not one the
// agents would accept (its hash must match its content).
func claimsFAuth(t *testing.T, cm map[string]any) *api.AuthConfig {
	t.Helper()
	raw, ok := dig(cm, "data", api.ConfigKeyAuth).(string)
	if !ok {
		return nil
	}
	c, err := api.ParseAuthConfig([]byte(raw))
	require.NoError(t, err, "the agents accept auth.json")
	return c
}

// claimsFAnswered and claimsFPrevious are the answered auth config and the one the request shows.
func claimsFAnswered(t *testing.T, a *fxAnswer) *api.AuthConfig {
	t.Helper()
	return claimsFAuth(t, a.child(t, "ConfigMap", ""))
}

func claimsFPrevious(t *testing.T, name string) *api.AuthConfig {
	t.Helper()
	return claimsFAuth(t, claimsFObserved(t, name)["ConfigMap/demo-config"])
}

// claimsFSecrets are the Secrets the member Role may get and update; configMap says whether it may get
// the ConfigMap (the agents read auth.json live).
func claimsFSecrets(role map[string]any) (secrets []string, configMap bool) {
	rules, _ := role["rules"].([]any)
	for _, r := range rules {
		switch res := dig(r, "resources", 0); {
		case res == "secrets" && dig(r, "resourceNames") != nil:
			secrets = strs(dig(r, "resourceNames"))
		case res == "configmaps":
			configMap = true
		}
	}
	return secrets, configMap
}

func claimsFMemberRole(t *testing.T, a *fxAnswer) map[string]any {
	t.Helper()
	return claimsDHasChild(t, a, "Role", "demo-member")
}

// claimsFHints asserts every member's Lease hints hash as the declared auth ("" none).
func claimsFHints(t *testing.T, a *fxAnswer, hash string) {
	t.Helper()
	for i, in := range claimsBMembers(t, a, 3) {
		require.Equal(t, hash, in.Auth, "member %d's etcd.io/auth-declared", i)
	}
}

// claimsFNoRestart: the StatefulSet is answered as it is (no template change, no roll).
func claimsFNoRestart(t *testing.T, a *fxAnswer, name string) {
	t.Helper()
	require.Equal(t, claimsFObserved(t, name)["StatefulSet/demo"]["spec"], a.child(t, "StatefulSet", "")["spec"])
	claimsBNoRoll(t, a)
}

// claimsFWithin says whether every field want sets has the same value in have (lists whole).
func claimsFWithin(want, have any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		return reflect.DeepEqual(want, have)
	}
	hm, ok := have.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range wm {
		if !claimsFWithin(v, hm[k]) {
			return false
		}
	}
	return true
}

// claimsFAsBefore: every child is answered as the request shows it (every field the answer sets has the
// value observed), none dropped or added.
func claimsFAsBefore(t *testing.T, a *fxAnswer, name string) {
	t.Helper()
	observed := claimsFObserved(t, name)
	cs, _ := a.resp["children"].([]any)
	require.Len(t, cs, len(observed), "no child dropped or added")
	for _, c := range cs {
		key := dig(c, "kind").(string) + "/" + dig(c, "metadata", "name").(string)
		require.True(t, claimsFWithin(c, observed[key]), "%s is answered as before", key)
	}
}

// claimsFUserStatus is status.auth.users by name.
func claimsFUserStatus(a *fxAnswer) map[string]map[string]any {
	out := map[string]map[string]any{}
	us, _ := claimsDStatus(a, "auth", "users").([]any)
	for _, u := range us {
		m, _ := u.(map[string]any)
		out[m["name"].(string)] = m
	}
	return out
}

// claimsFApplying: the declaration changed from the one the request shows applied: every Lease hints
// the new hash, AuthOutOfSync says Applying it, status.auth still shows the old one applied, and no
// member restarts for it.
func claimsFApplying(t *testing.T, a *fxAnswer, name string) *api.AuthConfig {
	t.Helper()
	c, prev := claimsFAnswered(t, a), claimsFPrevious(t, name)
	require.NotEqual(t, prev.Hash, c.Hash)
	claimsFHints(t, a, c.Hash)
	a.conditionIs(t, api.CondAuthOutOfSync, "True", "Applying")
	require.Contains(t, a.condition(api.CondAuthOutOfSync)["message"], c.Hash)
	require.Equal(t, c.Hash, claimsDStatus(a, "auth", "declared"))
	require.Equal(t, prev.Hash, claimsDStatus(a, "auth", "applied"))
	claimsFNoRestart(t, a, name)
	return c
}

// claimsFRefused: spec.auth is refused with InvalidSpec InvalidAuth naming every part, and every child
// is answered as the previous sync answered it (the auth.json, Role and Lease hints of the last valid
// spec, nothing dropped), on a cluster whose etcd enforces auth.
func claimsFRefused(name string, parts ...string) func(t *testing.T, a *fxAnswer) {
	return func(t *testing.T, a *fxAnswer) {
		require.Equal(t, 200, a.code)
		a.conditionIs(t, "InvalidSpec", "True", "InvalidAuth")
		claimsBCondMessageHas(t, a, "InvalidSpec", parts...)
		claimsFAsBefore(t, a, name)
		prev := claimsFPrevious(t, name)
		claimsFHints(t, a, prev.Hash)
		require.Equal(t, prev.Hash, claimsDStatus(a, "auth", "declared"))
		require.Equal(t, true, claimsDStatus(a, "auth", "enabled"), "the leader's agent reports auth enforced")
		require.Equal(t, "Running", a.phase())
	}
}

// claimsFRefusedInSync is claimsFRefused on a cluster whose declaration in force is enforced and applied.
func claimsFRefusedInSync(name string, parts ...string) func(t *testing.T, a *fxAnswer) {
	refused := claimsFRefused(name, parts...)
	return func(t *testing.T, a *fxAnswer) {
		refused(t, a)
		require.True(t, claimsFPrevious(t, name).Enabled)
		a.conditionIs(t, api.CondAuthOutOfSync, "False", "InSync")
	}
}

func init() {
	const users = "2026-04-01T12:00:00Z" // the world's users' certificates expire 90 days after the fixture clock
	addClaims(map[string]fixtureClaim{
		"auth-declared-running": {"spec.auth added to a running cluster renders auth.json (sorted, default Secret names, the root Secret) that the agents accept, lets the members read it and keep the root and users' Secrets, hints its hash on every Lease and restarts no member; AuthOutOfSync NotReported until the leader's agent reports", func(t *testing.T, a *fxAnswer) {
			c := claimsFAnswered(t, a)
			require.NotNil(t, c)
			require.False(t, c.Enabled)
			require.False(t, c.Passwords, "client certificates are required: users present theirs")
			require.Equal(t, "demo-root-tls", c.RootSecret)
			require.Equal(t, []api.AuthRole{
				{Name: "billing", Permissions: []api.AuthPermission{{Key: "/billing/", Prefix: true, Access: api.AccessReadWrite}}},
				{Name: "orders", Permissions: []api.AuthPermission{{Key: "/config", Access: api.AccessRead}, {Key: "/orders/", Prefix: true, Access: api.AccessReadWrite}}},
			}, c.Roles)
			require.Equal(t, []api.AuthUser{
				{Name: "billing-svc", Roles: []string{"billing", "orders"}, SecretName: "demo-billing"},
				{Name: "orders-svc", Roles: []string{"orders"}, SecretName: "demo-user-orders-svc"},
			}, c.Users)
			require.Nil(t, claimsFPrevious(t, "auth-declared-running"), "the request had none")
			secrets, cm := claimsFSecrets(claimsFMemberRole(t, a))
			require.True(t, cm, "the agents read auth.json through the API")
			require.Equal(t, []string{"demo-ca", "demo-client-tls", "demo-root-tls", "demo-billing", "demo-user-orders-svc"}, secrets)
			claimsFHints(t, a, c.Hash)
			require.Equal(t, c.Hash, claimsDStatus(a, "auth", "declared"))
			require.Nil(t, claimsDStatus(a, "auth", "applied"))
			a.conditionIs(t, api.CondAuthOutOfSync, "True", "NotReported")
			claimsFNoRestart(t, a, "auth-declared-running")
		}},
		"auth-enabled-in-sync": {"enabled: true, once the leader's agent reports that auth.json applied: AuthOutOfSync False InSync 'authentication enforced', status.auth enabled with each user's Secret and certificate expiry", func(t *testing.T, a *fxAnswer) {
			c := claimsFAnswered(t, a)
			require.True(t, c.Enabled)
			require.Equal(t, c.Hash, claimsFPrevious(t, "auth-enabled-in-sync").Hash, "the leader's agent reports what the last sync answered")
			a.conditionIs(t, api.CondAuthOutOfSync, "False", "InSync")
			claimsBCondMessageHas(t, a, api.CondAuthOutOfSync, c.Hash, "authentication enforced")
			require.Equal(t, true, claimsDStatus(a, "auth", "enabled"))
			require.Equal(t, c.Hash, claimsDStatus(a, "auth", "applied"))
			require.Equal(t, map[string]map[string]any{
				"billing-svc": {"name": "billing-svc", "secretName": "demo-billing", "notAfter": users},
				"orders-svc":  {"name": "orders-svc", "secretName": "demo-user-orders-svc", "notAfter": users},
			}, claimsFUserStatus(a))
			claimsFHints(t, a, c.Hash)
		}},
		"auth-user-added": {"a user added (its roles unsorted and given twice) joins auth.json with its roles sorted and deduplicated and its default Secret, which the members may then keep; AuthOutOfSync Applying the new hash, no expiry for the new user yet", func(t *testing.T, a *fxAnswer) {
			c := claimsFApplying(t, a, "auth-user-added")
			require.Equal(t, api.AuthUser{Name: "audit", Roles: []string{"billing", "orders"}, SecretName: "demo-user-audit"}, c.Users[0])
			require.Equal(t, claimsFPrevious(t, "auth-user-added").Roles, c.Roles, "the roles are unchanged")
			secrets, _ := claimsFSecrets(claimsFMemberRole(t, a))
			require.Contains(t, secrets, "demo-user-audit")
			us := claimsFUserStatus(a)
			require.Equal(t, map[string]any{"name": "audit", "secretName": "demo-user-audit"}, us["audit"], "no certificate issued yet")
			require.Equal(t, users, us["orders-svc"]["notAfter"])
		}},
		"auth-role-changed": {"a role's permissions changed (access narrowed, a key added) change that role in auth.json and its hash; the users and the Secrets the members keep stay as they were", func(t *testing.T, a *fxAnswer) {
			c := claimsFApplying(t, a, "auth-role-changed")
			prev := claimsFPrevious(t, "auth-role-changed")
			require.Equal(t, api.AuthRole{Name: "billing", Permissions: []api.AuthPermission{
				{Key: "/billing-config", Access: api.AccessWrite}, {Key: "/billing/", Prefix: true, Access: api.AccessRead},
			}}, c.Roles[0])
			require.Equal(t, prev.Roles[1], c.Roles[1], "the other role is unchanged")
			require.Equal(t, prev.Users, c.Users)
			require.Equal(t, claimsFObserved(t, "auth-role-changed")["Role/demo-member"]["rules"], claimsFMemberRole(t, a)["rules"])
		}},
		"auth-user-and-role-removed": {"a user and a role removed leave auth.json (the leader's agent then deletes them from etcd) and the members' Role stops naming the user's Secret; the remaining user and role stay", func(t *testing.T, a *fxAnswer) {
			c := claimsFApplying(t, a, "auth-user-and-role-removed")
			prev := claimsFPrevious(t, "auth-user-and-role-removed")
			require.Equal(t, prev.Roles[1:], c.Roles, "orders stays, billing goes")
			require.Equal(t, prev.Users[1:], c.Users, "orders-svc stays, billing-svc goes")
			secrets, _ := claimsFSecrets(claimsFMemberRole(t, a))
			require.Equal(t, []string{"demo-ca", "demo-client-tls", "demo-root-tls", "demo-user-orders-svc"}, secrets)
			require.Equal(t, []string{"orders-svc"}, sortedKeys(claimsFUserStatus(a)))
		}},
		"auth-removed-disabled": {"spec.auth removed once disabled is accepted: no auth.json nor Lease hint, the members' Role loses the ConfigMap and the root and users' Secrets, status.auth and AuthOutOfSync go, no member restarts", func(t *testing.T, a *fxAnswer) {
			require.False(t, claimsFPrevious(t, "auth-removed-disabled").Enabled)
			require.Nil(t, claimsFAnswered(t, a))
			claimsFHints(t, a, "")
			secrets, cm := claimsFSecrets(claimsFMemberRole(t, a))
			require.False(t, cm)
			require.Equal(t, []string{"demo-ca", "demo-client-tls"}, secrets)
			require.Nil(t, claimsDStatus(a, "auth"))
			require.Nil(t, a.condition(api.CondAuthOutOfSync))
			require.Nil(t, a.condition("InvalidSpec"))
			claimsFNoRestart(t, a, "auth-removed-disabled")
		}},
		"auth-invalid-overlapping-ranges": {"two permissions of one role sharing keys (a key under a prefix; a key that is also a prefix) are InvalidAuth naming both entries of each pair; every child is answered as before", claimsFRefusedInSync("auth-invalid-overlapping-ranges",
			`spec.auth.roles[0].permissions[2] (key "/orders/archive") overlaps spec.auth.roles[0].permissions[0] (prefix "/orders/")`,
			`spec.auth.roles[1].permissions[1] (key "/billing/") overlaps spec.auth.roles[1].permissions[0] (prefix "/billing/")`)},
		"auth-invalid-key-ranges": {"an empty key without prefix and an access outside read/write/readwrite are InvalidAuth naming each field; every child is answered as before", claimsFRefusedInSync("auth-invalid-key-ranges",
			`spec.auth.roles[1].permissions[0].key is empty`, `spec.auth.roles[1].permissions[1].access "rw" is none of read, write, readwrite`)},
		"auth-invalid-unknown-role": {"a user naming roles not declared (admin, and root, etcdhook's own) is InvalidAuth naming each; every child is answered as before", claimsFRefusedInSync("auth-invalid-unknown-role",
			`spec.auth.users[1].roles[1] "admin" is not declared`, `spec.auth.users[1].roles[2] "root" is not declared`)},
		"auth-invalid-secret-names": {"a user's Secret that is another user's, the root identity's, the shared client Secret or the backup credentials the same edit names is InvalidAuth naming each; every child is answered as before (no backup either)", claimsFRefusedInSync("auth-invalid-secret-names",
			`spec.auth.users[1].secretName "demo-user-orders-svc" is user "orders-svc"'s Secret too`,
			`spec.auth.users[2].secretName "demo-root-tls" is a Secret etcdhook owns`,
			`spec.auth.users[3].secretName "demo-client-tls" is a Secret etcdhook owns`,
			`spec.auth.users[4].secretName "demo-backup-credentials" is the Secret spec.backup.credentialsSecret names`)},
		"auth-removed-while-enabled": {"removing spec.auth while enabled is InvalidAuth (disable it first): auth.json, the Lease hints and the members' access to the root identity stay; every child is answered as before", claimsFRefusedInSync("auth-removed-while-enabled",
			"spec.auth cannot be removed while spec.auth.enabled is true")},
		"auth-removed-before-disable-applied": {"spec.auth removed after enabled: false was answered but before the leader's agent applied it is InvalidAuth (etcd still enforces, status.auth.enabled): auth.json keeps the disable for the agents; every child is answered as before", func(t *testing.T, a *fxAnswer) {
			claimsFRefused("auth-removed-before-disable-applied", "while etcd still enforces authentication (status.auth.enabled)")(t, a)
			prev := claimsFPrevious(t, "auth-removed-before-disable-applied")
			require.False(t, prev.Enabled, "the record already says enabled: false")
			require.NotEqual(t, prev.Hash, claimsDStatus(a, "auth", "applied"), "not applied yet")
			a.conditionIs(t, api.CondAuthOutOfSync, "True", "Applying")
		}},
	})
}
