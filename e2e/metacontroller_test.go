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

// Metacontroller as its release manifests install it: one StatefulSet pod in its own namespace.
const (
	mcNamespace = "metacontroller"
	mcPod       = "metacontroller-0"
)

// restartMetacontroller deletes Metacontroller's pod and waits for the new one to be ready: it then works
// from informer caches rebuilt from nothing, the way a crash or an upgrade of Metacontroller leaves it.
func (s *scenario) restartMetacontroller() {
	s.t.Helper()
	old, err := s.e.kube.CoreV1().Pods(mcNamespace).Get(s.ctx, mcPod, metav1.GetOptions{})
	require.NoError(s.t, err)
	require.NoError(s.t, s.e.kube.CoreV1().Pods(mcNamespace).Delete(s.ctx, mcPod, metav1.DeleteOptions{}))
	s.waitFor("Metacontroller back", 2*time.Minute, func() bool {
		p, err := s.e.kube.CoreV1().Pods(mcNamespace).Get(s.ctx, mcPod, metav1.GetOptions{})
		if err != nil || p.UID == old.UID {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	})
}

// childUpdates counts the child updates Metacontroller logged for objects of namespace ns since a time:
// its "Updating" line is written for every Update it sends after its 3-way merge found a difference.
func (s *scenario) childUpdates(since time.Time) (int, []string) {
	s.t.Helper()
	st := metav1.NewTime(since)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := s.e.kube.CoreV1().Pods(mcNamespace).GetLogs(mcPod, &corev1.PodLogOptions{SinceTime: &st}).DoRaw(ctx)
	require.NoError(s.t, err)
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.Contains(l, `"msg":"Updating"`) && strings.Contains(l, `"namespace":"`+s.ns+`"`) {
			lines = append(lines, l)
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
