package sync

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/wire"
)

func (w *world) growTo(size string) {
	w.setSpec(func(s *api.ClusterSpec) { q := resource.MustParse(size); s.Storage.Size = &q })
}

// growFor asks for size, then lets steps syncs pass 5 s apart.
func (w *world) growFor(size string, steps int) {
	w.growTo(size)
	for n := 0; n < steps; n++ {
		w.step(5e9)
	}
}

// stepUntilGrown steps (80 at most) until every claim and the template are at size; the callers assert
// what was reached.
func (w *world) stepUntilGrown(size string) {
	for n := 0; n < 80 && (w.status.Storage.AtSize < 3 || w.templateSize() != size); n++ {
		w.step(5e9)
	}
}

// activeJobs names the active Jobs whose names start with prefix.
func (w *world) activeJobs(prefix string) []string {
	var out []string
	for _, name := range sortedKeys(w.jobs) {
		if strings.HasPrefix(name, prefix) && w.jobs[name].state == facts.JobActive {
			out = append(out, name)
		}
	}
	return out
}

func conditionMessage(st api.ClusterStatus, typ string) string {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c.Message
		}
	}
	return ""
}

func (w *world) podUIDs() map[int]string {
	out := map[int]string{}
	for i, p := range w.pods {
		out[i] = p.uid
	}
	return out
}

// Growing spec.storage.size: one claim at a time, in ordinal order, each only while every member is
// healthy; then the StatefulSet is re-created once for its claim template; no pod restarts and no
// member changes.
func TestVolumeGrowth(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	pods, members := w.podUIDs(), append([]api.Member(nil), w.etcd.members...)
	w.growTo("20Gi")
	var order []string
	for n := 0; n < 60; n++ {
		w.step(5e9)
		grow := w.activeJobs(w.name + "-grow-")
		require.LessOrEqual(t, len(grow), 1, "one claim at a time: %v", grow)
		for _, name := range sortedKeys(w.jobs) {
			if strings.HasPrefix(name, w.name+"-grow-") && !slices.Contains(order, name) {
				order = append(order, name)
			}
		}
		if w.status.Storage != nil && w.status.Storage.AtSize == 3 && w.templateSize() == "20Gi" && w.status.Phase == api.PhaseRunning && w.stable() {
			break
		}
	}
	require.Equal(t, []string{"demo-grow-0-1", "demo-grow-1-1", "demo-grow-2-1"}, order)
	for i := 0; i < 3; i++ {
		require.Equal(t, "20Gi", w.pvcs[i].size)
	}
	require.Equal(t, "20Gi", w.templateSize(), "the claim template is brought in line")
	require.Equal(t, 1, w.stsOrphaned, "the StatefulSet is re-created once")
	require.Equal(t, pods, w.podUIDs(), "no pod restarts")
	require.Equal(t, members, w.etcd.members)
	require.Equal(t, &api.StorageStatus{Size: "20Gi", Claims: 3, AtSize: 3, TemplateSize: "20Gi"}, w.status.Storage)
	require.Empty(t, w.activeJobs(w.name+"-"))
	require.Equal(t, 3, w.replicas())

	// A member added after the growth gets a claim of the new size.
	w.setSpec(func(s *api.ClusterSpec) { s.Size = ptr(int32(5)) })
	w.converge(80)
	require.Equal(t, "20Gi", w.pvcs[4].size)
}

// A member added while the template is still small gets a small claim, grown once it has joined.
func TestVolumeGrowthScaleUpFirst(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	w.setSpec(func(s *api.ClusterSpec) { s.Size = ptr(int32(4)); q := resource.MustParse("20Gi"); s.Storage.Size = &q })
	w.converge(120)
	for i := 0; i < 4; i++ {
		require.Equal(t, "20Gi", w.pvcs[i].capacity, "claim %d", i)
	}
	require.Equal(t, "20Gi", w.templateSize())
}

// A member that is down is grown first (its disk may be full: the likeliest reason to grow), while the
// others are healthy; no other claim grows while it is down (its Job may restart the member, and growing
// is never worth a second member down).
func TestVolumeGrowthDownMemberFirst(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	w.down[2] = true
	for n := 0; n < 30; n++ {
		w.step(5e9)
	}
	w.growTo("20Gi")
	seen := map[string]bool{}
	for n := 0; n < 20; n++ {
		w.step(5e9)
		for _, name := range sortedKeys(w.jobs) {
			seen[name] = true
			require.NotContains(t, []string{"demo-grow-0-1", "demo-grow-1-1"}, name, "no other claim grows while member 2 is down")
		}
	}
	require.True(t, seen["demo-grow-2-1"], "the down member's claim first: %v", seen)
	require.Equal(t, "20Gi", w.pvcs[2].capacity)
	require.Contains(t, w.status.Message, "every member but demo-0 healthy before growing its claim data-demo-0")
	w.down[2] = false
	w.stepUntilGrown("20Gi")
	require.Equal(t, int32(3), w.status.Storage.AtSize)
}

// Shrinking is refused by name; nothing changes.
func TestVolumeShrinkRefused(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	before := string(mustJSON(w.lastResp.Children))
	w.growTo("5Gi")
	w.step(5e9)
	require.Equal(t, "True/StorageShrink", w.condition(api.CondInvalidSpec))
	require.Contains(t, w.status.Message+conditionMessage(w.status, api.CondInvalidSpec), "spec.storage.size cannot shrink from 10Gi to 5Gi")
	require.Equal(t, before, string(mustJSON(w.lastResp.Children)))
	require.Equal(t, "10Gi", w.status.Storage.Size)

	w.setSpec(func(s *api.ClusterSpec) {
		q := resource.MustParse("10Gi")
		s.Storage.Size = &q
		s.Storage.StorageClassName = ptr("fast")
	})
	w.step(5e9)
	require.Equal(t, "True/StorageImmutable", w.condition(api.CondInvalidSpec))
}

// A growth the StorageClass refuses (no claim ever asked for more) can be withdrawn; once a claim asks
// for the size, going below it is refused.
func TestVolumeGrowthWithdrawn(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	w.refuseGrowth = true
	w.growFor("20Gi", 5)
	require.Regexp(t, `Job demo-grow-0-1 was refused for a cause another attempt would meet again \(kubectl logs job/demo-grow-0-1\): not retried`, w.status.Message)
	require.NotContains(t, w.jobs, "demo-grow-0-2", "a refusal is not retried")
	w.growTo("10Gi")
	w.converge(20)
	require.Equal(t, "", w.condition(api.CondInvalidSpec))
	require.Equal(t, &api.StorageStatus{Size: "10Gi", Claims: 3, AtSize: 3, TemplateSize: "10Gi"}, w.status.Storage)

	w.refuseGrowth, w.noResizer = false, true
	w.growFor("20Gi", 5)
	require.Equal(t, "20Gi", w.pvcs[0].size, "claim 0 asks for 20Gi; no driver grows it")
	w.growTo("10Gi")
	w.step(5e9)
	require.Equal(t, "True/StorageShrink", w.condition(api.CondInvalidSpec))
	require.Contains(t, conditionMessage(w.status, api.CondInvalidSpec), "cannot shrink from 20Gi to 10Gi (claims ask for up to 20Gi)")
}

// A StorageClass that does not allow expansion: the Job fails and is retried with backoff; the status
// says which claim and Job; the cluster keeps running.
func TestVolumeGrowthRefused(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	w.noResizer = true
	w.growFor("20Gi", 10)
	require.Regexp(t, `growing claim data-demo-0 to 20Gi: Job demo-grow-0-\d+ failed \(see its log\); retrying after`, w.status.Message)
	require.Equal(t, api.PhaseRunning, w.status.Phase)
	require.Equal(t, int32(0), w.status.Storage.AtSize)
	require.Equal(t, "10Gi", w.templateSize(), "the template waits for every claim")
	w.noResizer = false
	w.stepUntilGrown("20Gi")
	require.Equal(t, int32(3), w.status.Storage.AtSize)
	require.Equal(t, "20Gi", w.templateSize())
}

// Paused: no growth starts.
func TestVolumeGrowthPaused(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	w.setSpec(func(s *api.ClusterSpec) { s.Paused = true; q := resource.MustParse("20Gi"); s.Storage.Size = &q })
	for n := 0; n < 10; n++ {
		w.step(5e9)
		require.Empty(t, w.activeJobs(w.name+"-grow-"))
	}
	require.Equal(t, "10Gi", w.status.Storage.Size)
}

// The StatefulSet deleted by hand with --cascade=orphan: the hook re-creates it over the running pods
// with the partition above them, and no pod restarts.
func TestStatefulSetOrphanedByHand(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	pods := w.podUIDs()
	delete(w.desired[wire.KeyStatefulSet], w.name)
	w.stsSpec = ""
	w.step(5e9)
	require.Equal(t, 3, w.replicas(), "replicas from the members, not 1")
	require.Equal(t, 3, w.partition(), "the new StatefulSet replaces no pod until the hook steps")
	w.converge(20)
	require.Equal(t, pods, w.podUIDs(), "pods already on its revision: the partition steps down without a restart")
	require.Equal(t, 0, w.partition())
}

// The same with a template change in between (a new version of the hook renders another template):
// the partition starts above every pod and the roll replaces them one at a time, health-gated.
func TestStatefulSetOrphanedTemplateChanged(t *testing.T) {
	w := newWorld(t, 3)
	w.converge(60)
	delete(w.desired[wire.KeyStatefulSet], w.name)
	w.stsSpec = ""
	w.setSpec(func(s *api.ClusterSpec) { s.Version = "3.7.4" })
	w.step(5e9)
	require.Equal(t, 3, w.replicas())
	require.Equal(t, 3, w.partition(), "no pod is replaced by the new StatefulSet until the hook steps")
	w.converge(80)
	require.Equal(t, 0, w.partition())
	for _, p := range w.pods {
		require.Equal(t, "quay.io/coreos/etcd:v3.7.4", p.image)
	}
}
