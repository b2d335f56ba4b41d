package steps

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/wire"
)

var rollNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// rollPod is one ordinal of rollFacts' cluster: its pod's revision ("" no pod), and whether it is a healthy voter.
type rollPod struct {
	rev     string
	healthy bool
}

// rollFacts reads the facts of a cluster of len(pods) members whose StatefulSet has the template hash
// "h", partition part and update revision "new" (observed at its generation unless lag), each pod a
// member on its revision, ready and reporting a healthy voter (ordinal 0 leads) as pods says.
func rollFacts(t *testing.T, part int32, lag bool, pods ...rollPod) *facts.Facts {
	t.Helper()
	n := api.Names{Cluster: "c", Namespace: "ns"}
	o := &wire.Observed{
		Parent:       api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "uid"}},
		StatefulSets: map[string]*appsv1.StatefulSet{},
		Pods:         map[string]*corev1.Pod{},
		Leases:       map[string]*coordv1.Lease{},
	}
	replicas := int32(len(pods))
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: n.StatefulSet(), Generation: 2, Annotations: map[string]string{api.AnnTemplateHash: "h"}},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
			Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &part}}},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, CurrentRevision: "old", UpdateRevision: "new"},
	}
	if lag {
		sts.Status.ObservedGeneration = 1
	}
	o.StatefulSets[sts.Name] = sts
	var members []api.Member
	for i := range pods {
		members = append(members, api.Member{ID: fmt.Sprintf("%x", i+1), Name: n.Pod(i), PeerURL: n.PeerURL(i)})
	}
	renewed := metav1.NewMicroTime(rollNow.Add(-time.Second))
	for i, p := range pods {
		if p.rev == "" {
			continue
		}
		uid := types.UID(fmt.Sprintf("pod-%d-%s", i, p.rev))
		ready := corev1.ConditionFalse
		if p.healthy {
			ready = corev1.ConditionTrue
		}
		o.Pods[n.Pod(i)] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: n.Pod(i), UID: uid, Labels: map[string]string{"controller-revision-hash": p.rev},
				CreationTimestamp: metav1.NewTime(rollNow.Add(-time.Hour)),
				OwnerReferences:   []metav1.OwnerReference{{Kind: "StatefulSet", Name: sts.Name, Controller: ptrTo(true)}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
		}
		r := api.Report{MemberID: members[i].ID, ClusterID: "cid", ClusterUID: "uid", Role: api.RoleVoter, Healthy: p.healthy,
			LeaderID: members[0].ID, Members: members}
		if i == 0 {
			r.Role = api.RoleLeader
		}
		holder := string(uid)
		o.Leases[n.Lease(i)] = &coordv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: n.Lease(i), Annotations: r.Annotations()},
			Spec:       coordv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &renewed},
		}
	}
	return facts.Read(o, rollNow)
}

func ptrTo[T any](v T) *T { return &v }

// The roll's rules, one sync each (docs/design/07-steps.md §7.11).
func TestRoll(t *testing.T) {
	up := func(rev string) rollPod { return rollPod{rev: rev, healthy: true} }
	down := func(rev string) rollPod { return rollPod{rev: rev} }
	for _, tc := range []struct {
		name      string
		in        RollInput
		lag       bool
		pods      []rollPod
		partition int32
		rolling   bool
		held      bool
		action    string
		wait      string
	}{
		{name: "a new template holds every pod until the StatefulSet has observed it", in: RollInput{Full: true, Hash: "h2", Partition: 0},
			pods: []rollPod{up("new"), up("new"), up("new")}, partition: 3, rolling: true, wait: "c-2 to run the new revision"},
		{name: "the highest pod first, health-gated", in: RollInput{Full: true, Hash: "h", Partition: 3},
			pods: []rollPod{up("old"), up("old"), up("old")}, partition: 2, rolling: true, action: "c-2 to run", wait: "c-2 to run"},
		{name: "nothing steps while the StatefulSet lags", in: RollInput{Full: true, Hash: "h", Partition: 3}, lag: true,
			pods: []rollPod{up("old"), up("old"), up("old")}, partition: 3, rolling: true, wait: "c-2 to run"},
		{name: "the next waits for the pod at the partition to be a healthy voter", in: RollInput{Full: true, Hash: "h", Partition: 2},
			pods: []rollPod{up("old"), up("old"), down("new")}, partition: 2, rolling: true, wait: "c-2 to run"},
		{name: "an updated pod lets the next step", in: RollInput{Full: true, Hash: "h", Partition: 2},
			pods: []rollPod{up("old"), up("old"), up("new")}, partition: 1, rolling: true, action: "c-1 to run"},
		{name: "with a change in flight a healthy pod is not restarted", in: RollInput{Hash: "h", Partition: 3},
			pods: []rollPod{up("old"), up("old"), up("old")}, partition: 3, rolling: true, wait: "c-2 to run"},
		{name: "with a change in flight a pod that is not healthy is stepped over (a bad tag reverted)", in: RollInput{Hash: "h", Partition: 3},
			pods: []rollPod{up("old"), up("old"), down("old")}, partition: 2, rolling: true, action: "c-2 to run"},
		{name: "quorum holds a healthy pod's restart", in: RollInput{Full: true, Hash: "h", Partition: 3, Target: 3},
			pods: []rollPod{down("old"), up("old"), up("old")}, partition: 3, rolling: true, held: true, wait: "quorum to allow restarting c-2 (2 of 3 voters healthy)"},
		{name: "a restart in place holds it", in: RollInput{Full: true, Hash: "h", Partition: 3, InPlace: "c-0 restarting for the CA"},
			pods: []rollPod{up("old"), up("old"), up("old")}, partition: 3, rolling: true, held: true, wait: "c-0 restarting for the CA before restarting c-2"},
		{name: "an unusable Secret holds it", in: RollInput{Full: true, Hash: "h", Partition: 3, CertProblems: []facts.CertProblem{{Secret: "s"}}},
			pods: []rollPod{up("old"), up("old"), up("old")}, partition: 3, rolling: true, held: true, wait: "usable TLS Secrets before restarting c-2"},
		{name: "pods already on the update revision are stepped over at once", in: RollInput{Full: true, Hash: "h", Partition: 3},
			pods: []rollPod{up("old"), up("new"), up("new")}, partition: 0, rolling: true, action: "c-0 to run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Replicas = int32(len(tc.pods))
			if tc.in.Target == 0 {
				tc.in.Target = len(tc.pods)
			}
			f := rollFacts(t, tc.in.Partition, tc.lag, tc.pods...)
			r := Roll(f, tc.in)
			require.Equal(t, tc.partition, r.Partition, "partition")
			require.Equal(t, tc.rolling, r.Rolling, "rolling")
			require.Equal(t, tc.held, r.Held, "held")
			if tc.action == "" {
				require.Empty(t, r.Action)
			} else {
				require.Contains(t, r.Action, tc.action)
			}
			require.Contains(t, r.Waits.String(), tc.wait)
		})
	}
}

// A StatefulSet made over running pods starts above every pod; without pods nothing rolls.
func TestRollAdopts(t *testing.T) {
	f := rollFacts(t, 0, false, rollPod{rev: "old", healthy: true}, rollPod{rev: "old", healthy: true})
	f.StatefulSet = nil
	r := Roll(f, RollInput{Full: true, Hash: "h", Replicas: 2})
	require.Equal(t, int32(api.MaxSize), r.Partition)
	require.True(t, r.Rolling)
	require.Equal(t, "c-1 to run the new revision and report a healthy voter", r.Waits.String())

	f.Pods = nil
	r = Roll(f, RollInput{Full: true, Hash: "h", Replicas: 0})
	require.Equal(t, int32(0), r.Partition)
	require.False(t, r.Rolling)
}

// The leader the roll's order passes over is the one the freshest member list names, by ordinal.
func TestLeaderOrdinal(t *testing.T) {
	up := rollPod{rev: "old", healthy: true}
	f := rollFacts(t, 3, false, up, up, up)
	require.Equal(t, 0, LeaderOrdinal(f))
	require.Equal(t, 2, RollNext([]int{0, 1, 2}, LeaderOrdinal(f)))
	f.Truth.LeaderID = "3"
	require.Equal(t, 2, LeaderOrdinal(f))
	f.Truth.LeaderID = ""
	require.Equal(t, -1, LeaderOrdinal(f))
}
