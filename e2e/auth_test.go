//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/pki"
	"github.com/etcdhook/etcdhook/internal/writer"
	"github.com/etcdhook/etcdhook/membership"
)

// authSpec is spec.auth with one role and one user per application, each on its own prefix.
func authSpec(enabled bool) map[string]any {
	role := func(name string) map[string]any {
		return map[string]any{"name": name, "permissions": []any{map[string]any{"key": name + "/", "prefix": true, "access": "readwrite"}}}
	}
	user := func(name string) map[string]any { return map[string]any{"name": name, "roles": []any{name}} }
	return map[string]any{"enabled": enabled, "roles": []any{role("app-a"), role("app-b")}, "users": []any{user("app-a"), user("app-b")}}
}

// userClient connects through the client Service as an application would: with its user's Secret,
// read again at every handshake (it follows a rotation as a service reading its mounted Secret does).
func (s *scenario) userClient(secret string) *clientv3.Client {
	s.t.Helper()
	s.waitFor("Secret "+secret, 2*time.Minute, func() bool { _, err := s.secretData(secret); return err == nil })
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{s.clientEndpoint()}, DialTimeout: 3 * time.Second, Logger: zap.NewNop(),
		TLS: membership.ReloadingClientTLS(func() (map[string][]byte, error) { return s.secretData(secret) })})
	require.NoError(s.t, err)
	s.t.Cleanup(func() { cl.Close() })
	return cl
}

// rotateUser asks for new credentials for user with kubectl etcd rotate-user (the README's command, with
// the test's token; the tests wait for the rotation themselves).
func (s *scenario) rotateUser(user, token string) {
	s.t.Helper()
	code, _, _ := s.kubectlEtcd(s.ctx, "rotate-user", s.name, user, "--id", token, "--wait=false")
	require.Equal(s.t, 0, code, "kubectl etcd rotate-user")
}

// appLimits bound an application's writer: every 50 ms on its own prefix, 2 s a write.
func appLimits(prefix string) writer.Limits {
	return writer.Limits{Prefix: prefix, Max: 20000, For: 15 * time.Minute, Every: 50 * time.Millisecond, Timeout: 2 * time.Second}
}

// setAuth applies the spec with spec.auth (authSpec) enforced or not and waits until etcd holds it: how
// long that took.
func (s *scenario) setAuth(sp map[string]any, enabled bool, what string) time.Duration {
	sp["auth"] = authSpec(enabled)
	s.apply(sp)
	return s.authApplied(what, enabled)
}

// appsWriting starts the two applications' writers, app-a and app-b each on its own prefix with the
// client connect gives its user, while spec.auth is declared and not enforced, and waits for their first
// writes. both starts a step in both writers.
func (s *scenario) appsWriting(connect func(user string) *clientv3.Client) (a, b *swriter, both func(step string)) {
	a = &swriter{s: s, Writer: writer.Start(connect("app-a"), appLimits("app-a/"), "declared, auth off")}
	b = &swriter{s: s, Writer: writer.Start(connect("app-b"), appLimits("app-b/"), "declared, auth off")}
	s.t.Cleanup(func() { a.Stop(); b.Stop() })
	s.waitFor("both applications' first writes", time.Minute, func() bool { return a.AckedInStep() >= minAcked && b.AckedInStep() >= minAcked })
	return a, b, func(step string) { a.Step(step); b.Step(step) }
}

// authApplied waits until status.auth says etcd holds what spec.auth declares, enforced or not.
func (s *scenario) authApplied(what string, enabled bool) time.Duration {
	return s.waitFor(what, 3*time.Minute, func() bool {
		ec := s.cluster()
		a := ec.Status.Auth
		c := condition(ec, api.CondAuthOutOfSync)
		return a != nil && a.Applied == a.Declared && a.Enabled == enabled && c != nil && c.Status == metav1.ConditionFalse
	})
}

// spec.auth on a running 3-member cluster under the real Metacontroller (docs/design/20-auth.md): users
// and roles declared first, two applications writing with their own certificates, then auth enabled;
// a hand edit of a role put back; one user's credentials rotated; auth disabled again. Each writer writes
// its own prefix through the client Service; no acknowledged write is lost.
func TestAuth(t *testing.T) {
	beside(t)
	s := settledScenario(t, "auth", 3)
	sp := spec(3, *etcdVersion)
	declared := s.setAuth(sp, false, "users and roles created, auth not enforced")

	n := s.names()
	a, b, both := s.appsWriting(func(user string) *clientv3.Client { return s.userClient(n.Cluster + "-user-" + user) })
	both("enable auth")
	enabled := s.setAuth(sp, true, "auth enforced")
	time.Sleep(5 * time.Second)

	// Least privilege through the client Service: app-a cannot touch app-b's prefix, the shared
	// client Secret (CN etcdhook) is no user.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := s.userClient(n.Cluster+"-user-app-a").Put(ctx, "app-b/x", "v")
	require.Error(t, err, "app-a may not write app-b's keys")
	shared := s.userClient(n.ClientSecret())
	_, err = shared.Put(ctx, "app-a/x", "v")
	require.Error(t, err, "the shared client Secret is no etcd user once auth is on")

	// A hand edit, as etcdctl would make it with the root identity: app-a widened to every key.
	both("hand edit reverted")
	root := s.userClient(n.RootSecret())
	_, err = root.RoleGrantPermission(ctx, "app-a", "\x00", "\x00", clientv3.PermissionType(clientv3.PermReadWrite))
	require.NoError(t, err)
	edited := time.Now()
	var reverted time.Duration
	s.waitFor("the hand edit put back", 2*time.Minute, func() bool {
		r, err := root.RoleGet(ctx, "app-a")
		if err != nil || len(r.Perm) != 1 || string(r.Perm[0].Key) != "app-a/" {
			return false
		}
		reverted = time.Since(edited)
		return true
	})
	s.waitFor("status.auth to name the hand edit", time.Minute, func() bool {
		a := s.cluster().Status.Auth
		return a != nil && strings.Contains(a.LastReverted, "revoke from role app-a readwrite on every key")
	})
	_, err = s.userClient(n.Cluster+"-user-app-a").Put(ctx, "app-b/y", "v")
	require.Error(t, err, "the widened permission is gone")

	// One user's credentials rotated: a new key and certificate in its Secret; the writer reads it at
	// its next handshake, the old certificate stays valid meanwhile.
	both("rotate app-a")
	before, err := s.secretData(n.Cluster + "-user-app-a")
	require.NoError(t, err)
	s.rotateUser("app-a", "e2e-1")
	rotated := s.waitFor("app-a's Secret to hold a new key", 2*time.Minute, func() bool {
		after, err := s.secretData(n.Cluster + "-user-app-a")
		return err == nil && string(after[pki.KeyKey]) != string(before[pki.KeyKey])
	})
	fresh := s.userClient(n.Cluster + "-user-app-a")
	_, err = fresh.Put(ctx, "app-a/rotated", "v")
	require.NoError(t, err, "the new certificate is app-a")
	time.Sleep(5 * time.Second)

	// Off again, the applications still writing: the shared client Secret works again.
	both("disable auth")
	disabled := s.setAuth(sp, false, "auth no longer enforced")
	_, err = shared.Put(ctx, "app-a/x", "v")
	require.NoError(t, err, "the shared client Secret writes once auth is off")
	time.Sleep(5 * time.Second)

	steps := []string{"enable auth", "hand edit reverted", "rotate app-a", "disable auth"}
	summary := fmt.Sprintf("spec.auth on 3 members, two applications writing with their own certificates: declared (auth off) in %s; "+
		"enabled in %s; a hand edit (app-a widened to every key) put back in %s; app-a's credentials rotated in %s; disabled in %s; failed writes: app-a %d, app-b %d in the enable, edit, rotation and disable steps\n\n",
		declared.Round(100*time.Millisecond), enabled.Round(100*time.Millisecond), reverted.Round(100*time.Millisecond), rotated.Round(100*time.Millisecond),
		disabled.Round(100*time.Millisecond), a.Failed(steps...), b.Failed(steps...))
	a.Finish("app-a: " + summary)
	b.Finish("app-b (same run)\n\n")
}
