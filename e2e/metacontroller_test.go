//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"strings"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Metacontroller as its release manifests install it, with the settings of install/metacontroller/settings.yaml:
// a StatefulSet in its own namespace, two pods of which the leader syncs.
const (
	mcNamespace = "metacontroller"
	mcSelector  = "app.kubernetes.io/name=metacontroller"
)

// mcPods are Metacontroller's pods now.
func (s *scenario) mcPods() []corev1.Pod {
	s.t.Helper()
	l := read(s, "Metacontroller's pods", func() (*corev1.PodList, error) {
		return s.e.kube.CoreV1().Pods(mcNamespace).List(s.ctx, metav1.ListOptions{LabelSelector: mcSelector})
	})
	require.NotEmpty(s.t, l.Items, "no Metacontroller pod")
	return l.Items
}

// restartMetacontroller deletes every Metacontroller pod and waits for as many new ones to be ready: it
// then works from informer caches rebuilt from nothing, the way a crash or an upgrade of Metacontroller
// leaves it (with leader election, the new leader also waits for the lease).
func (s *scenario) restartMetacontroller() {
	s.t.Helper()
	old := map[string]bool{}
	for _, p := range s.mcPods() {
		old[string(p.UID)] = true
		require.NoError(s.t, s.e.kube.CoreV1().Pods(mcNamespace).Delete(s.ctx, p.Name, metav1.DeleteOptions{}))
	}
	s.waitFor("Metacontroller back", 2*time.Minute, func() bool {
		l, err := s.e.kube.CoreV1().Pods(mcNamespace).List(s.ctx, metav1.ListOptions{LabelSelector: mcSelector})
		if err != nil || len(l.Items) != len(old) {
			return false
		}
		for _, p := range l.Items {
			if old[string(p.UID)] || !podReady(p) {
				return false
			}
		}
		return true
	})
}

// childUpdates counts the child updates Metacontroller logged for objects of namespace ns since a time,
// in every Metacontroller pod (whichever leads): its "Updating" line is written for every Update it sends
// after its 3-way merge found a difference.
func (s *scenario) childUpdates(since time.Time) (int, []string) {
	s.t.Helper()
	st := metav1.NewTime(since)
	var lines []string
	for _, p := range s.mcPods() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		raw, err := s.e.kube.CoreV1().Pods(mcNamespace).GetLogs(p.Name, &corev1.PodLogOptions{SinceTime: &st}).DoRaw(ctx)
		cancel()
		require.NoError(s.t, err)
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			l := sc.Text()
			if strings.Contains(l, `"msg":"Updating"`) && strings.Contains(l, `"namespace":"`+s.ns+`"`) {
				lines = append(lines, l)
			}
		}
	}
	return len(lines), lines
}

// watchPhases polls the EtcdCluster's phase every 200 ms until the returned function is called, which
// returns the distinct phases seen, in order.
func (s *scenario) watchPhases() func() []string {
	stop := make(chan struct{})
	done := make(chan []string)
	go func() {
		var seen []string
		for {
			u, err := s.e.dyn.Resource(gvrCluster).Namespace(s.ns).Get(s.ctx, s.name, metav1.GetOptions{})
			if err == nil {
				phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
				if phase != "" && (len(seen) == 0 || seen[len(seen)-1] != phase) {
					seen = append(seen, phase)
				}
			}
			select {
			case <-stop:
				done <- seen
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() []string { close(stop); return <-done }
}
