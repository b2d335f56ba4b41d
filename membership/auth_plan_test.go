package membership

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

// PlanAuth: what etcd holds becomes what is declared, in the order etcd requires, and nothing more.
func TestPlanAuth(t *testing.T) {
	want := authDeclared(true)
	pw := map[string]string{}
	for _, u := range []string{"root", "app", "sink", "nobody"} {
		pw[u] = u + "-password-0123456789"
	}
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
	}, steps(empty), "no Secret holds a password yet: no user is added (etcd would keep it without one), and no switch without root")

	require.Equal(t, Perm{Key: "\x00", End: "\x00", Type: permRead}, PermOf(api.AuthPermission{Prefix: true, Access: api.AccessRead}), "every key")
	require.Equal(t, "read on every key", PermOf(api.AuthPermission{Prefix: true, Access: api.AccessRead}).String())
}

// Passwords: a user is added with its Secret's password; one whose password etcd may not hold (a login
// failed, or auth is off and this agent did not set it) gets it set; the steps never print it.
func TestPlanAuthPasswords(t *testing.T) {
	want := authDeclared(true)
	pw := map[string]string{"root": "root-password-0123456789", "app": "app-password-0123456789"}
	plan := func(have AuthState) []AuthStep { return PlanAuth(want, have, pw) }
	empty := AuthState{Roles: map[string][]Perm{}, Users: map[string][]string{}}
	steps := plan(empty)
	require.Equal(t, AuthStep{Op: OpAddUser, User: "root", Password: pw["root"]}, steps[1], "root is added with its password, before the switch")
	var appAdd, nobodyAdd AuthStep
	for _, s := range steps {
		require.NotContains(t, s.String(), "password-0123", "no step prints a password")
		switch {
		case s.Op == OpAddUser && s.User == "app":
			appAdd = s
		case s.Op == OpAddUser && s.User == "nobody":
			nobodyAdd = s
		}
	}
	require.Equal(t, pw["app"], appAdd.Password)
	require.Empty(t, nobodyAdd.Password, "a user whose Secret holds no password yet is added without one")

	held := AuthState{Enabled: true,
		Roles:      map[string][]Perm{"root": {}, "app": {PermOf(want.Roles[0].Permissions[0])}, "config-reader": {PermOf(want.Roles[1].Permissions[0])}, "sink": {PermOf(want.Roles[2].Permissions[0])}},
		Users:      map[string][]string{"root": {"root"}, "app": {"app", "config-reader"}, "nobody": nil, "sink": {"sink"}},
		PasswordOK: map[string]bool{"root": true, "app": true},
	}
	require.Empty(t, plan(held), "every known password checked: nothing")
	held.PasswordOK["app"] = false
	got := plan(held)
	require.Equal(t, []AuthStep{{Op: OpSetPassword, User: "app", Password: pw["app"]}}, got, "a password changed by hand is set back")
	require.Equal(t, "set the password of user app", got[0].String())

	// A user made without a password (before passwords existed, or by hand): a password change would
	// leave it so; it is made again with its password and roles where passwords are the login.
	held.NoPassword = map[string]bool{"app": true}
	require.Empty(t, plan(held), "certificate logins with auth on: left as it is (its certificate needs none)")
	want = api.DesiredAuthRotated(api.Names{Cluster: "m"}, &api.AuthSpec{Enabled: true, Roles: want.Roles, Users: want.Users}, true, nil)
	require.Equal(t, []AuthStep{{Op: OpRemakeUser, User: "app", Password: pw["app"], Roles: []string{"app", "config-reader"}}}, plan(held))

	// Auth off: no login can check a password, so every one not known right is made again.
	held.Enabled, held.NoPassword, held.PasswordOK = false, nil, map[string]bool{"app": true}
	got = plan(held)
	require.Equal(t, AuthStep{Op: OpRemakeUser, User: "root", Password: pw["root"], Roles: []string{"root"}}, got[0])
	require.Equal(t, "enable auth", got[len(got)-1].String())
	require.Len(t, got, 2, "root made again; app known right; users without a password in a Secret left; then the switch: %v", got)
}

// A report carrying the same auth report at another address is no change (no Lease write, no sync).
func TestReportKeyComparesAuthByValue(t *testing.T) {
	a := api.Report{Role: api.RoleLeader, Auth: &api.AuthReport{Applied: "h", Expires: map[string]string{"u": "t", "v": "t"}}}
	b := api.Report{Role: api.RoleLeader, Auth: &api.AuthReport{Applied: "h", Expires: map[string]string{"v": "t", "u": "t"}}}
	require.Equal(t, reportKey(a), reportKey(b))
	b.Auth.Reverted = "x"
	require.NotEqual(t, reportKey(a), reportKey(b))
}
