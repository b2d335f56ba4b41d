//go:build e2e

package e2e

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/etcdhook/etcdhook/api"
)

// checkEvents requires every reason among the Events on this scenario's EtcdCluster at least once (the
// story `kubectl describe etcdcluster` tells; reasons in docs/operations.md, Events). Events are sent in
// the background by the agents and Jobs, so it waits up to a minute. It selects by involvedObject kind
// and name like kubectl describe, and requires the EtcdCluster's UID on each event, without which
// describe would not list it.
func (s *scenario) checkEvents(reasons ...string) {
	s.t.Helper()
	sel := fields.Set{"involvedObject.kind": api.Kind, "involvedObject.name": s.name}.AsSelector().String()
	uid := string(s.cluster().UID)
	var seen map[string]int
	deadline := time.Now().Add(time.Minute)
	for {
		l, err := s.e.kube.CoreV1().Events(s.ns).List(s.ctx, metav1.ListOptions{FieldSelector: sel})
		require.NoError(s.t, err)
		seen = map[string]int{}
		for _, e := range l.Items {
			require.Equal(s.t, api.APIVersion, e.InvolvedObject.APIVersion, "event %s", e.Name)
			if string(e.InvolvedObject.UID) != uid {
				continue // another EtcdCluster of the same name, or an event without the UID
			}
			seen[e.Reason]++
		}
		var missing []string
		for _, r := range reasons {
			if seen[r] == 0 {
				missing = append(missing, r)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var got []string
			for r, n := range seen {
				got = append(got, fmt.Sprintf("%s=%d", r, n))
			}
			sort.Strings(got)
			s.t.Fatalf("events on EtcdCluster %s/%s: missing %s; have %s", s.ns, s.name, strings.Join(missing, ", "), strings.Join(got, ", "))
		}
		time.Sleep(2 * time.Second)
	}
}

// eventCount is how many times reason was posted on this scenario's EtcdCluster (repeats of one Event
// are counted by its count, as kubectl describe shows "x N").
func (s *scenario) eventCount(reason string) int32 {
	s.t.Helper()
	sel := fields.Set{"involvedObject.kind": api.Kind, "involvedObject.name": s.name, "reason": reason}.AsSelector().String()
	l, err := s.e.kube.CoreV1().Events(s.ns).List(s.ctx, metav1.ListOptions{FieldSelector: sel})
	require.NoError(s.t, err)
	var n int32
	for _, e := range l.Items {
		n += max(e.Count, 1)
	}
	return n
}
