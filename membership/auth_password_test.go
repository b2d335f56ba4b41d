package membership

import (
	"context"
	"crypto/tls"
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

// passwordClient logs in as the user of secret with its password, over TLS that verifies the members
// and presents no certificate: an application that cannot use client certificates. It returns the
// client's error (a refused login) rather than failing.
func (c *tcluster) passwordClient(secret string) (*clientv3.Client, error) {
	c.t.Helper()
	data, _, found, err := c.secrets.Get(context.Background(), secret)
	require.NoError(c.t, err)
	require.True(c.t, found, "Secret %s", secret)
	return c.loginClient(string(data[api.SecretKeyUsername]), string(data[api.SecretKeyPassword]), data[pki.KeyCA])
}

func (c *tcluster) loginClient(user, password string, ca []byte) (*clientv3.Client, error) {
	cas, err := pki.ParseCertificates(ca)
	require.NoError(c.t, err)
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(-1), DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{RootCAs: pki.Pool(cas...), MinVersion: tls.VersionTLS12}, Username: user, Password: password})
	if err == nil {
		c.t.Cleanup(func() { cl.Close() })
	}
	return cl, err
}

// Without client certificates required (spec.security.tls.client.auth false), users log in with the
// passwords their Secrets carry: 3 members declare users with auth off, switch it on (the agents' own
// calls log in as root), and each user may do what its roles allow and no more; a client without a
// login, or with the shared client certificate only, may do nothing; a password changed by hand with
// etcdctl is put back within a look; a rotation gives the user a new password etcd takes and refuses
// the old one; the Job path (a Login from the mounted root Secret) removes a member; auth switches off.
func TestMembershipAuthPasswords(t *testing.T) {
	forEachVersionParallel(t, func(t *testing.T, v string) {
		c := newCluster(t, v, 3)
		c.noClientAuth = true
		c.clientGrace = 8 * time.Second
		c.events = &MemRecorder{}
		declared := func(enabled bool, rotations map[string]string) *api.AuthConfig {
			d := authDeclared(enabled)
			return api.DesiredAuthRotated(api.Names{Cluster: "m"}, &api.AuthSpec{Enabled: enabled, Roles: d.Roles, Users: d.Users}, true, rotations)
		}
		off := declared(false, nil)
		c.declareAuth(off)
		c.bootstrap(nil, 3)
		c.authReport("users and roles created, auth off", func(r *api.AuthReport) bool { return r.Applied == off.Hash && !r.Enabled })
		for _, u := range off.Users {
			data, _, _, err := c.secrets.Get(context.Background(), u.SecretName)
			require.NoError(t, err)
			require.Equal(t, u.Name+"~1", string(data[api.SecretKeyUsername]), "user %s logs in as its first slot", u.Name)
			require.True(t, usablePassword(string(data[api.SecretKeyPassword])), "user %s's password", u.Name)
		}

		on := declared(true, nil)
		c.declareAuth(on)
		enabledAt := time.Now()
		c.authReport("auth on", func(r *api.AuthReport) bool { return r.Applied == on.Hash && r.Enabled })
		t.Logf("auth enabled %s after it was declared", time.Since(enabledAt).Round(100*time.Millisecond))
		for _, s := range c.slots {
			require.True(t, c.leases.Report(s.lease).RootIdentity, "%s's agent logs in as root", s.name)
		}
		root := c.client()
		defer root.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, k := range []string{"/app/a", "/config", "/other"} {
			_, err := root.Put(ctx, k, "seed")
			require.NoError(t, err, "root writes %s", k)
		}

		// Each identity against a few operations of each kind.
		type op struct {
			name string
			do   func(cl *clientv3.Client) error
		}
		ops := []op{
			{"get /app/a", func(cl *clientv3.Client) error { _, err := cl.Get(ctx, "/app/a"); return err }},
			{"put /app/b", func(cl *clientv3.Client) error { _, err := cl.Put(ctx, "/app/b", "v"); return err }},
			{"get /config", func(cl *clientv3.Client) error { _, err := cl.Get(ctx, "/config"); return err }},
			{"put /config", func(cl *clientv3.Client) error { _, err := cl.Put(ctx, "/config", "v"); return err }},
			{"put /drop/b", func(cl *clientv3.Client) error { _, err := cl.Put(ctx, "/drop/b", "v"); return err }},
			{"get /other", func(cl *clientv3.Client) error { _, err := cl.Get(ctx, "/other"); return err }},
			{"user list", func(cl *clientv3.Client) error { _, err := cl.UserList(ctx); return err }}, // root only
		}
		allowed := map[string]map[string]bool{
			"app":  {"get /app/a": true, "put /app/b": true, "get /config": true},
			"sink": {"put /drop/b": true},
		}
		clients := map[string]*clientv3.Client{}
		for _, who := range []string{"app", "sink", "nobody"} {
			cl, err := c.passwordClient("m-user-" + who)
			require.NoError(t, err, "%s logs in", who)
			clients[who] = cl
		}
		anon, err := c.loginClient("", "", c.secretData("m-user-app")[pki.KeyCA])
		require.NoError(t, err)
		clients["no login"] = anon
		clients["client certificate"] = c.userClient("m-client-tls") // CN etcdhook: etcd takes no user from it
		for who, cl := range clients {
			for _, o := range ops {
				err := o.do(cl)
				if allowed[who][o.name] {
					require.NoError(t, err, "%s may %s", who, o.name)
				} else {
					require.True(t, denied(err) || errors.Is(err, rpctypes.ErrUserEmpty), "%s may not %s: got %v", who, o.name, err)
				}
			}
		}
		_, err = c.loginClient("app~1", "not-the-password-0000", c.secretData("m-user-app")[pki.KeyCA])
		require.ErrorIs(t, err, rpctypes.ErrAuthFailed, "a wrong password is refused")
		_, err = c.loginClient("app", string(c.secretData("m-user-app")[api.SecretKeyPassword]), c.secretData("m-user-app")[pki.KeyCA])
		require.Error(t, err, "the certificate's user has no password")

		// A password changed by hand is put back within a look; the user's Secret logs in again.
		_, err = root.UserChangePassword(ctx, "app~1", "changed-by-hand-0000")
		require.NoError(t, err)
		edited := time.Now()
		c.authReport("the password put back", func(r *api.AuthReport) bool {
			return strings.Contains(r.Reverted, "set the password of user app~1")
		})
		t.Logf("hand-changed password put back within %s", time.Since(edited).Round(100*time.Millisecond))
		app, err := c.passwordClient("m-user-app")
		require.NoError(t, err, "the Secret's password works again")
		_, err = app.Put(ctx, "/app/c", "v")
		require.NoError(t, err)

		// A rotation: the other slot made with a new password, then named by the Secret; the old login
		// works through the grace, then its slot is deleted.
		oldCl, err := c.passwordClient("m-user-app")
		require.NoError(t, err)
		old := string(c.secretData("m-user-app")[api.SecretKeyPassword])
		rot := declared(true, map[string]string{"app": api.RenewalMark("r1")})
		c.declareAuth(rot)
		rotated := time.Now()
		c.waitFor("the Secret to name the next login", stepMax, func() bool {
			return string(c.secretData("m-user-app")[api.SecretKeyUsername]) == "app~2"
		})
		t.Logf("rotated login in the Secret within %s", time.Since(rotated).Round(100*time.Millisecond))
		data := c.secretData("m-user-app")
		require.Equal(t, "app~1", string(data[api.SecretKeyPreviousUsername]))
		require.Equal(t, old, string(data[api.SecretKeyPreviousPassword]))
		fresh, err := c.passwordClient("m-user-app")
		require.NoError(t, err, "etcd holds the new login once the Secret names it")
		_, err = fresh.Put(ctx, "/app/d", "v")
		require.NoError(t, err)
		_, err = oldCl.Put(ctx, "/app/e", "v")
		require.NoError(t, err, "the old login works through the grace")
		c.waitFor("the old login's slot deleted after the grace", stepMax, func() bool {
			_, err := root.UserGet(ctx, "app~1")
			return errors.Is(err, rpctypes.ErrUserNotFound)
		})
		t.Logf("old login deleted %s after the rotation (grace 8 s)", time.Since(rotated).Round(100*time.Millisecond))
		c.waitFor("the Secret to drop the old login", stepMax, func() bool {
			return len(c.secretData("m-user-app")[api.SecretKeyPreviousUsername]) == 0
		})
		_, err = c.loginClient("app~1", old, data[pki.KeyCA])
		require.Error(t, err, "the old login is refused")
		_, err = fresh.Put(ctx, "/app/f", "v")
		require.NoError(t, err)

		// The Job path: root's password from the mounted root Secret (a Login), a membership change.
		m2 := c.memberID(2)
		c.kill(2)
		c.removeUntilDone(m2, c.slots[2].peerURL, "dead")
		c.waitFor("two voters", stepMax, func() bool { return c.voters(0, 1) })

		// Off again: no login needed.
		offAgain := declared(false, map[string]string{"app": api.RenewalMark("r1")})
		c.declareAuth(offAgain)
		c.authReport("auth off", func(r *api.AuthReport) bool { return !r.Enabled && r.Applied == offAgain.Hash })
		_, err = anon.Put(ctx, "/other", "v")
		require.NoError(t, err)
		record(t, fmt.Sprintf("auth with passwords: %d identities x %d operations as allowed; hand-changed password put back; rotation; a removal as a Job does it; on and off\n", len(clients), len(ops)))
	})
}

// secretData is a Secret's data (the test fails when it is missing).
func (c *tcluster) secretData(name string) map[string][]byte {
	c.t.Helper()
	data, _, found, err := c.secrets.Get(context.Background(), name)
	require.NoError(c.t, err)
	require.True(c.t, found, "Secret %s", name)
	return data
}
