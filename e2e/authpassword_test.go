//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/pki"
	"github.com/etcdhook/etcdhook/internal/writer"
)

// loginClient logs in through the client Service with the user name and password of secret, over TLS
// that verifies the members and presents no certificate: an application that cannot use client
// certificates, as it reads its Secret at start. The error is a refused login.
func (s *scenario) loginClient(secret string) (*clientv3.Client, error) {
	s.t.Helper()
	data, err := s.secretData(secret)
	if err != nil {
		return nil, err
	}
	cas, err := pki.ParseCertificates(data[pki.KeyCA])
	require.NoError(s.t, err)
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{s.clientEndpoint()}, DialTimeout: 3 * time.Second, Logger: zap.NewNop(),
		TLS:      &tls.Config{RootCAs: pki.Pool(cas...), MinVersion: tls.VersionTLS12},
		Username: string(data[api.SecretKeyUsername]), Password: string(data[api.SecretKeyPassword])})
	if err == nil {
		s.t.Cleanup(func() { cl.Close() })
	}
	return cl, err
}

// spec.auth with password logins (spec.security.tls.client.auth false) on a running 3-member cluster
// under the real Metacontroller (docs/design/20-auth.md): two applications log in with the user name
// and password of their Secrets and write while auth is enabled; a password changed by hand is put
// back; one user's password is rotated, its application reloading its Secret; kubectl etcd etcdctl
// logs in as root inside a pod; auth is disabled again.
func TestAuthPasswords(t *testing.T) {
	beside(t)
	s := newScenario(t, "authpw")
	sp := spec(3, *etcdVersion)
	// A replaced password login works for rotationGrace (default 2m) after a rotation: 15 s here.
	sp["security"] = map[string]any{"tls": map[string]any{"enabled": true, "client": map[string]any{"auth": false},
		"builtIn": map[string]any{"rotationGrace": "15s"}}}
	sp["auth"] = authSpec(false)
	s.apply(sp)
	s.waitFor("settled", stepTimeout, s.settled(3))
	declared := s.authApplied("users and roles created, auth not enforced", false)

	n := s.names()
	login := func(user string) *clientv3.Client {
		var cl *clientv3.Client
		s.waitFor(user+"'s login", 2*time.Minute, func() bool {
			var err error
			cl, err = s.loginClient(n.Cluster + "-user-" + user)
			return err == nil
		})
		return cl
	}
	a, b, both := s.appsWriting(login)
	both("enable auth")
	enabled := s.setAuth(sp, true, "auth enforced")
	time.Sleep(5 * time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := login("app-a").Put(ctx, "app-b/x", "v")
	require.Error(t, err, "app-a may not write app-b's keys")
	_, err = s.userClient(n.ClientSecret()).Put(ctx, "app-a/x", "v")
	require.Error(t, err, "a certificate is no login: etcd takes no user from it")

	// kubectl etcd etcdctl logs in as root inside a member pod (the password through the environment).
	code, out, _ := s.kubectlEtcd(ctx, "etcdctl", s.name, "--", "user", "list")
	require.Zero(t, code)
	require.Contains(t, out, "app-a")

	// A password changed by hand, as etcdctl would as root: put back; app-b's writer, whose token the
	// change invalidated, logs in again with its Secret's password by itself (clientv3 does).
	both("hand edit reverted")
	rootCl, err := s.loginClient(n.RootSecret())
	require.NoError(t, err)
	_, err = rootCl.UserChangePassword(ctx, "app-b~1", "changed-by-hand-0000")
	require.NoError(t, err)
	edited := time.Now()
	s.waitFor("status.auth to name the password put back", 2*time.Minute, func() bool {
		a := s.cluster().Status.Auth
		return a != nil && strings.Contains(a.LastReverted, "set the password of user app-b~1")
	})
	reverted := time.Since(edited)
	_, err = login("app-b").Put(ctx, "app-b/after-edit", "v")
	require.NoError(t, err, "the Secret's password logs in again")
	time.Sleep(5 * time.Second)

	// app-a's login rotated: its Secret names the other login slot with a new password, the old login
	// works for the grace. The application reloads its Secret 3 s later: it starts a new client, and
	// stops the old one.
	both("rotate app-a")
	before, err := s.secretData(n.Cluster + "-user-app-a")
	require.NoError(t, err)
	rotStart := time.Now()
	s.rotateUser("app-a", "e2e-1")
	var after map[string][]byte
	rotated := s.waitFor("app-a's Secret to name a new login", 2*time.Minute, func() bool {
		after, err = s.secretData(n.Cluster + "-user-app-a")
		return err == nil && string(after[api.SecretKeyUsername]) != string(before[api.SecretKeyUsername])
	})
	require.Equal(t, string(before[api.SecretKeyUsername]), string(after[api.SecretKeyPreviousUsername]))
	newLogin := time.Now()
	a2 := &swriter{s: s, Writer: writer.Start(login("app-a"), appLimits("app-a/r"), "rotate app-a")}
	t.Cleanup(a2.Stop)
	loggedIn := time.Since(newLogin)
	s.waitFor("the reloaded client's first acknowledged writes", time.Minute, func() bool { return a2.AckedInStep() >= minAcked })
	time.Sleep(3 * time.Second)
	a.Stop()
	s.waitFor("the old login retired after the grace", 2*time.Minute, func() bool {
		d, err := s.secretData(n.Cluster + "-user-app-a")
		return err == nil && len(d[api.SecretKeyPreviousUsername]) == 0
	})
	retired := time.Since(rotStart)
	_, err = rootCl.UserGet(ctx, string(before[api.SecretKeyUsername]))
	require.Error(t, err, "the old login's etcd user is deleted")
	time.Sleep(5 * time.Second)

	// Off again, the applications still writing.
	a2.Step("disable auth")
	b.Step("disable auth")
	disabled := s.setAuth(sp, false, "auth no longer enforced")
	time.Sleep(5 * time.Second)

	planned := []string{"enable auth", "rotate app-a", "disable auth"}
	summary := fmt.Sprintf("spec.auth with password logins (client.auth false) on 3 members, two applications logging in with their Secrets' user names and passwords: "+
		"declared (auth off) in %s; enabled in %s; a password changed by hand put back in %s; app-a's login rotated (the Secret names the other slot) in %s, "+
		"its reloaded client logged in %s after that, the old client stopped 3 s later, the old login retired %s after the rotation (grace 15 s); disabled in %s; "+
		"failed writes in the enable, rotation and disable steps: app-a %d (old client) + %d (reloaded), app-b %d; while app-b's password was changed by hand (not a planned step): app-b %d\n\n",
		declared.Round(100*time.Millisecond), enabled.Round(100*time.Millisecond), reverted.Round(100*time.Millisecond), rotated.Round(100*time.Millisecond),
		loggedIn.Round(100*time.Millisecond), retired.Round(100*time.Millisecond), disabled.Round(100*time.Millisecond),
		a.Failed(planned...), a2.Failed(planned...), b.Failed(planned...), b.Failed("hand edit reverted"))
	// The old client stopped at the rotation: its acknowledged writes are checked, its figures recorded.
	s.verifyWriter(a.Writer)
	results.add(t.Name(), "app-a until its rotation: "+summary+a.Table())
	t.Logf("\n%s%s", summary, a.Table())
	a2.Finish("app-a after the rotation, reloaded (same run)\n\n")
	b.Finish("app-b (same run)\n\n")
}
