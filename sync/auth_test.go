package sync

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

func withAuth(enabled bool) func(*api.ClusterSpec) {
	return func(s *api.ClusterSpec) {
		s.Auth = &api.AuthSpec{
			Enabled: enabled,
			Roles:   []api.AuthRole{{Name: "orders", Permissions: []api.AuthPermission{{Key: "/orders/", Prefix: true, Access: api.AccessReadWrite}}}},
			Users:   []api.AuthUser{{Name: "orders-svc", Roles: []string{"orders"}}},
		}
	}
}

// memberSecretNames are the Secret names the member Role may get and update.
func (w *world) memberSecretNames() []string {
	role := w.desired[wire.KeyRole][w.names().MemberAccount()]
	for _, r := range role["rules"].([]any) {
		rule := r.(map[string]any)
		if rule["resources"].([]any)[0] == "secrets" && rule["resourceNames"] != nil {
			var out []string
			for _, n := range rule["resourceNames"].([]any) {
				out = append(out, n.(string))
			}
			return out
		}
	}
	return nil
}

// spec.auth renders auth.json for the agents, lets the members keep the root and users' Secrets, and
// shows the leader's report: out of sync until it reports the declaration applied, in sync after; a
// rotation token for a declared user changes what the agents apply, one for another user is ignored.
func TestAuthDeclaredAndReported(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(120)
	require.NotContains(t, w.configData(), api.ConfigKeyAuth, "no spec.auth: nothing for the agents")
	require.Nil(t, w.status.Auth)

	w.setSpec(withAuth(false))
	w.converge(60)
	raw, ok := w.configData()[api.ConfigKeyAuth].(string)
	require.True(t, ok)
	want, err := api.ParseAuthConfig([]byte(raw))
	require.NoError(t, err)
	require.Equal(t, "demo-root-tls", want.RootSecret)
	require.Equal(t, "demo-user-orders-svc", want.Users[0].SecretName)
	names := w.memberSecretNames()
	require.Subset(t, names, []string{"demo-ca", "demo-client-tls", "demo-root-tls", "demo-user-orders-svc"})
	c := meta.FindStatusCondition(w.status.Conditions, api.CondAuthOutOfSync)
	require.NotNil(t, c)
	require.Equal(t, "NotReported", c.Reason)

	w.authApplies, w.userNotAfter = true, w.now.Add(90*24*time.Hour)
	w.converge(60)
	c = meta.FindStatusCondition(w.status.Conditions, api.CondAuthOutOfSync)
	require.Equal(t, "InSync", c.Reason, c.Message)
	require.Equal(t, want.Hash, w.status.Auth.Applied)
	require.Equal(t, "demo-user-orders-svc", w.status.Auth.Users[0].SecretName)
	require.NotEmpty(t, w.status.Auth.Users[0].NotAfter)

	w.setSpec(withAuth(true))
	w.step(5 * time.Second)
	on, err := api.ParseAuthConfig([]byte(w.configData()[api.ConfigKeyAuth].(string)))
	require.NoError(t, err)
	require.True(t, on.Enabled)
	require.NotEqual(t, want.Hash, on.Hash)

	w.parentAnn = map[string]string{api.AnnRotateUser: "orders-svc=1"}
	w.step(5 * time.Second)
	rot, err := api.ParseAuthConfig([]byte(w.configData()[api.ConfigKeyAuth].(string)))
	require.NoError(t, err)
	require.Equal(t, api.RenewalMark("1"), rot.Rotations["orders-svc"])
	w.parentAnn = map[string]string{api.AnnRotateUser: "someone=2"}
	w.step(5 * time.Second)
	ignored := meta.FindStatusCondition(w.status.Conditions, api.CondInputIgnored)
	require.NotNil(t, ignored)
	require.Contains(t, ignored.Message, `names user "someone"`)

	// A certificate close to its expiry (renewal failing) is said like a member's.
	w.userNotAfter = w.now.Add(10 * 24 * time.Hour)
	w.converge(60)
	exp := meta.FindStatusCondition(w.status.Conditions, api.CondCertificatesExpiring)
	require.NotNil(t, exp)
	require.Contains(t, exp.Message, "user orders-svc's certificate (Secret demo-user-orders-svc)")
}

// The Jobs present the root identity while spec.auth is set: the shared client Secret is no etcd user.
func TestAuthJobsUseRoot(t *testing.T) {
	w := newWorld(t, 3)
	w.setSpec(withAuth(true))
	w.converge(120)
	w.setSpec(func(s *api.ClusterSpec) { withAuth(true)(s); s.Size = ptr(int32(1)) })
	var mounted []string
	for range 40 {
		w.step(5 * time.Second)
		for _, j := range w.desired[wire.KeyJob] {
			b, _ := json.Marshal(j)
			var job struct {
				Spec struct {
					Template struct {
						Spec struct {
							Volumes []struct {
								Secret *struct {
									SecretName string `json:"secretName"`
								} `json:"secret"`
							} `json:"volumes"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			}
			require.NoError(t, json.Unmarshal(b, &job))
			for _, v := range job.Spec.Template.Spec.Volumes {
				if v.Secret != nil {
					mounted = append(mounted, v.Secret.SecretName)
				}
			}
		}
		if len(mounted) > 0 {
			break
		}
	}
	require.NotEmpty(t, mounted, "a scale-down runs a remove Job")
	require.True(t, slices.Contains(mounted, "demo-root-tls"), "mounted: %v", mounted)
	require.False(t, slices.Contains(mounted, "demo-client-tls"))
}

// Without client certificates required, users log in with passwords: the agents are told so, etcd gets
// no trusted CA file (with one it asks every client for a certificate, whatever --client-cert-auth
// says), and the Jobs log in as root with the root Secret's password.
func TestAuthPasswordLogins(t *testing.T) {
	w := newWorld(t, 3)
	noClientAuth := func(s *api.ClusterSpec) { withAuth(true)(s); s.Security.TLS.Client.Auth = ptr(false) }
	w.setSpec(noClientAuth)
	w.converge(120)
	raw, ok := w.configData()[api.ConfigKeyAuth].(string)
	require.True(t, ok)
	want, err := api.ParseAuthConfig([]byte(raw))
	require.NoError(t, err)
	require.True(t, want.Passwords)
	sts, err := json.Marshal(w.desired[wire.KeyStatefulSet][w.names().StatefulSet()])
	require.NoError(t, err)
	require.Contains(t, string(sts), "--client-cert-auth=false")
	require.NotContains(t, string(sts), "--trusted-ca-file=/var/run/etcdhook/tls/client", "no client certificate asked for")
	require.Contains(t, string(sts), "--peer-trusted-ca-file=", "the peer plane is unchanged")

	w.setSpec(func(s *api.ClusterSpec) { noClientAuth(s); s.Size = ptr(int32(1)) })
	var args string
	for range 40 {
		w.step(5 * time.Second)
		for _, j := range w.desired[wire.KeyJob] {
			b, _ := json.Marshal(j)
			args = string(b)
		}
		if args != "" {
			break
		}
	}
	require.Contains(t, args, "--password-file=/etc/etcdhook/client-tls/password", "a scale-down's Job logs in as root")
}

// Disabling then removing spec.auth before the leader's agent applied the disable is refused, and
// accepted once it has: auth.json stays until etcd no longer enforces auth.
func TestAuthRemovedBeforeDisableApplied(t *testing.T) {
	w := newWorld(t, 3)
	w.spec.Auth, w.authApplies = fixtureAuth(true), true
	w.converge(120)
	w.setSpec(func(s *api.ClusterSpec) { s.Auth.Enabled = false })
	w.sync() // answered; no agent has applied it yet
	w.setSpec(func(s *api.ClusterSpec) { s.Auth = nil })
	w.sync()
	c := meta.FindStatusCondition(w.status.Conditions, api.CondInvalidSpec)
	require.NotNil(t, c)
	require.Equal(t, "InvalidAuth", c.Reason)
	kept, err := api.ParseAuthConfig([]byte(w.configData()[api.ConfigKeyAuth].(string)))
	require.NoError(t, err)
	require.False(t, kept.Enabled, "the disable stays declared for the agents")

	w.step(5 * time.Second) // the leader's agent disables auth and reports it
	w.step(5 * time.Second)
	require.Nil(t, meta.FindStatusCondition(w.status.Conditions, api.CondInvalidSpec))
	require.NotContains(t, w.configData(), api.ConfigKeyAuth)
	require.Nil(t, w.status.Auth)
}
