package membership

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

// PlanAuth: what etcd holds becomes what is declared, in the order etcd requires, and nothing more.
func TestPlanAuth(t *testing.T) {
	want := authDeclared(true)
	pw := map[string]string{"root": "root-password-0123456789"}
	steps := func(have AuthState) []string {
		var out []string
		for _, s := range PlanAuth(want, have, pw) {
			out = append(out, s.String())
		}
		return out
	}
	empty := AuthState{Roles: map[string][]Perm{}, Users: map[string][]string{}}
	require.Equal(t, []string{
		"add role root", "add user root", "grant user root role root",
		"add role app", `grant role app readwrite on prefix "/app/"`,
		"add role config-reader", `grant role config-reader read on key "/config"`,
		"add role sink", `grant role sink write on prefix "/drop/"`,
		"add user app", "grant user app role app", "grant user app role config-reader",
		"add user nobody",
		"add user sink", "grant user sink role sink",
		"enable auth",
	}, steps(empty), "from nothing: root first, the switch last")

	held := AuthState{Enabled: true,
		Roles: map[string][]Perm{
			"root":          {},
			"app":           {PermOf(api.AuthPermission{Key: "/app/", Prefix: true, Access: api.AccessRead}), {Key: "/", End: "0", Type: permReadWrite}},
			"config-reader": {PermOf(api.AuthPermission{Key: "/config", Access: api.AccessRead})},
			"sink":          {PermOf(api.AuthPermission{Key: "/drop/", Prefix: true, Access: api.AccessWrite})},
			"stale":         {},
		},
		Users:      map[string][]string{"root": {"root"}, "app": {"app", "config-reader"}, "nobody": {"root"}, "sink": {"sink"}, "intruder": {}},
		PasswordOK: map[string]bool{"root": true, "app": true, "nobody": true, "sink": true},
	}
	require.Equal(t, []string{
		`grant role app readwrite on prefix "/app/"`, `revoke from role app readwrite on prefix "/"`,
		"revoke from user nobody role root",
		"delete user intruder", "delete role stale",
	}, steps(held), "hand edits: a type changed, a range added, root granted, a user and a role added")

	held.Roles["app"] = []Perm{PermOf(api.AuthPermission{Key: "/app/", Prefix: true, Access: api.AccessReadWrite})}
	held.Users["nobody"] = nil
	delete(held.Users, "intruder")
	delete(held.Roles, "stale")
	require.Empty(t, steps(held), "in sync: nothing")

	want = authDeclared(false)
	require.Equal(t, []string{"disable auth"}, steps(held))
	require.Nil(t, PlanAuth(nil, held, nil), "no spec.auth: etcd's auth is left alone")

	want = authDeclared(true)
	pw = map[string]string{}
	require.Equal(t, []string{
		"add role root", "add role app", `grant role app readwrite on prefix "/app/"`,
		"add role config-reader", `grant role config-reader read on key "/config"`,
		"add role sink", `grant role sink write on prefix "/drop/"`,
		"add user app", "grant user app role app", "grant user app role config-reader",
		"add user nobody",
		"add user sink", "grant user sink role sink",
	}, steps(empty), "no root Secret yet: root is not added (etcd would keep it without a password), and no switch without root")

	require.Equal(t, Perm{Key: "\x00", End: "\x00", Type: permRead}, PermOf(api.AuthPermission{Prefix: true, Access: api.AccessRead}), "every key")
	require.Equal(t, "read on every key", PermOf(api.AuthPermission{Prefix: true, Access: api.AccessRead}).String())
}

// Password logins: each user's login slots that the Secrets name are users with its roles and their
// passwords; the certificates' users have none. A login whose password is not known right is set; one
// etcd may hold without a password is made again; a slot no longer named is deleted. No step prints a
// password.
func TestPlanAuthLogins(t *testing.T) {
	want := api.DesiredAuthRotated(api.Names{Cluster: "m"}, &api.AuthSpec{Enabled: true, Roles: authDeclared(true).Roles, Users: authDeclared(true).Users}, true, nil)
	pw := map[string]string{"root": "root-password-0123456789", "app~1": "app1-password-0123456789"}
	plan := func(have AuthState) []AuthStep { return PlanAuth(want, have, pw) }
	empty := AuthState{Roles: map[string][]Perm{}, Users: map[string][]string{}}
	steps := plan(empty)
	require.Equal(t, AuthStep{Op: OpAddUser, User: "root", Password: pw["root"]}, steps[1], "root is added with its password, before the switch")
	var adds []AuthStep
	for _, s := range steps {
		require.NotContains(t, s.String(), "password-0123", "no step prints a password")
		if s.Op == OpAddUser {
			adds = append(adds, s)
		}
	}
	require.Equal(t, []AuthStep{{Op: OpAddUser, User: "root", Password: pw["root"]}, {Op: OpAddUser, User: "app"}, {Op: OpAddUser, User: "nobody"},
		{Op: OpAddUser, User: "sink"}, {Op: OpAddUser, User: "app~1", Password: pw["app~1"]}}, adds,
		"the certificates' users without a password, app's login slot with its password")
	require.Contains(t, steps, AuthStep{Op: OpGrantRole, User: "app~1", Role: "config-reader"}, "a login slot holds its user's roles")

	held := AuthState{Enabled: true,
		Roles: map[string][]Perm{"root": {}, "app": {PermOf(want.Roles[0].Permissions[0])}, "config-reader": {PermOf(want.Roles[1].Permissions[0])}, "sink": {PermOf(want.Roles[2].Permissions[0])}},
		Users: map[string][]string{"root": {"root"}, "app": {"app", "config-reader"}, "app~1": {"app", "config-reader"}, "app~2": {"app", "config-reader"},
			"nobody": nil, "sink": {"sink"}},
		PasswordOK: map[string]bool{"root": true, "app~1": true},
	}
	require.Equal(t, []AuthStep{{Op: OpDeleteUser, User: "app~2"}}, plan(held), "a slot no Secret names any more (a rotation's grace over) is deleted")
	delete(held.Users, "app~2")
	require.Empty(t, plan(held))

	held.PasswordOK["app~1"] = false
	got := plan(held)
	require.Equal(t, []AuthStep{{Op: OpSetPassword, User: "app~1", Password: pw["app~1"]}}, got, "a password changed by hand is set back")
	require.Equal(t, "set the password of user app~1", got[0].String())

	held.NoPassword = map[string]bool{"app~1": true}
	require.Equal(t, []AuthStep{{Op: OpRemakeUser, User: "app~1", Password: pw["app~1"], Roles: []string{"app", "config-reader"}}}, plan(held),
		"made without a password (by hand): made again, a password change would leave it so")

	// Auth off: no login can check a password, so every one not known right is made again.
	held.Enabled, held.NoPassword, held.PasswordOK = false, nil, map[string]bool{"app~1": true}
	got = plan(held)
	require.Equal(t, []AuthStep{{Op: OpRemakeUser, User: "root", Password: pw["root"], Roles: []string{"root"}}, {Op: OpEnableAuth}}, got)

	// Certificate logins, auth on: a root made without a password is left so (its certificate needs none).
	want = authDeclared(true)
	held.Enabled, held.NoPassword, held.PasswordOK = true, map[string]bool{"root": true}, map[string]bool{"app~1": true}
	require.Empty(t, plan(held))
}

// A report carrying the same auth report at another address is no change (no Lease write, no sync).
func TestReportKeyComparesAuthByValue(t *testing.T) {
	a := api.Report{Role: api.RoleLeader, Auth: &api.AuthReport{Applied: "h", Expires: map[string]string{"u": "t", "v": "t"}}}
	b := api.Report{Role: api.RoleLeader, Auth: &api.AuthReport{Applied: "h", Expires: map[string]string{"v": "t", "u": "t"}}}
	require.Equal(t, reportKey(a), reportKey(b))
	b.Auth.Reverted = "x"
	require.NotEqual(t, reportKey(a), reportKey(b))
}
