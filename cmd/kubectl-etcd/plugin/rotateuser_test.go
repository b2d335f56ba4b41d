package plugin

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/etcdhook/etcdhook/api"
)

// withAuthStatus declares user orders-svc in spec.auth, its certificate expiring at notAfter.
func withAuthStatus(u *unstructured.Unstructured, notAfter string) {
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "orders-svc", "roles": []any{"orders"}}}, "spec", "auth", "users")
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "orders-svc", "secretName": "demo-user-orders-svc", "notAfter": notAfter}}, "status", "auth", "users")
}

// rotate-user sets etcd.io/rotate-user=USER=TOKEN and waits until the user's certificate is a new one;
// a user spec.auth does not declare is refused before anything is written.
func TestRotateUser(t *testing.T) {
	u := demoCluster(map[string]any{})
	withAuthStatus(u, "2027-01-01T00:00:00Z")
	dyn := newDynamic(u)
	te := newTestEnv(dyn, fake.NewClientset())
	require.Equal(t, 1, te.run("rotate-user", "demo", "nobody", "--wait=false"))
	require.Contains(t, te.err.String(), `declares no user "nobody"`)
	require.Equal(t, 2, te.run("rotate-user", "demo"))

	playHook(t, dyn, func(read int, cur *unstructured.Unstructured) {
		if read < 3 {
			return
		}
		require.Equal(t, "orders-svc=7", cur.GetAnnotations()[api.AnnRotateUser])
		withAuthStatus(cur, "2027-02-01T00:00:00Z")
	})
	te = newTestEnv(dyn, fake.NewClientset())
	require.Equal(t, 0, te.run("rotate-user", "demo", "orders-svc", "--id", "7"), te.err.String())
	require.Contains(t, te.out.String(), `rotation "7" of user orders-svc of prod/demo requested`)
	require.Contains(t, te.out.String(), "done: user orders-svc's Secret holds a new certificate (expires 2027-02-01T00:00:00Z)")
}

// Under spec.auth etcdctl presents the root identity the agent keeps in the pod, not the member's
// certificate (its CN, the pod, is no etcd user).
func TestEtcdctlRootUnderAuth(t *testing.T) {
	te := authEtcdctlEnv(t)
	require.Equal(t, 0, te.run("etcdctl", "demo", "--", "user", "list"), te.err.String())
	require.Contains(t, te.execs[0].cmd, "--cert="+api.TLSRootDir+"/tls.crt")
	require.Contains(t, te.execs[0].cmd, "--key="+api.TLSRootDir+"/tls.key")
	require.Contains(t, te.execs[0].cmd, "--cacert="+api.TLSRootDir+"/ca.crt")
}

// authEtcdctlEnv is etcdctlEnv under spec.auth (status.auth set).
func authEtcdctlEnv(t *testing.T) *testEnv {
	te := etcdctlEnv(t, true)
	u, err := te.clients.Dynamic.Resource(GVR).Namespace("prod").Get(context.Background(), "demo", metav1.GetOptions{})
	require.NoError(t, err)
	withAuthStatus(u, "2027-01-01T00:00:00Z")
	_, err = te.clients.Dynamic.Resource(GVR).Namespace("prod").Update(context.Background(), u, metav1.UpdateOptions{})
	require.NoError(t, err)
	return te
}

// Without client certificates required, etcd takes no user from the root certificate: etcdctl runs
// through the agent binary, which logs it in as root with the password from the environment (never an
// argument: exec arguments are logged).
func TestEtcdctlRootLoginWithoutClientAuth(t *testing.T) {
	te := authEtcdctlEnv(t)
	pod, err := te.clients.Kube.CoreV1().Pods("prod").Get(context.Background(), "demo-0", metav1.GetOptions{})
	require.NoError(t, err)
	cmd := pod.Spec.Containers[0].Command
	for i, a := range cmd {
		if a == "--client-cert-auth=true" {
			cmd[i] = "--client-cert-auth=false"
		}
	}
	_, err = te.clients.Kube.CoreV1().Pods("prod").Update(context.Background(), pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, 0, te.run("etcdctl", "demo", "--member", "0", "--", "user", "list"), te.err.String())
	got := te.execs[0].cmd
	require.Equal(t, []string{api.AgentBinary, "etcdctl-as-root", "--", etcdctlPath}, got[:4])
	for _, a := range got {
		require.NotContains(t, a, "password", "no password on the command line")
	}
}

// The status line of spec.auth: enforced or not, what is still being applied, each user.
func TestAuthLine(t *testing.T) {
	require.Equal(t, "enforced; a until 2027-01-01T00:00:00Z; b: Secret demo-b exists and is not this EtcdCluster's",
		authLine(&api.AuthStatus{Enabled: true, Declared: "h1", Applied: "h1", Users: []api.AuthUserStatus{
			{Name: "a", NotAfter: "2027-01-01T00:00:00Z"}, {Name: "b", Problem: "Secret demo-b exists and is not this EtcdCluster's"}}}))
	require.Equal(t, "not enforced, applying h2 (etcd holds h1); c: no certificate yet",
		authLine(&api.AuthStatus{Declared: "h2", Applied: "h1", Users: []api.AuthUserStatus{{Name: "c"}}}))
}
