//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/cmd/kubectl-etcd/plugin"
)

// kubectlEtcd runs the kubectl etcd plugin in-process against the cluster under test (the suite's own
// rest.Config, the scenario's namespace) and returns its exit code, stdout and stderr.
func (s *scenario) kubectlEtcd(ctx context.Context, args ...string) (int, string, string) {
	s.t.Helper()
	var out, errOut bytes.Buffer
	env := plugin.Env{IO: plugin.IO{In: strings.NewReader("value-from-stdin"), Out: &out, Err: &errOut},
		Connect: func(*plugin.KubeFlags) (*plugin.Clients, error) { return plugin.NewClients(s.e.cfg, s.ns) }}
	code := plugin.Main(ctx, env, args)
	s.t.Logf("kubectl etcd %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
	return code, out.String(), errOut.String()
}

// kubectlEtcdMeanwhile starts a plugin command that waits (backup, defrag, rotate-ca) in the background,
// while the test watches the cluster itself (its own waits give the figures); the returned func waits for
// the command's end. A test that stops first cancels the command and waits for it, so that it never logs
// after the test.
func (s *scenario) kubectlEtcdMeanwhile(ctx context.Context, args ...string) func() (int, string, string) {
	ctx, cancel := context.WithCancel(ctx)
	var code int
	var out, errOut string
	done := make(chan struct{})
	go func() {
		defer close(done)
		code, out, errOut = s.kubectlEtcd(ctx, args...)
	}()
	s.t.Cleanup(func() { cancel(); <-done })
	return func() (int, string, string) {
		<-done
		return code, out, errOut
	}
}

// The plugin on a real cluster: status --wait follows a create to Running and Available, status and
// -o json show every member, etcdctl runs in a member pod with the cluster's certificates (TLS is on by
// default) and passes etcdctl's exit status on.
func TestKubectlEtcdPlugin(t *testing.T) {
	beside(t)
	s := newScenario(t, "plugin")
	s.apply(spec(3, *etcdVersion))

	ctx, cancel := context.WithTimeout(s.ctx, stepTimeout+time.Minute)
	defer cancel()
	code, out, _ := s.kubectlEtcd(ctx, "status", s.name, "--wait", "--timeout", stepTimeout.String())
	require.Equal(t, 0, code)
	progress, screen, _ := strings.Cut(out, "\n\n")
	require.Contains(t, progress, api.PhaseCreating, "the create is followed, not only its end")
	require.Regexp(t, `\n\s+Available\s+True\s`, screen)
	s.waitFor("settled", stepTimeout, s.settled(3))

	code, out, _ = s.kubectlEtcd(ctx, "status", s.name)
	require.Equal(t, 0, code)
	for i := 0; i < 3; i++ {
		require.Contains(t, out, s.names().Pod(i))
	}
	require.Contains(t, out, "TLS:")

	code, out, _ = s.kubectlEtcd(ctx, "status", s.name, "-o", "json")
	require.Equal(t, 0, code)
	var doc struct {
		Status       api.ClusterStatus    `json:"status"`
		MemberLeases []plugin.LeaseReport `json:"memberLeases"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Equal(t, api.PhaseRunning, doc.Status.Phase)
	require.Len(t, doc.MemberLeases, 3)
	for _, l := range doc.MemberLeases {
		require.True(t, l.Healthy, "%+v", l)
	}

	code, _, _ = s.kubectlEtcd(ctx, "etcdctl", s.name, "--", "put", "/plugin/key", "plugin-value")
	require.Equal(t, 0, code)
	code, out, _ = s.kubectlEtcd(ctx, "etcdctl", s.name, "--member", "2", "--", "get", "/plugin/key", "--print-value-only")
	require.Equal(t, 0, code)
	require.Equal(t, "plugin-value\n", out)
	// stdin reaches etcdctl with -i (put reads the value from stdin when none is given).
	code, _, _ = s.kubectlEtcd(ctx, "etcdctl", s.name, "-i", "--", "put", "/plugin/stdin")
	require.Equal(t, 0, code)
	// The README's example: a prefix read.
	code, out, _ = s.kubectlEtcd(ctx, "etcdctl", s.name, "--", "get", "/plugin/", "--prefix")
	require.Equal(t, 0, code)
	require.Equal(t, "/plugin/key\nplugin-value\n/plugin/stdin\nvalue-from-stdin\n", out)
	// operations.md §7.1: one member's status, with the cluster's certificates.
	code, out, _ = s.kubectlEtcd(ctx, "etcdctl", s.name, "--member", "1", "--", "endpoint", "status", "-w", "table")
	require.Equal(t, 0, code)
	require.Contains(t, out, s.names().ClientURL(1), "the member asked, not the Service")
	code, out, _ = s.kubectlEtcd(ctx, "etcdctl", s.name, "--", "endpoint", "health", "-w", "json")
	require.Equal(t, 0, code)
	require.Equal(t, 3, strings.Count(out, `"health":true`), "every voter's endpoint, checked with the cluster's certificates")
	code, _, _ = s.kubectlEtcd(ctx, "etcdctl", s.name, "--", "get") // no key: etcdctl refuses
	require.NotZero(t, code, "etcdctl's failure is the plugin's")

	cl, err := s.newClient([]string{s.clientEndpoint()})
	require.NoError(t, err)
	defer cl.Close()
	got, err := cl.Get(ctx, "/plugin/stdin")
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1)
	require.Equal(t, "value-from-stdin", string(got.Kvs[0].Value))

	// renew: every built-in certificate renewed, followed until every member serves one.
	before := s.allServed(3)
	code, out, _ = s.kubectlEtcd(ctx, "renew", s.name, "--timeout", "3m")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "done: every member of "+s.ns+"/"+s.name+" serves a renewed certificate")
	for name, serial := range s.allServed(3) {
		require.NotZero(t, serial.Cmp(before[name]), "%s serves a renewed certificate", name)
	}
}
