//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// Recovery from the freshest survivor (docs/design/19-recovery.md), measured under the real
// Metacontroller: a cluster with spec.recovery.quorumLoss FromSurvivor and a writer through the client
// Service loses a quorum of its members' pods and claims together. Back to every member a healthy voter;
// every acknowledged write the survivor held is there (counted), the missing ones are the newest (those
// it had not applied; counted). 3 members losing 2 in CI; 5 losing 3 in the full tier (make e2e).
func TestRecoverFromSurvivor(t *testing.T) {
	for _, tc := range []struct{ size, lose int }{{3, 2}, {5, 3}} {
		t.Run(fmt.Sprintf("%d-lose-%d", tc.size, tc.lose), func(t *testing.T) {
			beside(t)
			s := newScenario(t, fmt.Sprintf("recover%d", tc.size))
			sp := spec(tc.size, *etcdVersion)
			sp["recovery"] = map[string]any{"quorumLoss": api.QuorumLossFromSurvivor}
			// The shortest wait the spec allows before members without data count as lost for good.
			sp["timeouts"].(map[string]any)["deadMemberSeconds"] = int64(60)
			s.apply(sp)
			s.waitFor("settled", stepTimeout, s.settled(tc.size))
			before := s.memberIDs()
			w := s.startWriter(fmt.Sprintf("%d of %d members' pods and claims deleted", tc.lose, tc.size))
			time.Sleep(2 * time.Second)
			lost := make([]int, 0, tc.lose)
			for i := tc.size - tc.lose; i < tc.size; i++ {
				lost = append(lost, i)
			}
			start := time.Now()
			for _, i := range lost {
				// The claim first (held by its pod until the pod is gone), then the pod: the StatefulSet
				// makes both again, empty.
				require.NoError(t, s.e.kube.CoreV1().PersistentVolumeClaims(s.ns).Delete(s.ctx, s.names().PVC(i), metav1.DeleteOptions{}))
			}
			for _, i := range lost {
				require.NoError(t, s.e.kube.CoreV1().Pods(s.ns).Delete(s.ctx, s.names().Pod(i), metav1.DeleteOptions{}))
			}
			// The status still says Running for a moment: the loss first, then the way back.
			s.waitFor("the quorum loss reported", 5*time.Minute, func() bool {
				ec := s.cluster()
				c := condition(ec, api.CondQuorumLost)
				return ec.Status.Recovery != nil || c != nil && c.Status == metav1.ConditionTrue
			})
			var phases []string
			took := s.waitFor("recovered", 15*time.Minute, func() bool {
				ec := s.cluster()
				if rs := ec.Status.Recovery; rs != nil && (len(phases) == 0 || phases[len(phases)-1] != rs.Phase) {
					phases = append(phases, rs.Phase)
					t.Logf("%s after %s: %s", rs.Phase, time.Since(start).Round(time.Second), rs.Message)
				}
				return s.settled(tc.size)() && ec.Status.Recovery == nil
			})
			after := s.memberIDs()
			kept := 0
			for i := 0; i < tc.size-tc.lose; i++ {
				if before[i] == after[i] {
					kept++
				}
			}
			require.Equal(t, 1, kept, "one survivor keeps its member ID; a fenced member rejoins under a new one: before %v, after %v", before, after)
			require.Contains(t, phases, api.RecoveryForcing, "phases seen: %v", phases)
			w.Step("recovered")
			s.waitFor("acknowledged writes after the recovery", time.Minute, func() bool { return w.AckedInStep() >= minAcked })
			var present, missing int
			s.withServiceClient(time.Minute, func(ctx context.Context, cl *clientv3.Client) {
				var err error
				present, missing, err = w.Kept(ctx, cl)
				require.NoError(t, err)
			})
			s.checkEvents("RecoveryForced")
			results.add(t.Name(), fmt.Sprintf("%d of %d members' pods and claims deleted under a writer (spec.recovery.quorumLoss FromSurvivor, deadMemberSeconds 60): back to %d healthy voters in %s (phases %v); acknowledged writes kept %d, missing %d (the newest, which the survivor had not applied)\n\n%s",
				tc.lose, tc.size, tc.size, took.Round(time.Second), phases, present, missing, w.Table()))
		})
	}
}
