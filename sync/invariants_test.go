package sync

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// TestInvariantsOverGeneratedHistories drives many generated histories through the world: random sizes,
// spec edits (valid and invalid), version changes, pods going down and coming back, data loss, failing
// and stuck Jobs, a hook that crashes before its answer is applied, stale requests replayed, all pods
// restarting, time jumps, hand-edited intents, agents whose clocks run ahead and wiped records. Every sync is checked against docs/design/09-invariants.md §9 (checkResponse: one change in
// flight, replicas floor, quorum rule for removals, no partial child list, determinism, idempotency, no
// second bootstrap). After the faults stop, every history must converge to its spec (invariant 6).
func TestInvariantsOverGeneratedHistories(t *testing.T) {
	runs := 100
	if testing.Short() {
		runs = 20
	}
	if n, err := strconv.Atoi(os.Getenv("ETCDHOOK_HISTORIES")); err == nil && n > 0 {
		runs = n // a longer exploration: ETCDHOOK_HISTORIES=2000 go test -run Invariants ./sync/
	}
	for seed := 1; seed <= runs; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { generatedHistory(t, int64(seed)) })
	}
}

func generatedHistory(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	w := newWorld(t, int32(1+rng.Intn(5)))
	w.v2 = rng.Intn(2) == 0
	w.lastApplied = rng.Intn(2) == 0
	w.readyLag = rng.Intn(2) == 0
	versions := []string{"3.5.21", "3.5.22", "3.6.15", "3.6.16"}
	vi := rng.Intn(2)
	w.spec.Version = versions[vi]
	w.converge(120)
	var stale *Request
	for n := 0; n < 40; n++ {
		switch rng.Intn(17) {
		case 0:
			w.setSpec(func(s *api.ClusterSpec) { s.Size = ptr(int32(1 + rng.Intn(5))) })
		case 1:
			if vi+1 < len(versions) {
				vi++
				w.setSpec(func(s *api.ClusterSpec) { s.Version = versions[vi] })
			}
		case 2:
			saved := *w.spec.DeepCopy()
			w.setSpec(func(s *api.ClusterSpec) { s.Size = ptr(int32(12)) })
			w.step(5 * time.Second)
			w.setSpec(func(s *api.ClusterSpec) { *s = saved })
		case 3:
			if i := rng.Intn(5); w.pods[i] != nil {
				w.down[i] = true
			}
		case 4:
			for i := range w.down {
				delete(w.down, i)
			}
		case 5:
			// A volume is wiped, within the cluster's fault tolerance: losing the data of a quorum
			// needs the manual recovery the README documents, not the hook.
			if i := rng.Intn(5); w.pods[i] != nil && w.spareVoters() > 0 {
				w.data[i] = ""
			}
		case 6:
			w.failJobs = rng.Intn(2) == 0
			w.noJobs = !w.failJobs && rng.Intn(2) == 0
		case 7:
			stale = w.request()
		case 8:
			if stale != nil { // Metacontroller answers from a stale cache
				w.applyStale(stale)
			}
		case 9:
			// The hook computes but crashes before Metacontroller applies the answer.
			_, err := Compute(w.request(), w.now, w.opts)
			require.NoError(t, err)
			w.controllers()
			w.agents()
			w.now = w.now.Add(5 * time.Second)
			continue
		case 10:
			for _, i := range sortedKeys(w.pods) { // every pod restarts at once
				p := w.pods[i]
				p.uid, p.ready = w.newUID("pod"), false
				w.pods[i] = p
			}
		case 11:
			w.now = w.now.Add(time.Duration(1+rng.Intn(12)) * time.Minute)
		case 12:
			w.stsLag = !w.stsLag
		case 13:
			// A hand edit of the hook-owned half of a Lease: a leave, a typo, an endless permission.
			if ann := w.desired[wire.KeyLease][w.names().Lease(rng.Intn(5))]; ann != nil {
				a := ann["metadata"].(map[string]any)["annotations"].(map[string]any)
				switch rng.Intn(3) {
				case 0:
					a[api.AnnIntent] = api.IntentLeave
				case 1:
					a[api.AnnIntent] = "memebr"
				default:
					a[api.AnnJoinPermitted] = w.now.UTC().Format(time.RFC3339)
					a[api.AnnJoinDeadline] = w.now.Add(1000 * time.Hour).UTC().Format(time.RFC3339)
				}
			}
		case 14:
			// An agent whose clock runs ahead writes a renewTime from the future.
			if l := w.leases[rng.Intn(5)]; l != nil {
				l.renewed = w.now.Add(time.Duration(1+rng.Intn(60)) * time.Minute)
			}
		case 15:
			// The hook's records are wiped: status and the ConfigMap.
			w.status = api.ClusterStatus{}
			delete(w.desired, wire.KeyConfigMap)
		}
		w.step(time.Duration(1+rng.Intn(30)) * time.Second)
	}
	// Faults stop: everything must converge to the spec.
	for i := range w.down {
		delete(w.down, i)
	}
	w.failJobs, w.noJobs, w.stsLag = false, false, false
	w.converge(300)
	want := int(*api.Defaulted(w.spec).Size)
	require.Len(t, w.voterOrdinals(), want, "seed %d", seed)
	require.Equal(t, want, w.replicas())
	for _, p := range w.pods {
		require.Equal(t, "quay.io/coreos/etcd:v"+w.spec.Version, p.image)
	}
}

// spareVoters is how many more voters could lose their data without losing quorum.
func (w *world) spareVoters() int {
	voters, intact := w.votersWhere(func(i int, m api.Member) bool { return w.pods[i] != nil && w.data[i] == m.ID })
	return intact - api.Quorum(voters)
}
