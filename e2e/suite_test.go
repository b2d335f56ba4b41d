//go:build e2e

// Package e2e proves etcdhook on a real Kubernetes cluster with real etcd pods and the real
// Metacontroller (v4.17.2, installed from its release manifests): on the local single-node cluster
// (e2e/local.sh) or on Kind (e2e/kind/test.sh).
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/etcdhook/etcdhook/api"
)

var (
	kubeconfig  = flag.String("e2e.kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster under test")
	resultsPath = flag.String("e2e.results", "", "write the measured figures here (Markdown; - for stdout)")
	etcdVersion = flag.String("e2e.etcd", api.DefaultVersion, "etcd version of every scenario that is not an upgrade (default: the hook's default version)")
	oldEtcd     = flag.String("e2e.etcd-old", "3.5.35", "etcd version to upgrade from")
	newEtcd     = flag.String("e2e.etcd-new", "3.6.16", "etcd version to upgrade to")
	nextEtcd    = flag.String("e2e.etcd-next", "", "etcd version of the next minor to upgrade to from -e2e.etcd-new (its image must exist)")
	hostPath    = flag.Bool("e2e.hostpath", true, "volumes are hostPath directories this process can reach (localkube) for the data-loss scenario")
)

const (
	hookNamespace = "etcdhook-system"
	stepTimeout   = 4 * time.Minute
)

var gvrCluster = schema.GroupVersionResource{Group: api.Group, Version: api.Version, Resource: "etcdclusters"}

type env struct {
	cfg  *rest.Config
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

var (
	theEnv  *env
	results = &resultLog{}
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := func() int {
		// Without a kubeconfig the suite runs in a pod (e2e/kind/test.sh) with the in-cluster config.
		cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: -e2e.kubeconfig, KUBECONFIG or an in-cluster config is required:", err)
			return 2
		}
		cfg.QPS, cfg.Burst = 50, 100
		e := &env{cfg: cfg, kube: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg)}
		theEnv = e
		code := m.Run()
		if *resultsPath != "" {
			if err := results.write(*resultsPath); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
		return code
	}()
	os.Exit(code)
}

// scenario is one test's namespace and the EtcdCluster in it.
type scenario struct {
	t    *testing.T
	e    *env
	ns   string
	name string
	ctx  context.Context
}

func newScenario(t *testing.T, short string) *scenario {
	e := theEnv
	ns := fmt.Sprintf("e2e-%s-%d", short, time.Now().UnixNano()%100000)
	ctx := context.Background()
	_, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"etcdhook-e2e": "true"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	s := &scenario{t: t, e: e, ns: ns, name: "etcd", ctx: ctx}
	t.Cleanup(func() {
		if t.Failed() {
			s.dump()
			if os.Getenv("E2E_KEEP") != "" {
				return
			}
		}
		_ = e.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	return s
}

// settledScenario is a new scenario whose cluster of size members, on the -e2e.etcd version, is
// created and settled: where most scenarios start.
func settledScenario(t *testing.T, short string, size int) *scenario {
	t.Helper()
	s := newScenario(t, short)
	s.apply(spec(size, *etcdVersion))
	s.waitFor("settled", stepTimeout, s.settled(size))
	return s
}

func (s *scenario) names() api.Names {
	return api.Names{Cluster: s.name, Namespace: s.ns, TLS: s.tlsOn()}
}

// tlsOn reads spec.security.tls.enabled from the live object (the CRD defaults it to true).
func (s *scenario) tlsOn() bool {
	obj, err := s.e.dyn.Resource(gvrCluster).Namespace(s.ns).Get(s.ctx, s.name, metav1.GetOptions{})
	if err != nil {
		return true
	}
	on, found, _ := unstructured.NestedBool(obj.Object, "spec", "security", "tls", "enabled")
	return !found || on
}

// apply creates or updates the EtcdCluster's spec.
func (s *scenario) apply(spec map[string]any) {
	s.t.Helper()
	c := s.e.dyn.Resource(gvrCluster).Namespace(s.ns)
	_, err := c.Get(s.ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": api.APIVersion, "kind": api.Kind,
			"metadata": map[string]any{"name": s.name, "namespace": s.ns},
			"spec":     spec,
		}}
		_, err = c.Create(s.ctx, obj, metav1.CreateOptions{})
		require.NoError(s.t, err)
		return
	}
	require.NoError(s.t, err)
	// Metacontroller writes the status meanwhile (a new resourceVersion): read again and retry, as
	// kubectl edit would.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.Get(s.ctx, s.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for k, v := range spec {
			cur.Object["spec"].(map[string]any)[k] = v
		}
		_, err = c.Update(s.ctx, cur, metav1.UpdateOptions{})
		return err
	})
	require.NoError(s.t, err)
}

// read retries an API read for up to 30 s: the tests poll at 2 Hz for minutes on a loaded machine, and
// one apiserver timeout or reset is no answer (a failed read after 30 s still fails the test).
func read[T any](s *scenario, what string, get func() (T, error)) T {
	s.t.Helper()
	var v T
	var err error
	for start := time.Now(); ; time.Sleep(time.Second) {
		if v, err = get(); err == nil || time.Since(start) > 30*time.Second {
			break
		}
		s.t.Logf("reading %s: %v (again)", what, err)
	}
	require.NoError(s.t, err, "reading %s", what)
	return v
}

func (s *scenario) cluster() *api.EtcdCluster {
	s.t.Helper()
	u := read(s, "the EtcdCluster", func() (*unstructured.Unstructured, error) {
		return s.e.dyn.Resource(gvrCluster).Namespace(s.ns).Get(s.ctx, s.name, metav1.GetOptions{})
	})
	var ec api.EtcdCluster
	require.NoError(s.t, runtimeFromUnstructured(u, &ec))
	return &ec
}

func condition(ec *api.EtcdCluster, typ string) *metav1.Condition {
	for i := range ec.Status.Conditions {
		if ec.Status.Conditions[i].Type == typ {
			return &ec.Status.Conditions[i]
		}
	}
	return nil
}

// settled: Available, Running, the members the spec asks for, every one healthy, all pods ready.
func (s *scenario) settled(size int) func() bool {
	return func() bool {
		ec := s.cluster()
		c := condition(ec, api.CondAvailable)
		if ec.Status.Phase != api.PhaseRunning || c == nil || c.Status != metav1.ConditionTrue || len(ec.Status.Members) != size {
			return false
		}
		for _, m := range ec.Status.Members {
			if !m.Healthy || m.Role == api.RoleLearner {
				return false
			}
		}
		return int(ec.Status.ReadyReplicas) == size && ec.Status.ObservedGeneration == ec.Generation
	}
}

// waitFor polls cond every 500 ms until it holds; it fails the test after timeout.
func (s *scenario) waitFor(what string, timeout time.Duration, cond func() bool) time.Duration {
	s.t.Helper()
	return s.waitEvery(what, timeout, 500*time.Millisecond, cond)
}

// waitEvery is waitFor polling every every: a step compared with a floor polls as the floor does
// (100 ms, floor_test.go), so that the ratio does not carry the poll's granularity.
func (s *scenario) waitEvery(what string, timeout, every time.Duration, cond func() bool) time.Duration {
	s.t.Helper()
	start := time.Now()
	for time.Since(start) < timeout {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(every)
	}
	// One direct read: the cluster may be gone (a deletion test), and the timeout is the message.
	u, err := s.e.dyn.Resource(gvrCluster).Namespace(s.ns).Get(s.ctx, s.name, metav1.GetOptions{})
	var ec api.EtcdCluster
	if err == nil {
		err = runtimeFromUnstructured(u, &ec)
	}
	s.t.Fatalf("timed out after %s waiting for %s: phase %s, message %q (read: %v)", timeout, what, ec.Status.Phase, ec.Status.Message, err)
	return 0
}

func (s *scenario) pods() []corev1.Pod {
	s.t.Helper()
	l := read(s, "the pods", func() (*corev1.PodList, error) {
		return s.e.kube.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: api.LabelInstance + "=" + s.name + "," + api.LabelComponent + "=etcd"})
	})
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

func (s *scenario) pvcs() []string {
	s.t.Helper()
	l := read(s, "the claims", func() (*corev1.PersistentVolumeClaimList, error) {
		return s.e.kube.CoreV1().PersistentVolumeClaims(s.ns).List(s.ctx, metav1.ListOptions{})
	})
	var out []string
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// dump writes what a human needs to debug a failed scenario.
func (s *scenario) dump() {
	t := s.t
	ctx := context.Background()
	if u, err := s.e.dyn.Resource(gvrCluster).Namespace(s.ns).Get(ctx, s.name, metav1.GetOptions{}); err == nil {
		b, _ := yaml.Marshal(u.Object)
		t.Logf("EtcdCluster:\n%s", b)
	}
	for _, kind := range []schema.GroupVersionResource{
		{Group: "apps", Version: "v1", Resource: "statefulsets"},
		{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
		{Group: "batch", Version: "v1", Resource: "jobs"},
		{Version: "v1", Resource: "pods"},
		{Version: "v1", Resource: "persistentvolumeclaims"},
	} {
		l, err := s.e.dyn.Resource(kind).Namespace(s.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, it := range l.Items {
			unstructured.RemoveNestedField(it.Object, "metadata", "managedFields")
			b, _ := yaml.Marshal(it.Object)
			t.Logf("%s %s:\n%s", kind.Resource, it.GetName(), b)
		}
	}
	for _, p := range s.pods() {
		for _, c := range []string{"etcd"} {
			tail := int64(80)
			b, err := s.e.kube.CoreV1().Pods(s.ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c, TailLines: &tail}).DoRaw(ctx)
			if err == nil {
				t.Logf("logs %s/%s:\n%s", p.Name, c, b)
			}
		}
	}
	ev, err := s.e.kube.CoreV1().Events(s.ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		var lines []string
		for _, e := range ev.Items {
			lines = append(lines, fmt.Sprintf("%s %s %s: %s", e.LastTimestamp.Format(time.RFC3339), e.InvolvedObject.Name, e.Reason, e.Message))
		}
		sort.Strings(lines)
		t.Logf("events:\n%s", strings.Join(lines, "\n"))
	}
}

// beside lets a scenario run beside another one (t.Parallel; e2e/local.sh passes -test.parallel=2)
// unless E2E_SERIAL is set. Only scenarios that keep to their own namespace and spend most of their time
// waiting (deadlines, Jobs, restores) are marked: none restarts the hook or Metacontroller (those run
// alone, before the parallel ones start). Their figures are then measured with another cluster on the
// same two cores, and their RESULTS.md section says so; E2E_SERIAL=1 measures them alone.
func beside(t *testing.T) {
	if os.Getenv("E2E_SERIAL") != "" {
		return
	}
	results.mu.Lock()
	if results.beside == nil {
		results.beside = map[string]bool{}
	}
	results.beside[t.Name()] = true
	results.mu.Unlock()
	t.Parallel()
}

// resultLog collects the figures for e2e/RESULTS.md.
type resultLog struct {
	mu       sync.Mutex
	sections []string
	beside   map[string]bool // top-level tests that ran beside another (beside)
}

func (r *resultLog) add(title, body string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if top, _, _ := strings.Cut(title, "/"); r.beside[top] {
		title += " (ran beside another scenario)"
	}
	r.sections = append(r.sections, "## "+title+"\n\n"+body)
}

func (r *resultLog) write(path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	head := "# e2e results\n\nGenerated by the e2e suite (`go test -tags e2e ./e2e/`, see e2e/local.sh) on " +
		time.Now().UTC().Format("2006-01-02") + ". Each scenario ran a writer through the client Service; " +
		"`failed` counts writes not acknowledged within 2 s (each in the step it was sent in; a step's first " +
		"failure is quoted under its table), `elections` how far the raft term moved between its acknowledged " +
		"writes (each leader change moves it by one; a leader change can drop the writes in flight), latencies " +
		"are of acknowledged writes.\n\n"
	body := head + strings.Join(r.sections, "\n")
	// The timeline analysis is written by hand (it needs the containerd log and several runs): it is
	// carried into every regenerated RESULTS.md so the figures and their explanation stay together.
	if tl, err := os.ReadFile("TIMELINE.md"); err == nil {
		body += "\n" + string(tl)
	}
	// CI's tier does not run the fleet (TestFleet, the full tier): its last figures, which that run
	// wrote beside this file, are carried in, under their own date.
	if fl, err := os.ReadFile(*fleetResults); err == nil {
		body += "\n" + strings.Replace(string(fl), "# Fleet under one Metacontroller", "## fleet of EtcdClusters under one Metacontroller (the full tier's last run: "+*fleetResults+")", 1)
	}
	if path == "-" {
		fmt.Println("----- RESULTS.md -----\n" + body + "----- end -----")
		return nil
	}
	return os.WriteFile(path, []byte(body), 0o644)
}
