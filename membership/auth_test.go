package membership

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/pki"
)

// etcd's users and roles against real etcd, every version (docs/design/20-auth.md).

// authDeclared is the spec.auth of the permission table: one role per permission kind and range kind.
func authDeclared(enabled bool) *api.AuthConfig {
	return api.DesiredAuth(api.Names{Cluster: "m"}, &api.AuthSpec{
		Enabled: enabled,
		Roles: []api.AuthRole{
			{Name: "app", Permissions: []api.AuthPermission{{Key: "/app/", Prefix: true, Access: api.AccessReadWrite}}},
			{Name: "config-reader", Permissions: []api.AuthPermission{{Key: "/config", Access: api.AccessRead}}},
			{Name: "sink", Permissions: []api.AuthPermission{{Key: "/drop/", Prefix: true, Access: api.AccessWrite}}},
		},
		Users: []api.AuthUser{
			{Name: "app", Roles: []string{"app", "config-reader"}},
			{Name: "sink", Roles: []string{"sink"}},
			{Name: "nobody"},
		},
	})
}

// userClient is a client presenting the certificate in secret (a user's Secret as the agents keep it).
func (c *tcluster) userClient(secret string) *clientv3.Client {
	c.t.Helper()
	data, _, found, err := c.secrets.Get(context.Background(), secret)
	require.NoError(c.t, err)
	require.True(c.t, found, "Secret %s", secret)
	tc, err := ClientTLSFromFiles(data)
	require.NoError(c.t, err)
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(-1), TLS: tc, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	require.NoError(c.t, err)
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// authReport waits for the leader's auth report to satisfy ok and returns it.
func (c *tcluster) authReport(what string, ok func(*api.AuthReport) bool) *api.AuthReport {
	c.t.Helper()
	var got *api.AuthReport
	c.waitFor(what, stepMax, func() bool {
		for _, s := range c.slots {
			if r := c.leases.Report(s.lease); r.Role == api.RoleLeader && r.Auth != nil && ok(r.Auth) {
				got = r.Auth
				return true
			}
		}
		return false
	})
	return got
}

// denied says whether err is etcd's refusal for want of permission, or of a user it knows (an admin
// call by an unknown CN is "auth: user not found", code Unknown, which clientv3 does not map).
func denied(err error) bool {
	return errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrUserNotFound) ||
		err != nil && (strings.Contains(err.Error(), "permission denied") || strings.Contains(err.Error(), "auth: user not found"))
}

// 3 members declare users and roles with auth off, then switch it on: each user may do exactly what its
// roles allow (read, write, readwrite; one key, a prefix), the shared client Secret and unknown users
// nothing; a hand edit (a permission widened, the root role granted to a user, a user added) is put
// back within a look and reported; a user's Secret name held by another application is never written;
// auth switches off again.
func TestMembershipAuth(t *testing.T) {
	forEachVersionParallel(t, func(t *testing.T, v string) {
		c := newCluster(t, v, 3)
		c.events = &MemRecorder{}
		off := authDeclared(false)
		c.declareAuth(off)
		c.bootstrap(nil, 3)
		c.authReport("users and roles created, auth off", func(r *api.AuthReport) bool { return r.Applied == off.Hash && !r.Enabled })
		for _, u := range off.Users {
			data, _, found, err := c.secrets.Get(context.Background(), u.SecretName)
			require.NoError(t, err)
			require.True(t, found, "user %s's Secret", u.Name)
			require.Equal(t, u.Name, commonName(data))
			require.NotEmpty(t, data[pki.KeyCA])
		}

		on := authDeclared(true)
		c.declareAuth(on)
		rep := c.authReport("auth on", func(r *api.AuthReport) bool { return r.Applied == on.Hash && r.Enabled })
		require.Len(t, rep.Expires, 3)
		root := c.client()
		defer root.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		st, err := root.AuthStatus(ctx)
		require.NoError(t, err)
		require.True(t, st.Enabled)
		for _, k := range []string{"/app/a", "/config", "/drop/a", "/other"} {
			_, err := root.Put(ctx, k, "seed")
			require.NoError(t, err, "root writes %s", k)
		}

		// The permission table: for each identity, each operation on each key, allowed or refused.
		type op struct {
			name string
			do   func(cl *clientv3.Client) error
		}
		get := func(k string) op {
			return op{"get " + k, func(cl *clientv3.Client) error { _, err := cl.Get(ctx, k); return err }}
		}
		getPrefix := func(k string) op {
			return op{"get prefix " + k, func(cl *clientv3.Client) error { _, err := cl.Get(ctx, k, clientv3.WithPrefix()); return err }}
		}
		put := func(k string) op {
			return op{"put " + k, func(cl *clientv3.Client) error { _, err := cl.Put(ctx, k, "v"); return err }}
		}
		del := func(k string) op {
			return op{"delete " + k, func(cl *clientv3.Client) error { _, err := cl.Delete(ctx, k); return err }}
		}
		ops := []op{get("/app/a"), getPrefix("/app/"), put("/app/b"), del("/app/b"), get("/config"), put("/config"),
			get("/drop/a"), put("/drop/b"), get("/other"), put("/other"), getPrefix("/"),
			{"defragment", func(cl *clientv3.Client) error { _, err := cl.Defragment(ctx, c.slots[0].clientURL); return err }}}
		allowed := map[string]map[string]bool{
			"app":    {"get /app/a": true, "get prefix /app/": true, "put /app/b": true, "delete /app/b": true, "get /config": true},
			"sink":   {"put /drop/b": true},
			"nobody": {},
			"client": {}, // the shared client Secret (CN etcdhook): no such user
		}
		secrets := map[string]string{"app": "m-user-app", "sink": "m-user-sink", "nobody": "m-user-nobody", "client": "m-client-tls"}
		for _, who := range []string{"app", "sink", "nobody", "client"} {
			cl := c.userClient(secrets[who])
			for _, o := range ops {
				err := o.do(cl)
				if allowed[who][o.name] {
					require.NoError(t, err, "%s may %s", who, o.name)
				} else {
					require.True(t, denied(err), "%s may not %s: got %v", who, o.name, err)
				}
			}
		}

		// Hand edits with etcdctl's calls, as root: each is put back within a look, and reported.
		app := c.userClient("m-user-app")
		_, err = root.RoleGrantPermission(ctx, "app", "/", api.PrefixEnd("/"), clientv3.PermissionType(clientv3.PermReadWrite))
		require.NoError(t, err)
		_, err = root.UserGrantRole(ctx, "nobody", api.RootRole)
		require.NoError(t, err)
		_, err = root.UserAddWithOptions(ctx, "intruder", "", &clientv3.UserAddOptions{NoPassword: true})
		require.NoError(t, err)
		edited := time.Now()
		rep = c.authReport("the hand edits put back", func(r *api.AuthReport) bool {
			return strings.Contains(r.Reverted, "revoke from user nobody role root") && strings.Contains(r.Reverted, "delete user intruder")
		})
		require.Contains(t, rep.Reverted, `revoke from role app readwrite on prefix "/"`)
		t.Logf("hand edits put back within %s", time.Since(edited).Round(100*time.Millisecond))
		_, err = app.Put(ctx, "/other", "v")
		require.True(t, denied(err), "the widened permission is gone: %v", err)
		u, err := root.UserGet(ctx, "nobody")
		require.NoError(t, err)
		require.Empty(t, u.Roles)
		require.Positive(t, c.events.Count(EventAuthReverted))

		// A user whose Secret name another application holds: that Secret is never written, and said.
		c.secrets.PutForeign("m-user-late", map[string][]byte{"password": []byte("theirs")})
		late := authDeclared(true)
		late = api.DesiredAuth(api.Names{Cluster: "m"}, &api.AuthSpec{Enabled: true, Roles: rolesOf(late), Users: append(late.Users, api.AuthUser{Name: "late"})})
		c.declareAuth(late)
		rep = c.authReport("the foreign Secret reported", func(r *api.AuthReport) bool {
			return r.Applied == late.Hash && strings.Contains(r.UserErrors["late"], "not this EtcdCluster's")
		})
		data, _, _, err := c.secrets.Get(context.Background(), "m-user-late")
		require.NoError(t, err)
		require.Equal(t, "theirs", string(data["password"]), "another application's Secret is left as it was")

		// Off again: the shared client Secret works as before.
		c.declareAuth(authDeclared(false))
		c.authReport("auth off", func(r *api.AuthReport) bool { return !r.Enabled && r.Applied == authDeclared(false).Hash })
		_, err = c.userClient("m-client-tls").Put(ctx, "/other", "v")
		require.NoError(t, err)
		record(t, fmt.Sprintf("auth: %d identities x %d operations as allowed; hand edits put back; on and off\n", len(allowed), len(ops)))
	})
}

// rolesOf turns normalised roles back into a spec's.
func rolesOf(a *api.AuthConfig) []api.AuthRole { return a.Roles }
