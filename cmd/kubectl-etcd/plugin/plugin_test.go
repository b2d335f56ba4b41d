package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	utilexec "k8s.io/client-go/util/exec"
	"sigs.k8s.io/yaml"

	"github.com/etcdhook/etcdhook/api"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// now is the fixtures' clock: ages and expiries in the golden files are relative to it.
var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	Cluster json.RawMessage `json:"cluster"`
	Leases  []struct {
		Name  string            `json:"name"`
		Renew string            `json:"renew"`
		Ann   map[string]string `json:"ann"`
	} `json:"leases"`
}

func loadFixture(t *testing.T, name string) fixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	var f fixture
	require.NoError(t, yaml.Unmarshal(b, &f))
	return f
}

// cluster decodes the EtcdCluster as the API machinery does (integers as int64).
func (f fixture) cluster() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(f.Cluster); err != nil {
		panic(err)
	}
	return u
}

func (f fixture) leases(t *testing.T) []runtime.Object {
	var out []runtime.Object
	for _, l := range f.Leases {
		rt, err := time.Parse(time.RFC3339, l.Renew)
		require.NoError(t, err)
		holder := "pod-" + l.Name
		out = append(out, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: l.Name, Namespace: "prod", Annotations: l.Ann,
				Labels: api.Names{Cluster: "demo"}.ObjectLabels(api.ComponentEtcd)},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &metav1.MicroTime{Time: rt}},
		})
	}
	return out
}

func newDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GVR: "EtcdClusterList"}, objs...)
}

// testEnv runs commands against fake clients; exec records what would run in which pod.
type testEnv struct {
	Env
	out, err bytes.Buffer
	clients  *Clients
	kf       *KubeFlags // the flags the command parsed
	execs    []execCall
	execErr  error
}

type execCall struct {
	pod, container string
	cmd            []string
	stdin          bool
}

func newTestEnv(dyn *dynamicfake.FakeDynamicClient, kube *fake.Clientset) *testEnv {
	te := &testEnv{}
	te.clients = &Clients{Namespace: "prod", Kube: kube, Dynamic: dyn}
	te.clients.Exec = func(ctx context.Context, ns, pod, container string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) error {
		te.execs = append(te.execs, execCall{pod: pod, container: container, cmd: cmd, stdin: stdin != nil})
		io.WriteString(stdout, "etcdctl output\n")
		return te.execErr
	}
	te.Env = Env{IO: IO{In: strings.NewReader(""), Out: &te.out, Err: &te.err}, Now: func() time.Time { return now },
		PollInterval: time.Millisecond,
		Connect: func(kf *KubeFlags) (*Clients, error) {
			te.kf = kf
			c := *te.clients
			if kf.overrides.Context.Namespace != "" {
				c.Namespace = kf.overrides.Context.Namespace
			}
			return &c, nil
		}}
	return te
}

func (te *testEnv) run(args ...string) int { return Main(context.Background(), te.Env, args) }

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(p, []byte(got), 0o644))
	}
	want, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, string(want), got, "golden %s differs (go test -update rewrites it; review the diff)", p)
}

func scalingEnv(t *testing.T) *testEnv {
	f := loadFixture(t, "scaling.yaml")
	return newTestEnv(newDynamic(f.cluster()), fake.NewClientset(f.leases(t)...))
}

func TestStatusText(t *testing.T) {
	te := scalingEnv(t)
	require.Equal(t, 0, te.run("status", "demo", "-n", "prod"), te.err.String())
	golden(t, "scaling.status.txt", te.out.String())
}

func TestStatusJSON(t *testing.T) {
	te := scalingEnv(t)
	require.Equal(t, 0, te.run("status", "demo", "-o", "json"), te.err.String())
	golden(t, "scaling.status.json", te.out.String())
	// The status goes out as stored, and every Lease report with it.
	var doc struct {
		Status       map[string]any `json:"status"`
		MemberLeases []LeaseReport  `json:"memberLeases"`
	}
	require.NoError(t, yaml.Unmarshal(te.out.Bytes(), &doc))
	require.Equal(t, "Scaling", doc.Status["phase"])
	require.Len(t, doc.MemberLeases, 5)
	require.Equal(t, "WaitingForJoin: no data, waiting for join-permitted", doc.MemberLeases[4].Error)
}

// tableOf returns the header words and the rows of the Members table of a status screen, split on the
// two-space column gaps.
func tableOf(t *testing.T, out string) (head []string, rows [][]string) {
	t.Helper()
	_, after, ok := strings.Cut(out, "\nMembers:\n")
	require.True(t, ok, "no Members table:\n%s", out)
	split := func(line string) []string {
		var cells []string
		for _, c := range strings.Split(strings.TrimSpace(line), "  ") {
			if c = strings.TrimSpace(c); c != "" {
				cells = append(cells, c)
			}
		}
		return cells
	}
	lines := strings.Split(strings.TrimRight(after, "\n"), "\n")
	head = split(lines[0])
	// Column starts from the header, so that empty cells (no leader mark) keep their column.
	starts := []int{}
	for _, h := range head {
		starts = append(starts, strings.Index(lines[0], h))
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "  ") || strings.HasPrefix(l, "  (") {
			continue
		}
		var row []string
		for i, s := range starts {
			end := len(l)
			if i+1 < len(starts) && starts[i+1] < end {
				end = starts[i+1]
			}
			cell := ""
			if s < len(l) {
				cell = strings.TrimSpace(l[s:end])
			}
			row = append(row, cell)
		}
		rows = append(rows, row)
	}
	return head, rows
}

// The members table keeps every column the issue asks for; dropping one fails here, whatever the golden.
func TestMembersTableColumns(t *testing.T) {
	te := scalingEnv(t)
	require.Equal(t, 0, te.run("status", "demo"))
	head, rows := tableOf(t, te.out.String())
	require.Equal(t, []string{"NAME", "ID", "ROLE", "HEALTHY", "VERSION", "LEADER", "AGENT REPORT"}, head)
	require.Len(t, rows, 5)
	require.Equal(t, []string{"demo-0", "8e9e05c521647a5e", "leader", "true", "3.7.3", "*", "3m ago: ok"}, rows[0])
	require.Equal(t, []string{"demo-3", "8e9e05c521649c80", "learner", "true", "3.7.3", "", "10s ago: Promoting: learner is not ready to be promoted yet"}, rows[3])
	// An ordinal with a Lease and no member: the agent's role in parentheses, its reason.
	require.Equal(t, []string{"demo-4", "-", "(none)", "false", "3.7.3", "", "5s ago: WaitingForJoin: no data, waiting for join-permitted"}, rows[4])
}

// DB size is shown only when the status reports it (status.members[].dbSize, added by a later hook).
func TestDBSizeOnlyWhenReported(t *testing.T) {
	f := loadFixture(t, "scaling.yaml")
	te := newTestEnv(newDynamic(f.cluster()), fake.NewClientset(f.leases(t)...))
	require.Equal(t, 0, te.run("status", "demo"))
	require.NotContains(t, te.out.String(), "DB SIZE")

	c := f.cluster()
	ms, _, _ := unstructured.NestedSlice(c.Object, "status", "members")
	ms[0].(map[string]any)["dbSize"] = int64(25 << 20)
	ms[0].(map[string]any)["dbSizeInUse"] = int64(12 << 20)
	require.NoError(t, unstructured.SetNestedSlice(c.Object, ms, "status", "members"))
	te = newTestEnv(newDynamic(c), fake.NewClientset(f.leases(t)...))
	require.Equal(t, 0, te.run("status", "demo"))
	head, rows := tableOf(t, te.out.String())
	require.Equal(t, []string{"NAME", "ID", "ROLE", "HEALTHY", "VERSION", "LEADER", "DB SIZE", "AGENT REPORT"}, head)
	require.Equal(t, "25.0 MiB (12.0 MiB in use)", rows[0][6])
	require.Equal(t, "-", rows[1][6], "a member without a reported size shows none, not zero")
}

func TestStatusSections(t *testing.T) {
	te := scalingEnv(t)
	require.Equal(t, 0, te.run("status", "demo"))
	out := squeeze(te.out.String())
	for _, want := range []string{
		"Phase: Scaling\n",
		"In flight: MembershipChange: learner 8e9e05c521649c80 (https://demo-3.demo-peer.prod.svc:2380) to be promoted\n",
		"Generation: 3 (the hook has seen 3)\n",
		"Certificates expire: 2026-03-31T00:00:00Z (in 88d)\n",
		"CA expires: 2035-12-30T00:00:00Z (in 3649d)\n",
		"Progressing True MembershipChange learner",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, strings.ToLower(out), "backup", "the status has no backup field: nothing to show")
}

// The last backup (and failure) and the volume growth, as status.backup and status.storage say.
func TestStatusBackupAndStorage(t *testing.T) {
	f := loadFixture(t, "scaling.yaml")
	c := f.cluster()
	require.NoError(t, unstructured.SetNestedMap(c.Object, map[string]any{
		"lastSuccessTime": "2026-01-01T11:00:00Z", "lastSnapshot": "s3://b/prod/demo/20260101T110000Z-r4242.db",
		"revision": int64(4242), "size": int64(2097152),
		"lastFailureTime": "2025-12-31T12:00:00Z", "lastFailure": "AccessDenied",
		"continuous": map[string]any{"revision": int64(9876), "time": "2026-01-01T11:59:55Z", "message": "store slow"},
	}, "status", "backup"))
	require.NoError(t, unstructured.SetNestedMap(c.Object, map[string]any{
		"size": "20Gi", "claims": int64(3), "atSize": int64(1), "growing": "data-demo-1", "templateSize": "10Gi",
	}, "status", "storage"))
	te := newTestEnv(newDynamic(c), fake.NewClientset())
	require.Equal(t, 0, te.run("status", "demo"))
	out := squeeze(te.out.String())
	require.Contains(t, out, "Last backup: 2026-01-01T11:00:00Z (60m ago), revision 4242, 2097152 bytes: s3://b/prod/demo/20260101T110000Z-r4242.db\n")
	require.Contains(t, out, "Last failure: 2025-12-31T12:00:00Z (24h ago): AccessDenied\n")
	require.Contains(t, out, "Restorable to: revision 9876 at 2026-01-01T11:59:55Z (5s ago); writer: store slow\n")
	require.NotContains(t, out, "Renewal")
	require.Contains(t, out, "Storage: 20Gi per member; 1 of 3 claims at size; growing data-demo-1; new claims start at 10Gi until the StatefulSet is re-created\n")
}

// squeeze collapses runs of spaces, so that assertions do not depend on column widths.
func squeeze(s string) string { return regexp.MustCompile(` +`).ReplaceAllString(s, " ") }

func TestStatusTLSOffAndExpired(t *testing.T) {
	f := loadFixture(t, "scaling.yaml")
	c := f.cluster()
	require.NoError(t, unstructured.SetNestedField(c.Object, "2025-12-31T00:00:00Z", "status", "tls", "certNotAfter"))
	te := newTestEnv(newDynamic(c), fake.NewClientset())
	require.Equal(t, 0, te.run("status", "demo"))
	require.Contains(t, te.out.String(), "2025-12-31T00:00:00Z (EXPIRED 36h ago)")

	require.NoError(t, unstructured.SetNestedMap(c.Object, map[string]any{"request": "leak-1", "members": int64(3), "renewed": int64(2)}, "status", "tls", "renewal"))
	te = newTestEnv(newDynamic(c), fake.NewClientset())
	require.Equal(t, 0, te.run("status", "demo"))
	require.Contains(t, squeeze(te.out.String()), ` Renewal "leak-1": 2 of 3 members serve a renewed certificate (member keys kept)`+"\n")

	plain := f.cluster()
	unstructured.RemoveNestedField(plain.Object, "status", "tls")
	unstructured.RemoveNestedField(plain.Object, "status", "members")
	require.NoError(t, unstructured.SetNestedField(plain.Object, false, "spec", "security", "tls", "enabled"))
	te = newTestEnv(newDynamic(plain), fake.NewClientset())
	require.Equal(t, 0, te.run("status", "demo"))
	require.Contains(t, squeeze(te.out.String()), "TLS: off\n")
	require.NotContains(t, te.out.String(), "expires")
}

// Without permission to list Leases the status is still shown, and the reason why the reports are not.
func TestStatusLeasesForbidden(t *testing.T) {
	f := loadFixture(t, "scaling.yaml")
	kube := fake.NewClientset()
	kube.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(coordinationv1.Resource("leases"), "", errors.New("RBAC says no"))
	})
	te := newTestEnv(newDynamic(f.cluster()), kube)
	require.Equal(t, 0, te.run("status", "demo"))
	require.Contains(t, te.out.String(), "(member Leases not read: leases.coordination.k8s.io is forbidden")
	_, rows := tableOf(t, te.out.String())
	require.Len(t, rows, 4, "the status members are still listed")
	require.Equal(t, "no Lease", rows[0][6])
}

func TestStatusNotFound(t *testing.T) {
	te := newTestEnv(newDynamic(), fake.NewClientset())
	require.Equal(t, 1, te.run("status", "nope"))
	require.Contains(t, te.err.String(), `etcdclusters.etcd.io "nope" not found`)
}

func TestArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{nil, 2, "a command is required"},
		{[]string{"resize", "demo"}, 2, `unknown command "resize"`},
		{[]string{"restore"}, 2, "NAME is required"},
		{[]string{"backup"}, 2, "NAME is required"},
		{[]string{"status"}, 2, "NAME is required"},
		{[]string{"status", "a", "b"}, 2, `one NAME expected, got "a b"`},
		{[]string{"status", "demo", "-o", "yaml"}, 2, `-o "yaml": only json is supported`},
		{[]string{"status", "demo", "--wait", "--timeout", "0s"}, 2, "--timeout must be positive"},
		{[]string{"status", "demo", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"etcdctl", "demo"}, 2, "no etcdctl command"},
		{[]string{"etcdctl", "demo", "get", "/foo"}, 2, "put etcdctl's arguments after --: kubectl etcd etcdctl demo -- get /foo"},
		{[]string{"etcdctl", "--", "get"}, 2, "NAME is required"},
		{[]string{"etcdctl", "demo", "--", "snapshot", "save", "/tmp/x"}, 2, "snapshot save would write the snapshot into the member pod"},
	} {
		te := scalingEnv(t)
		require.Equal(t, tc.code, te.run(tc.args...), "%q", tc.args)
		require.Contains(t, te.err.String(), tc.err, "%q", tc.args)
		require.Empty(t, te.execs, "%q", tc.args)
	}
}

func TestConnectionFlags(t *testing.T) {
	te := scalingEnv(t)
	require.Equal(t, 0, te.run("status", "--context", "other", "-n", "prod", "--kubeconfig", "/k", "demo"))
	require.Equal(t, "other", te.kf.overrides.CurrentContext)
	require.Equal(t, "prod", te.kf.overrides.Context.Namespace)
	require.Equal(t, "/k", te.kf.kubeconfig)

	// Flags before "--" are the plugin's, after it etcdctl's: -n after "--" is not a namespace.
	te = etcdctlEnv(t, true)
	require.Equal(t, 0, te.run("etcdctl", "-n", "prod", "demo", "--", "get", "-n", "x"), te.err.String())
	require.Equal(t, "prod", te.kf.overrides.Context.Namespace)
	require.Equal(t, []string{"get", "-n", "x"}, te.execs[0].cmd[len(te.execs[0].cmd)-3:])
}

// connect resolves --kubeconfig, --context and -n as kubectl does.
func TestConnectKubeconfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(p, []byte(`apiVersion: v1
kind: Config
current-context: a
clusters:
- {name: a, cluster: {server: "https://a.example:6443"}}
- {name: b, cluster: {server: "https://b.example:6443"}}
users: [{name: u, user: {token: t}}]
contexts:
- {name: a, context: {cluster: a, user: u, namespace: ns-a}}
- {name: b, context: {cluster: b, user: u, namespace: ns-b}}
`), 0o600))
	for _, tc := range []struct {
		ctx, ns, want string
	}{{"", "", "ns-a"}, {"b", "", "ns-b"}, {"b", "given", "given"}} {
		kf := &KubeFlags{kubeconfig: p}
		kf.overrides.CurrentContext = tc.ctx
		kf.overrides.Context.Namespace = tc.ns
		c, err := kf.connect()
		require.NoError(t, err)
		require.Equal(t, tc.want, c.Namespace)
	}
}

// etcdArgs is a member's etcd command line in the form sync/render/statefulset.go renders it (written out here,
// not called: the hook's builder is another package's moving part). certDir is where the client plane's
// files are: api.TLSClientDir today, api.TLSDir for pods rendered before the planes were split.
func etcdArgs(i int, tls bool, certDir string) []string {
	n := api.Names{Cluster: "demo", Namespace: "prod", TLS: tls}
	args := []string{api.AgentBinary, "agent", "--config=" + api.AgentConfigPath, "--", api.EtcdBinary,
		"--name=$(POD_NAME)", "--data-dir=" + api.DataDir,
		"--listen-peer-urls=" + n.Scheme() + "0.0.0.0:2380", "--listen-client-urls=" + n.Scheme() + "0.0.0.0:2379",
		"--listen-metrics-urls=http://127.0.0.1:2382", "--advertise-client-urls=" + n.ClientURL(i),
		"--initial-advertise-peer-urls=" + n.PeerURL(i), "--initial-cluster-token=prod-demo-uid"}
	if tls {
		args = append(args, "--cert-file="+certDir+"/tls.crt", "--key-file="+certDir+"/tls.key", "--trusted-ca-file="+certDir+"/ca.crt",
			"--client-cert-auth=true",
			"--peer-cert-file="+api.TLSPeerDir+"/tls.crt", "--peer-key-file="+api.TLSPeerDir+"/tls.key", "--peer-trusted-ca-file="+api.TLSPeerDir+"/ca.crt",
			"--peer-client-cert-auth=true")
	}
	return args
}

// pods renders member pods whose etcd container runs etcdArgs.
func pods(tls bool, ready ...bool) []runtime.Object {
	n := api.Names{Cluster: "demo", Namespace: "prod"}
	var out []runtime.Object
	for i, r := range ready {
		out = append(out, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: n.Pod(i), Namespace: "prod", Labels: n.Labels()},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Command: etcdArgs(i, tls, api.TLSClientDir)}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", Ready: r}}},
		})
	}
	return out
}

func etcdctlEnv(t *testing.T, tls bool, ready ...bool) *testEnv {
	f := loadFixture(t, "scaling.yaml")
	if len(ready) == 0 {
		ready = []bool{true, true, true, true, false}
	}
	c := f.cluster()
	if !tls {
		ms, _, _ := unstructured.NestedSlice(c.Object, "status", "members")
		for _, m := range ms {
			mm := m.(map[string]any)
			mm["clientURL"] = strings.Replace(mm["clientURL"].(string), "https://", "http://", 1)
			mm["peerURL"] = strings.Replace(mm["peerURL"].(string), "https://", "http://", 1)
		}
		require.NoError(t, unstructured.SetNestedSlice(c.Object, ms, "status", "members"))
		unstructured.RemoveNestedField(c.Object, "status", "tls")
	}
	return newTestEnv(newDynamic(c), fake.NewClientset(pods(tls, ready...)...))
}

func etcdFlag(t *testing.T, name string) string {
	t.Helper()
	for _, a := range etcdArgs(0, true, api.TLSClientDir) {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	t.Fatalf("etcd has no --%s", name)
	return ""
}

// The certificates are the chosen pod's own: a pod rendered before the planes were split (files in
// api.TLSDir) is served with those, until the roll replaces it.
func TestEtcdctlCertificatesOfThePod(t *testing.T) {
	te := etcdctlEnv(t, true)
	pod, err := te.clients.Kube.CoreV1().Pods("prod").Get(context.Background(), "demo-0", metav1.GetOptions{})
	require.NoError(t, err)
	pod.Spec.Containers[0].Command = etcdArgs(0, true, api.TLSDir)
	_, err = te.clients.Kube.CoreV1().Pods("prod").Update(context.Background(), pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, 0, te.run("etcdctl", "demo", "--", "member", "list"), te.err.String())
	require.Contains(t, te.execs[0].cmd, "--cacert="+api.TLSDir+"/ca.crt")
	require.Contains(t, te.execs[0].cmd, "--cert="+api.TLSDir+"/tls.crt")
	require.Contains(t, te.execs[0].cmd, "--key="+api.TLSDir+"/tls.key")
}

func TestEtcdctlTLS(t *testing.T) {
	te := etcdctlEnv(t, true)
	require.Equal(t, 0, te.run("etcdctl", "demo", "--", "get", "/foo", "--prefix"), te.err.String())
	require.Len(t, te.execs, 1)
	e := te.execs[0]
	require.Equal(t, "demo-0", e.pod, "the first ready pod of a healthy voter")
	require.Equal(t, "etcd", e.container)
	require.False(t, e.stdin)
	require.Equal(t, []string{"/usr/local/bin/etcdctl",
		// Voters only: a learner refuses most requests.
		"--endpoints=https://demo-0.demo-peer.prod.svc:2379,https://demo-1.demo-peer.prod.svc:2379,https://demo-2.demo-peer.prod.svc:2379",
		"--cacert=" + etcdFlag(t, "trusted-ca-file"), "--cert=" + etcdFlag(t, "cert-file"), "--key=" + etcdFlag(t, "key-file"),
		"get", "/foo", "--prefix"}, e.cmd)
	require.Equal(t, "etcdctl output\n", te.out.String())
}

func TestEtcdctlPlain(t *testing.T) {
	te := etcdctlEnv(t, false)
	require.Equal(t, 0, te.run("etcdctl", "demo", "--", "member", "list"), te.err.String())
	require.Equal(t, []string{"/usr/local/bin/etcdctl",
		"--endpoints=http://demo-0.demo-peer.prod.svc:2379,http://demo-1.demo-peer.prod.svc:2379,http://demo-2.demo-peer.prod.svc:2379",
		"member", "list"}, te.execs[0].cmd)
}

// Flags the user gives are not given twice (etcdctl appends repeated --endpoints).
func TestEtcdctlUserFlagsWin(t *testing.T) {
	te := etcdctlEnv(t, true)
	require.Equal(t, 0, te.run("etcdctl", "demo", "--", "--endpoints", "https://localhost:2379", "--cert=/x", "endpoint", "status"))
	cmd := te.execs[0].cmd
	require.Equal(t, []string{"/usr/local/bin/etcdctl", "--cacert=" + etcdFlag(t, "trusted-ca-file"), "--key=" + etcdFlag(t, "key-file"),
		"--endpoints", "https://localhost:2379", "--cert=/x", "endpoint", "status"}, cmd)
}

func TestEtcdctlChoosesPod(t *testing.T) {
	// demo-0 not ready: the next healthy voter.
	te := etcdctlEnv(t, true, false, true, true, true, true)
	require.Equal(t, 0, te.run("etcdctl", "demo", "--", "endpoint", "health"))
	require.Equal(t, "demo-1", te.execs[0].pod)

	// --member by ordinal or name, and -i passes stdin.
	te = etcdctlEnv(t, true)
	require.Equal(t, 0, te.run("etcdctl", "demo", "--member", "2", "-i", "--", "put", "k"))
	require.Equal(t, "demo-2", te.execs[0].pod)
	require.True(t, te.execs[0].stdin)
	te = etcdctlEnv(t, true)
	require.Equal(t, 0, te.run("etcdctl", "demo", "--member", "demo-3", "--", "get", "k"))
	require.Equal(t, "demo-3", te.execs[0].pod)

	te = etcdctlEnv(t, true)
	require.Equal(t, 1, te.run("etcdctl", "demo", "--member", "4", "--", "get", "k"))
	require.Contains(t, te.err.String(), "pod demo-4: container etcd is not running and ready")

	te = etcdctlEnv(t, true, false, false)
	require.Equal(t, 1, te.run("etcdctl", "demo", "--", "get", "k"))
	require.Contains(t, te.err.String(), "no member pod of prod/demo has a ready etcd container")
	require.Empty(t, te.execs)
}

// etcdctl's exit status is the plugin's, and etcdctl's own stderr is not repeated.
func TestEtcdctlExitCode(t *testing.T) {
	te := etcdctlEnv(t, true)
	te.execErr = utilexec.CodeExitError{Err: errors.New("command terminated with exit code 3"), Code: 3}
	require.Equal(t, 3, te.run("etcdctl", "demo", "--", "get", "k"))
	require.Empty(t, te.err.String())
}

// sequence makes the fake API server answer successive GETs of the EtcdCluster with successive states
// (the last one repeats).
func sequence(dyn *dynamicfake.FakeDynamicClient, states ...*unstructured.Unstructured) *atomic.Int32 {
	var n atomic.Int32
	dyn.PrependReactor("get", "etcdclusters", func(k8stesting.Action) (bool, runtime.Object, error) {
		i := int(n.Add(1)) - 1
		if i >= len(states) {
			i = len(states) - 1
		}
		return true, states[i].DeepCopy(), nil
	})
	return &n
}

func withStatus(u *unstructured.Unstructured, phase, msg string, available bool) *unstructured.Unstructured {
	c := u.DeepCopy()
	_ = unstructured.SetNestedField(c.Object, phase, "status", "phase")
	_ = unstructured.SetNestedField(c.Object, msg, "status", "message")
	conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
	st := "False"
	if available {
		st = "True"
	}
	conds[0].(map[string]any)["status"] = st
	if phase == "Running" {
		conds[2] = map[string]any{"type": "Progressing", "status": "False", "reason": "Stable", "message": ""}
	}
	_ = unstructured.SetNestedSlice(c.Object, conds, "status", "conditions")
	return c
}

func TestWait(t *testing.T) {
	f := loadFixture(t, "scaling.yaml")
	base := f.cluster()
	stale := withStatus(base, "Running", "", true)
	_ = unstructured.SetNestedField(stale.Object, int64(2), "status", "observedGeneration")
	dyn := newDynamic(base)
	sequence(dyn,
		stale, // the hook has not seen the spec change yet: Running is the old state, not the answer
		withStatus(base, "Scaling", "learner 8e9e05c521649c80 to be promoted", true),
		withStatus(base, "Scaling", "learner 8e9e05c521649c80 to be promoted", true), // unchanged: no line
		withStatus(base, "Scaling", "demo-4 to join as a learner", true),
		withStatus(base, "Running", "", true),
	)
	te := newTestEnv(dyn, fake.NewClientset(f.leases(t)...))
	clock := now
	te.Now = func() time.Time { clock = clock.Add(5 * time.Second); return clock }
	require.Equal(t, 0, te.run("status", "demo", "--wait"), te.err.String())
	out := te.out.String()
	progress, screen, ok := strings.Cut(out, "\n\n")
	require.True(t, ok, out)
	require.Equal(t, []string{
		"    5s  Running [3/5 voters healthy] (the hook has not seen the latest spec yet)",
		"   10s  Scaling [3/5 voters healthy] learner 8e9e05c521649c80 to be promoted",
		"   15s  Scaling [3/5 voters healthy] demo-4 to join as a learner",
		"   20s  Running [3/5 voters healthy]",
	}, strings.Split(progress, "\n"))
	require.True(t, strings.HasPrefix(screen, "EtcdCluster:"), "the full status follows the progress")
}

func TestWaitTimeout(t *testing.T) {
	f := loadFixture(t, "scaling.yaml")
	te := newTestEnv(newDynamic(f.cluster()), fake.NewClientset())
	start := time.Now()
	require.Equal(t, 1, te.run("status", "demo", "--wait", "--timeout", "50ms"))
	require.Less(t, time.Since(start), 5*time.Second)
	require.Contains(t, te.err.String(), "timed out after 50ms waiting for prod/demo to be Running and Available; last: Scaling [3/5 voters healthy] learner")
	require.Equal(t, 1, strings.Count(te.out.String(), "\n"), "one line: the state never changed")
}

// Ctrl-C (the context cancelled) ends the wait at once with 130, as a shell reports SIGINT.
func TestWaitInterrupted(t *testing.T) {
	f := loadFixture(t, "scaling.yaml")
	te := newTestEnv(newDynamic(f.cluster()), fake.NewClientset())
	ctx, cancel := context.WithCancel(context.Background())
	te.PollInterval = time.Hour
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	start := time.Now()
	require.Equal(t, 130, Main(ctx, te.Env, []string{"status", "demo", "--wait"}))
	require.Less(t, time.Since(start), 5*time.Second)
	require.Contains(t, te.err.String(), "interrupted while waiting for prod/demo")
}

// Transient API errors are reported once and waited out; a missing cluster fails at once.
func TestWaitErrors(t *testing.T) {
	f := loadFixture(t, "scaling.yaml")
	dyn := newDynamic(f.cluster())
	var calls atomic.Int32
	dyn.PrependReactor("get", "etcdclusters", func(k8stesting.Action) (bool, runtime.Object, error) {
		switch calls.Add(1) {
		case 1:
			return true, withStatus(f.cluster(), "Scaling", "m", true), nil
		case 2, 3:
			return true, nil, apierrors.NewServiceUnavailable("apiserver restarting")
		default:
			return true, withStatus(f.cluster(), "Running", "", true), nil
		}
	})
	te := newTestEnv(dyn, fake.NewClientset())
	require.Equal(t, 0, te.run("status", "demo", "--wait"), te.err.String())
	require.Equal(t, 1, strings.Count(te.out.String(), "cannot read the EtcdCluster: apiserver restarting"))

	te = newTestEnv(newDynamic(), fake.NewClientset())
	require.Equal(t, 1, te.run("status", "gone", "--wait", "--timeout", "1h"))
	require.Contains(t, te.err.String(), "not found")
}

// With -o json, progress goes to stderr and stdout is one JSON document.
func TestWaitJSON(t *testing.T) {
	f := loadFixture(t, "scaling.yaml")
	dyn := newDynamic(f.cluster())
	sequence(dyn, withStatus(f.cluster(), "Scaling", "m", true), withStatus(f.cluster(), "Running", "", true))
	te := newTestEnv(dyn, fake.NewClientset())
	require.Equal(t, 0, te.run("status", "demo", "--wait", "-o", "json"))
	require.Contains(t, te.err.String(), "Scaling [3/5 voters healthy] m")
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(te.out.Bytes(), &doc))
}

// The plugin README's example output is this package's golden output, so that it stays what the plugin
// prints.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	want, err := os.ReadFile("testdata/scaling.status.txt")
	require.NoError(t, err)
	require.Contains(t, string(readme), "```text\n"+string(want)+"```\n", "cmd/kubectl-etcd/README.md's example differs from testdata/scaling.status.txt")
}

// restore creates a new cluster with spec.restore: from --from alone, or like another cluster (its spec
// without restore and pause, its last snapshot and backup credentials), refusing a name that exists; the
// wait ends when the hook (a reactor) reports it Running with the restored snapshot.
func TestRestoreCreatesANewCluster(t *testing.T) {
	source := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": api.APIVersion, "kind": api.Kind,
		"metadata": map[string]any{"name": "demo", "namespace": "prod"},
		"spec": map[string]any{"size": int64(5), "version": "3.6.16", "paused": true,
			"restore": map[string]any{"from": "s3://b/old"},
			"backup":  map[string]any{"destination": "s3://b", "credentialsSecret": "s3-creds"}},
		"status": map[string]any{"backup": map[string]any{"lastSnapshot": "s3://b/prod/demo/x-r9.db"}},
	}}
	settle := func(dyn *dynamicfake.FakeDynamicClient) {
		dyn.PrependReactor("get", "etcdclusters", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.(k8stesting.GetAction).GetName() != "copy" {
				return false, nil, nil
			}
			obj, err := dyn.Tracker().Get(GVR, "prod", "copy")
			if err != nil {
				return false, nil, nil
			}
			cur := obj.(*unstructured.Unstructured).DeepCopy()
			_ = unstructured.SetNestedField(cur.Object, "Running", "status", "phase")
			_ = unstructured.SetNestedSlice(cur.Object, []any{map[string]any{"type": api.CondAvailable, "status": "True", "reason": "QuorumHealthy", "message": "", "lastTransitionTime": "2026-01-01T12:00:00Z"}}, "status", "conditions")
			_ = unstructured.SetNestedMap(cur.Object, map[string]any{"source": "s3://b/prod/demo/x-r9.db", "snapshot": "s3://b/prod/demo/x-r9.db", "revision": int64(9), "phase": "Restored"}, "status", "restore")
			return true, cur, nil
		})
	}
	created := func(t *testing.T, dyn *dynamicfake.FakeDynamicClient) map[string]any {
		obj, err := dyn.Tracker().Get(GVR, "prod", "copy")
		require.NoError(t, err)
		return obj.(*unstructured.Unstructured).Object["spec"].(map[string]any)
	}

	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3-creds", Namespace: "prod"}}
	t.Run("like", func(t *testing.T) {
		dyn := newDynamic(source.DeepCopy())
		settle(dyn)
		te := newTestEnv(dyn, fake.NewClientset(creds))
		require.Equal(t, 0, te.run("restore", "copy", "--like", "demo", "--size", "3"), te.err.String())
		spec := created(t, dyn)
		require.Equal(t, int64(3), spec["size"], "--size overrides the copied size")
		require.Equal(t, "3.6.16", spec["version"], "the rest is copied")
		require.NotContains(t, spec, "paused")
		require.Equal(t, map[string]any{"from": "s3://b/prod/demo/x-r9.db", "credentialsSecret": "s3-creds"}, spec["restore"],
			"the source's last snapshot and backup credentials, not its own restore")
		require.Contains(t, te.out.String(), "restored: s3://b/prod/demo/x-r9.db (revision 9) on prod/copy")
	})
	t.Run("from", func(t *testing.T) {
		dyn := newDynamic()
		te := newTestEnv(dyn, fake.NewClientset())
		require.Equal(t, 0, te.run("restore", "copy", "--from", "file:///backups/prod/demo/latest", "--claim", "backups", "--wait=false"), te.err.String())
		require.Equal(t, map[string]any{"restore": map[string]any{"from": "file:///backups/prod/demo/latest", "volumeClaimName": "backups"}}, created(t, dyn),
			"size and version are the hook's defaults")
		require.Contains(t, te.out.String(), "restoring file:///backups/prod/demo/latest into the new cluster prod/copy")
	})
	// operations.md §7.2: re-created under its old name from its own folder, with the store's
	// credentials and a size; the rest is the hook's defaults.
	t.Run("from a folder with credentials and a size", func(t *testing.T) {
		dyn := newDynamic()
		settle(dyn)
		te := newTestEnv(dyn, fake.NewClientset(creds))
		require.Equal(t, 0, te.run("restore", "copy", "--from", "s3://b/etcd/prod/copy/latest", "--credentials-secret", "s3-creds", "--size", "3"), te.err.String())
		require.Equal(t, map[string]any{"size": int64(3), "restore": map[string]any{"from": "s3://b/etcd/prod/copy/latest", "credentialsSecret": "s3-creds"}},
			created(t, dyn))
		require.Contains(t, te.out.String(), "restoring s3://b/etcd/prod/copy/latest into the new cluster prod/copy\nrestored: ", "the wait ends with the restored cluster")
	})
	t.Run("the name exists", func(t *testing.T) {
		dyn := newDynamic(source.DeepCopy())
		te := newTestEnv(dyn, fake.NewClientset())
		require.Equal(t, 1, te.run("restore", "demo", "--from", "s3://b/x.db"))
		require.Contains(t, te.err.String(), "prod/demo exists: a restore creates a new cluster")
	})
	t.Run("like without a backup", func(t *testing.T) {
		u := source.DeepCopy()
		unstructured.RemoveNestedField(u.Object, "status")
		te := newTestEnv(newDynamic(u), fake.NewClientset())
		require.Equal(t, 1, te.run("restore", "copy", "--like", "demo"))
		require.Contains(t, te.err.String(), "has no successful backup")
	})
	// With continuous backup the newest point is the chain's end, which lastSnapshot does not reach (and
	// is empty when the writer took the first snapshot itself): --like names the source's own folder, with
	// the point asked if any, so the seed searches demo's folder, not copy's.
	continuous := func(lastSnapshot bool) *unstructured.Unstructured {
		u := source.DeepCopy()
		_ = unstructured.SetNestedMap(u.Object, map[string]any{}, "spec", "backup", "continuous")
		_ = unstructured.SetNestedField(u.Object, "s3://b/team?region=eu-west-1", "spec", "backup", "destination")
		if !lastSnapshot {
			unstructured.RemoveNestedField(u.Object, "status")
		}
		return u
	}
	for _, tc := range []struct {
		name  string
		args  []string
		point map[string]any
	}{
		{name: "like with continuous backup and no snapshot in status"},
		{name: "like to a revision", args: []string{"--to-revision", "1234"}, point: map[string]any{"toRevision": int64(1234)}},
		{name: "like to a time", args: []string{"--to-time", "2026-01-01T11:42:00+01:00"}, point: map[string]any{"toTime": "2026-01-01T10:42:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, last := range []bool{false, true} {
				dyn := newDynamic(continuous(last))
				te := newTestEnv(dyn, fake.NewClientset(creds))
				require.Equal(t, 0, te.run(append([]string{"restore", "copy", "--like", "demo", "--wait=false"}, tc.args...)...), te.err.String())
				want := map[string]any{"from": "s3://b/team/prod/demo/latest?region=eu-west-1", "credentialsSecret": "s3-creds"}
				for k, v := range tc.point {
					want[k] = v
				}
				require.Equal(t, want, created(t, dyn)["restore"], "demo's folder, whether or not status names a snapshot")
				require.Contains(t, te.out.String(), "restoring s3://b/team/prod/demo/latest?region=eu-west-1")
			}
		})
	}
	t.Run("like to a point without a destination", func(t *testing.T) {
		u := source.DeepCopy()
		unstructured.RemoveNestedField(u.Object, "spec", "backup")
		te := newTestEnv(newDynamic(u), fake.NewClientset())
		require.Equal(t, 1, te.run("restore", "copy", "--like", "demo", "--to-revision", "5"))
		require.Contains(t, te.err.String(), "prod/demo has no spec.backup.destination")
	})
	t.Run("a credentials Secret that does not exist", func(t *testing.T) {
		dyn := newDynamic(source.DeepCopy())
		te := newTestEnv(dyn, fake.NewClientset())
		require.Equal(t, 1, te.run("restore", "copy", "--like", "demo"))
		require.Contains(t, te.err.String(), "the Secret prod/s3-creds (--credentials-secret) does not exist")
		_, err := dyn.Tracker().Get(GVR, "prod", "copy")
		require.True(t, apierrors.IsNotFound(err), "nothing created")
	})
	t.Run("no snapshot named", func(t *testing.T) {
		te := newTestEnv(newDynamic(), fake.NewClientset())
		require.Equal(t, 2, te.run("restore", "copy"))
		require.Contains(t, te.err.String(), "--from (a snapshot URL) or --like")
	})
}

// restore --in-place sets etcd.io/restore-from (the cluster's last snapshot by default) and waits for
// that restore to be Restored with every member healthy; a cluster already Running before the hook saw
// the request is not mistaken for done, and a failure ends the wait with its message.
func TestRestoreInPlace(t *testing.T) {
	cluster := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": api.APIVersion, "kind": api.Kind,
			"metadata": map[string]any{"name": "demo", "namespace": "prod", "generation": int64(1)},
			"spec":     map[string]any{"size": int64(3), "backup": map[string]any{"destination": "s3://b", "credentialsSecret": "s3-creds"}},
			"status": map[string]any{"phase": "Running", "observedGeneration": int64(1), "target": map[string]any{"size": int64(3), "version": "3.7.3"},
				"backup":     map[string]any{"lastSnapshot": "s3://b/prod/demo/x-r9.db"},
				"conditions": []any{map[string]any{"type": api.CondAvailable, "status": "True", "reason": "QuorumHealthy", "message": "", "lastTransitionTime": "2026-01-01T12:00:00Z"}}},
		}}
	}
	// The hook, as the client sees it: the first reads after the patch still show the old cluster
	// Running; then the restore runs and ends (or fails).
	hook := func(dyn *dynamicfake.FakeDynamicClient, fail bool) *int {
		reads := 0
		dyn.PrependReactor("get", "etcdclusters", func(a k8stesting.Action) (bool, runtime.Object, error) {
			obj, err := dyn.Tracker().Get(GVR, "prod", "demo")
			if err != nil {
				return false, nil, nil
			}
			cur := obj.(*unstructured.Unstructured).DeepCopy()
			from := cur.GetAnnotations()[api.AnnRestoreFrom]
			if from == "" {
				return true, cur, nil
			}
			reads++
			switch {
			case reads < 3:
			case fail:
				_ = unstructured.SetNestedField(cur.Object, "Restoring", "status", "phase")
				_ = unstructured.SetNestedMap(cur.Object, map[string]any{"source": from, "phase": "Restoring", "inPlace": true}, "status", "restore")
				_ = unstructured.SetNestedSlice(cur.Object, []any{map[string]any{"type": api.CondRestoreFailed, "status": "True", "reason": "RestoreFailed", "message": "restore Job demo-restore-1 failed", "lastTransitionTime": "2026-01-01T12:00:00Z"}}, "status", "conditions")
			default:
				_ = unstructured.SetNestedField(cur.Object, "new1", "status", "clusterID")
				restored := map[string]any{"source": from, "snapshot": from, "revision": int64(9), "phase": "Restored", "inPlace": true, "replacedClusterIDs": []any{"old1"}}
				// The point asked, as status.restore shows it: a revision is restored exactly; a time ends at
				// the newest revision before it (here the snapshot's own).
				if to := cur.GetAnnotations()[api.AnnRestoreTo]; to != "" {
					if rev, err := strconv.ParseInt(to, 10, 64); err == nil {
						restored["toRevision"], restored["revision"] = rev, rev
					} else {
						restored["toTime"] = to
					}
				}
				_ = unstructured.SetNestedMap(cur.Object, restored, "status", "restore")
				var members []any
				for i := range 3 {
					members = append(members, map[string]any{"name": fmt.Sprintf("demo-%d", i), "id": fmt.Sprint(i + 1), "role": "voter", "healthy": true})
				}
				_ = unstructured.SetNestedSlice(cur.Object, members, "status", "members")
			}
			return true, cur, nil
		})
		return &reads
	}
	t.Run("last snapshot, waits for it", func(t *testing.T) {
		dyn := newDynamic(cluster())
		reads := hook(dyn, false)
		te := newTestEnv(dyn, fake.NewClientset())
		require.Equal(t, 0, te.run("restore", "demo", "--in-place"), te.err.String())
		require.GreaterOrEqual(t, *reads, 3, "not done while the status still shows the old cluster")
		// (The output's snapshot is the annotation's value, as the hook reports it.)
		obj, err := dyn.Tracker().Get(GVR, "prod", "demo")
		require.NoError(t, err)
		require.NotContains(t, obj.(*unstructured.Unstructured).GetAnnotations(), api.AnnRestoreFrom, "removed once done")
		require.Contains(t, te.out.String(), "restored in place: s3://b/prod/demo/x-r9.db (revision 9) on prod/demo, 3 members, cluster ID new1 (replaced [old1])")
	})
	// To a point (README and backup-restore.md show --to-time): source and point in one patch, both
	// removed once done.
	for _, tc := range []struct {
		flag, point, restored string
	}{
		{"--to-revision", "7000", "(revision 7000)"},
		{"--to-time", "2026-01-01T11:42:00Z", "(revision 9)"},
	} {
		t.Run("to a point "+tc.flag, func(t *testing.T) {
			dyn := newDynamic(cluster())
			hook(dyn, false)
			te := newTestEnv(dyn, fake.NewClientset())
			require.Equal(t, 0, te.run("restore", "demo", "--in-place", tc.flag, tc.point), te.err.String())
			var patches []string
			for _, a := range dyn.Actions() {
				if p, ok := a.(k8stesting.PatchAction); ok {
					patches = append(patches, string(p.GetPatch()))
				}
			}
			require.Len(t, patches, 2)
			require.JSONEq(t, `{"metadata":{"annotations":{"etcd.io/restore-from":"s3://b/latest","etcd.io/restore-to":"`+tc.point+`"}}}`, patches[0],
				"to a point without --from: the destination's newest snapshot before it and its chain")
			require.JSONEq(t, `{"metadata":{"annotations":{"etcd.io/restore-from":null,"etcd.io/restore-to":null}}}`, patches[1])
			require.Contains(t, te.out.String(), "restoring s3://b/latest to "+tc.point+" into prod/demo in place")
			require.Contains(t, te.out.String(), tc.restored)
		})
	}
	t.Run("failure", func(t *testing.T) {
		dyn := newDynamic(cluster())
		hook(dyn, true)
		te := newTestEnv(dyn, fake.NewClientset())
		require.Equal(t, 1, te.run("restore", "demo", "--in-place", "--from", "s3://b/prod/demo/y-r7.db"))
		require.Contains(t, te.err.String(), "restore of prod/demo failed: restore Job demo-restore-1 failed")
	})
	refusal := func(value string) map[string]any {
		return map[string]any{"type": api.CondRestoreFailed, "status": "True", "reason": "InvalidRestoreRequest", "lastTransitionTime": "2026-01-01T12:00:00Z",
			"message": fmt.Sprintf("%s %q: the snapshot failed verification (Job demo-restore-v1): snapshot damaged: nothing was changed", api.AnnRestoreFrom, value)}
	}
	t.Run("an earlier value's refusal still shown is not ours", func(t *testing.T) {
		u := cluster()
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		_ = unstructured.SetNestedSlice(u.Object, append(conds, refusal("s3://b/prod/demo/bad.db")), "status", "conditions")
		dyn := newDynamic(u)
		hook(dyn, false)
		te := newTestEnv(dyn, fake.NewClientset())
		require.Equal(t, 0, te.run("restore", "demo", "--in-place"), te.err.String())
	})
	t.Run("our value refused", func(t *testing.T) {
		u := cluster()
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		_ = unstructured.SetNestedSlice(u.Object, append(conds, refusal("s3://b/prod/demo/x-r9.db")), "status", "conditions")
		te := newTestEnv(newDynamic(u), fake.NewClientset())
		require.Equal(t, 1, te.run("restore", "demo", "--in-place"))
		require.Contains(t, te.err.String(), "snapshot damaged")
	})
	t.Run("flags of a new cluster", func(t *testing.T) {
		te := newTestEnv(newDynamic(cluster()), fake.NewClientset())
		require.Equal(t, 2, te.run("restore", "demo", "--in-place", "--size", "5"))
		require.Contains(t, te.err.String(), "are for a new cluster")
	})
	t.Run("the same value again", func(t *testing.T) {
		u := cluster()
		u.SetAnnotations(map[string]string{api.AnnRestoreFrom: "s3://b/prod/demo/x-r9.db"})
		te := newTestEnv(newDynamic(u), fake.NewClientset())
		require.Equal(t, 1, te.run("restore", "demo", "--in-place"))
		require.Contains(t, te.err.String(), "a request is acted on once")
	})
}

// restore --wait goes on through a failure that may pass (RestoreRetrying, shown as progress) and ends
// at a terminal one (RestoreRefused) with its message, not at the timeout.
func TestRestoreWaitStopsAtFailure(t *testing.T) {
	dyn := newDynamic()
	var gets atomic.Int32
	dyn.PrependReactor("get", "etcdclusters", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := dyn.Tracker().Get(GVR, "prod", "copy")
		if err != nil {
			return false, nil, nil
		}
		cur := obj.(*unstructured.Unstructured).DeepCopy()
		phase, reason, msg := "Restoring", api.ReasonRestoreRetrying, "copy-0: attempt 1 failed, retrying at 2026-01-01T12:00:05Z: dial tcp: connection refused"
		if gets.Add(1) > 3 {
			phase, reason, msg = "Failed", api.ReasonRestoreRefused, "copy-0: spec.restore.from: no such snapshot: sha256 mismatch"
		}
		_ = unstructured.SetNestedField(cur.Object, phase, "status", "phase")
		_ = unstructured.SetNestedSlice(cur.Object, []any{map[string]any{"type": api.CondRestoreFailed, "status": "True", "reason": reason,
			"message": msg, "lastTransitionTime": "2026-01-01T12:00:00Z"}}, "status", "conditions")
		return true, cur, nil
	})
	te := newTestEnv(dyn, fake.NewClientset())
	require.Equal(t, 1, te.run("restore", "copy", "--from", "s3://b/x.db", "--timeout", "1h"))
	require.Contains(t, te.err.String(), "(restore retrying: copy-0: attempt 1 failed", "a retry is progress, not the end")
	require.Contains(t, te.err.String(), "restore of prod/copy failed: copy-0: spec.restore.from: no such snapshot: sha256 mismatch (not retried")
	require.GreaterOrEqual(t, gets.Load(), int32(4), "the wait went on past the retrying reads")
}

// status shows a TLS switch in progress (status.tls.switch).
func TestStatusTLSSwitch(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": api.APIVersion, "kind": api.Kind,
		"metadata": map[string]any{"name": "demo", "namespace": "prod"},
		"spec":     map[string]any{},
		"status": map[string]any{"tls": map[string]any{"switch": map[string]any{
			"to": "https", "phase": api.TLSSwitchPeers, "members": int64(3), "switched": int64(1), "switching": "demo-2", "waiting": "demo-2 to move its peer URL to https",
		}}},
	}}
	te := newTestEnv(newDynamic(u), fake.NewClientset())
	require.Equal(t, 0, te.run("status", "demo"), te.err.String())
	require.Contains(t, squeeze(te.out.String()), ` Switching to https: UpdatingPeerURLs: 1 of 3 peer URLs on https; moving demo-2; waiting for demo-2 to move its peer URL to https`)
}

// Text the status quotes from inputs is escaped (issue 24 §6): an agent error with a terminal escape
// sequence, a carriage return that would overwrite the line, a newline that would forge a row, a
// bidirectional override. Before, they were printed raw.
func TestStatusEscapesControlCharacters(t *testing.T) {
	f := loadFixture(t, "scaling.yaml")
	evil := "WaitingForJoin: \x1b[2J\x1b[31mok\rPhase: Running\nforged row\u202egnp.exe"
	f.Leases[0].Ann[api.AnnError] = evil
	c := f.cluster()
	require.NoError(t, unstructured.SetNestedField(c.Object, "waiting\x1b]0;title\x07 for "+evil, "status", "message"))
	te := newTestEnv(newDynamic(c), fake.NewClientset(f.leases(t)...))
	require.Equal(t, 0, te.run("status", "demo"))
	out := te.out.String()
	for _, bad := range []string{"\x1b", "\r", "\x07", "\u202e", "\nforged row"} {
		require.NotContains(t, out, bad)
	}
	require.Contains(t, out, `\x1b[2J`)
	require.Contains(t, out, `\u202egnp.exe`)
}
