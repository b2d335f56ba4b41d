package membership

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

// PlanAuth: what etcd holds becomes what is declared, in the order etcd requires, and nothing more.
func TestPlanAuth(t *testing.T) {
	want := authDeclared(true)
	steps := func(have AuthState) []string {
		var out []string
		for _, s := range PlanAuth(want, have) {
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
		Users: map[string][]string{"root": {"root"}, "app": {"app", "config-reader"}, "nobody": {"root"}, "sink": {"sink"}, "intruder": {}},
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
	require.Nil(t, PlanAuth(nil, held), "no spec.auth: etcd's auth is left alone")

	require.Equal(t, Perm{Key: "\x00", End: "\x00", Type: permRead}, PermOf(api.AuthPermission{Prefix: true, Access: api.AccessRead}), "every key")
	require.Equal(t, "read on every key", PermOf(api.AuthPermission{Prefix: true, Access: api.AccessRead}).String())
}

// A report carrying the same auth report at another address is no change (no Lease write, no sync).
func TestReportKeyComparesAuthByValue(t *testing.T) {
	a := api.Report{Role: api.RoleLeader, Auth: &api.AuthReport{Applied: "h", Expires: map[string]string{"u": "t", "v": "t"}}}
	b := api.Report{Role: api.RoleLeader, Auth: &api.AuthReport{Applied: "h", Expires: map[string]string{"v": "t", "u": "t"}}}
	require.Equal(t, reportKey(a), reportKey(b))
	b.Auth.Reverted = "x"
	require.NotEqual(t, reportKey(a), reportKey(b))
}
