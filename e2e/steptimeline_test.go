//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/etcdhook/etcdhook/api"
)

// A step's timeline (issue 45 §2): where the seconds of one step go, measured from the test's own apply.
// Pod conditions and event times are whole seconds, so the Kubernetes side is taken from watches stamped
// on receipt; the agent's and the hook's steps from their own log lines, whose slog times are sub-second
// (one machine, one clock).
type stepTimeline struct {
	start time.Time
	mu    sync.Mutex
	marks []timelineMark
	seen  map[string]bool
}

type timelineMark struct {
	at           time.Duration
	source, what string
}

func (tl *stepTimeline) mark(at time.Time, source, what string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.marks = append(tl.marks, timelineMark{at.Sub(tl.start), source, what})
}

// once marks what the first time it is seen.
func (tl *stepTimeline) once(source, what string) {
	tl.mu.Lock()
	first := !tl.seen[what]
	tl.seen[what] = true
	tl.mu.Unlock()
	if first {
		tl.mark(time.Now(), source, what)
	}
}

// watchStep starts watching the new member ordinal's pod and Lease and the EtcdCluster's status; call it
// right before the apply. finish stops the watches, adds the new pod's agent and etcd lines and the hook's
// sync lines for this cluster, and returns the timeline as a table.
func (s *scenario) watchStep(ordinal int) (tl *stepTimeline, finish func() string) {
	tl = &stepTimeline{start: time.Now(), seen: map[string]bool{}}
	ctx, cancel := context.WithCancel(s.ctx)
	var wg sync.WaitGroup
	follow := func(w watch.Interface, err error, on func(any)) {
		if err != nil {
			tl.mark(time.Now(), "test", "watch failed: "+err.Error())
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					on(ev.Object)
				}
			}
		}()
	}
	pod := s.names().Pod(ordinal)
	byName := func(name string) metav1.ListOptions {
		return metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	}
	pw, err := s.e.kube.CoreV1().Pods(s.ns).Watch(ctx, byName(pod))
	follow(pw, err, func(o any) { podMarks(tl, o) })
	lw, err := s.e.kube.CoordinationV1().Leases(s.ns).Watch(ctx, byName(s.names().Lease(ordinal)))
	follow(lw, err, func(o any) {
		if l, ok := o.(interface{ GetAnnotations() map[string]string }); ok {
			ann := l.GetAnnotations()
			if ann[api.AnnJoinPermitted] != "" {
				tl.once("lease", "join permission on the Lease")
			}
			if r, _ := api.ParseReport(ann); r.Role != "" {
				tl.once("lease", fmt.Sprintf("report: %s, healthy %v", r.Role, r.Healthy))
			}
		}
	})
	cw, err := s.e.dyn.Resource(gvrCluster).Namespace(s.ns).Watch(ctx, byName(s.name))
	follow(cw, err, func(o any) {
		if u, ok := o.(*unstructured.Unstructured); ok {
			phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
			ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
			members, _, _ := unstructured.NestedSlice(u.Object, "status", "members")
			voters := 0
			for _, m := range members {
				if m, ok := m.(map[string]any); ok && m["healthy"] == true && m["role"] != api.RoleLearner {
					voters++
				}
			}
			tl.once("status", fmt.Sprintf("status: %s, %d ready pods, %d healthy voters of %d members", phase, ready, voters, len(members)))
		}
	})
	return tl, func() string {
		cancel()
		wg.Wait()
		s.agentMarks(tl, pod)
		s.hookMarks(tl)
		sort.SliceStable(tl.marks, func(i, j int) bool { return tl.marks[i].at < tl.marks[j].at })
		var b strings.Builder
		b.WriteString("| t (s after the apply) | source | event |\n|---|---|---|\n")
		lastSync := ""
		for _, m := range tl.marks {
			if m.source == "hook" {
				// A sync answering what the one before answered is a repeat (Lease renewals, pod
				// status updates): the first says when the hook knew.
				if m.what == lastSync {
					continue
				}
				lastSync = m.what
			}
			fmt.Fprintf(&b, "| %.2f | %s | %s |\n", m.at.Seconds(), m.source, m.what)
		}
		return b.String()
	}
}

// podMarks: the pod's life as the watch sees it, each the first time.
func podMarks(tl *stepTimeline, o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	tl.once("pod", "pod created")
	for _, c := range p.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			tl.once("pod", "condition "+string(c.Type))
		}
	}
	for _, c := range p.Status.InitContainerStatuses {
		switch {
		case c.State.Running != nil:
			tl.once("pod", "init container running")
		case c.State.Terminated != nil:
			tl.once("pod", "init container exited")
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running != nil {
			tl.once("pod", "container "+c.Name+" running")
		}
	}
}

// agentLines: the etcd container's lines of interest. The agent's (slog, "time") all; etcd's (zap, "ts")
// only the few that mark its start.
var etcdMarks = []string{"starting an etcd server", "ready to serve client requests", "serving client traffic",
	"became follower", "applied a configuration change", "published local member"}

func (s *scenario) agentMarks(tl *stepTimeline, pod string) {
	var all strings.Builder
	for _, l := range s.logLines(s.ns, pod, "etcd", tl.start) {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			continue
		}
		msg, _ := m["msg"].(string)
		// Every line, in the test log only: the table keeps the marks.
		for _, k := range []string{"time", "ts"} {
			if t, ok := logTime(m, k); ok {
				fmt.Fprintf(&all, "%.3f %s %s\n", t.Sub(tl.start).Seconds(), k, l)
			}
		}
		if t, ok := logTime(m, "time"); ok {
			what := msg
			for _, k := range []string{"action", "reason", "state", "member"} {
				if v, ok := m[k].(string); ok && v != "" {
					what += " " + k + "=" + v
				}
			}
			tl.mark(t, "agent", what)
			continue
		}
		if t, ok := logTime(m, "ts"); ok {
			for _, e := range etcdMarks {
				if strings.Contains(msg, e) {
					tl.mark(t, "etcd", msg)
					break
				}
			}
		}
	}
	s.t.Logf("the new member's log lines (s after the apply):\n%s", all.String())
}

// hookMarks: every sync of this cluster in the hook replicas' logs, with the phase and message it answered
// (the table keeps those that answer something new).
func (s *scenario) hookMarks(tl *stepTimeline) {
	pods, err := s.e.kube.CoreV1().Pods(hookNamespace).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	parent := s.ns + "/" + s.name
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, "etcdhook-") {
			continue
		}
		for _, l := range s.logLines(hookNamespace, p.Name, "", tl.start) {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) != nil || m["msg"] != "sync" || m["parent"] != parent {
				continue
			}
			if t, ok := logTime(m, "time"); ok && !t.Before(tl.start) {
				tl.mark(t, "hook", fmt.Sprintf("sync: %v: %v", m["phase"], m["message"]))
			}
		}
	}
}

func (s *scenario) logLines(ns, pod, container string, since time.Time) []string {
	st := metav1.NewTime(since.Add(-time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := s.e.kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, SinceTime: &st}).DoRaw(ctx)
	if err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// logTime reads a log line's time: RFC 3339 (slog, zap's ISO 8601) or seconds since the epoch (zap's default).
func logTime(m map[string]any, key string) (time.Time, bool) {
	switch v := m[key].(type) {
	case string:
		t, err := time.Parse(time.RFC3339Nano, v)
		return t, err == nil
	case float64:
		return time.Unix(0, int64(v*1e9)), true
	}
	return time.Time{}, false
}
