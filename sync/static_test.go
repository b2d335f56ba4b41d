package sync

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// A static creation (docs/design/07-steps.md §7.1) under what goes wrong around it: an answer applied in
// part, a claim that appears half-way, a record edited by hand. Whatever happens, a creation goes on
// one way or stalls: it never starts a second way beside the first, and one cluster forms.

// noSeedMark fails if any Lease carries the seed mark: a static creation never turns into a seed's.
func (w *world) noSeedMark(t *testing.T, when string) {
	t.Helper()
	for i := range w.leases {
		require.NotEqual(t, api.BootstrapSeed, w.leaseAnn(i)[api.AnnBootstrap], "%s: demo-%d carries the seed mark", when, i)
	}
}

// stsAnn is the StatefulSet's annotation key as the world holds it ("" none).
func (w *world) stsAnn(key string) string {
	v, _ := dig(w.sts(), "metadata", "annotations", key).(string)
	return v
}

func (w *world) setSTSAnn(key, value string) {
	ann := w.sts()["metadata"].(map[string]any)["annotations"].(map[string]any)
	if value == "" {
		delete(ann, key)
		return
	}
	ann[key] = value
}

func TestStaticCreationAnswerAppliedInPart(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep []string
	}{
		{"nothing applied", nil},
		{"the StatefulSet alone", []string{wire.KeyStatefulSet}},
		{"the ConfigMap and Leases without the StatefulSet", []string{wire.KeyConfigMap, wire.KeyLease}},
		{"the StatefulSet and Leases without the ConfigMap", []string{wire.KeyStatefulSet, wire.KeyLease}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, 3)
			resp, err := Compute(w.request(), w.now, w.opts)
			require.NoError(t, err)
			var kept []any
			for _, c := range resp.Children {
				if slices.Contains(tc.keep, groupKey(c.(map[string]any))) {
					kept = append(kept, c)
				}
			}
			resp.Children = kept
			w.apply(resp)
			w.controllers()
			w.agents()
			w.now = w.now.Add(5 * time.Second)
			for n := 0; n < 4; n++ {
				w.step(5 * time.Second)
				w.noSeedMark(t, fmt.Sprint("step ", n))
			}
			w.converge(20)
			require.Equal(t, []int{0, 1, 2}, w.voterOrdinals())
			require.Equal(t, "cdf818194e3a8c32", w.status.ClusterID)
			require.Equal(t, "static/3", w.stsAnn(api.AnnBootstrap), "created statically")
			for i := 0; i < 3; i++ {
				require.Nil(t, w.leaseAnn(i)[api.AnnBootstrap], "the marks go once the cluster exists")
			}
		})
	}
}

// A claim of another EtcdCluster (a volume left behind) appears for demo-2 after the creation began:
// its agent refuses the volume, the other two form the cluster the initial cluster lists, and nothing
// touches the claim or its data.
func TestStaticCreationForeignClaimAppears(t *testing.T) {
	w := newWorld(t, 3)
	w.sync()
	w.pvcs[2] = &simPVC{uid: "old-claim", clusterUID: "0b7e2c61-old", size: "1Gi", capacity: "1Gi"}
	w.data[2], w.owner[2] = "aaaa", "0b7e2c61-old"
	for n := 0; n < 20; n++ {
		w.step(5 * time.Second)
		w.noSeedMark(t, fmt.Sprint("step ", n))
	}
	require.Equal(t, "cdf818194e3a8c32", w.status.ClusterID)
	started := 0
	for _, m := range w.etcd.members {
		if m.Started {
			started++
		}
	}
	require.Equal(t, 2, started, "demo-0 and demo-1 form the cluster: %v", w.etcd.members)
	require.Equal(t, "aaaa", w.data[2], "the foreign volume is untouched")
	require.Equal(t, "0b7e2c61-old", w.pvcs[2].clusterUID)
	require.Equal(t, "True/VolumeOfAnotherCluster", w.condition(api.CondForeignData))
	require.Empty(t, w.jobNames(w.name+"-pvc-"), "no claim is deleted")
}

// The record edited by hand while the creation runs: a record that does not agree with what a static
// creation renders is not followed (and said so); nothing starts a second way, and once the record
// agrees again the creation goes on. After the cluster exists the record is inert.
func TestStaticRecordDistrusted(t *testing.T) {
	t.Run("seed mark added to a Lease", func(t *testing.T) {
		w := newWorld(t, 3)
		w.sync()
		w.desired[wire.KeyLease][w.names().Lease(0)]["metadata"].(map[string]any)["annotations"].(map[string]any)[api.AnnBootstrap] = api.BootstrapSeed
		resp := w.sync()
		require.Contains(t, condMessage(resp, api.CondInputIgnored), "carries the seed mark beside a static creation of 3 members: ignored")
		w.noSeedMark(t, "the hook's answer")
		w.converge(20)
		require.Equal(t, []int{0, 1, 2}, w.voterOrdinals())
	})
	t.Run("member count changed on the StatefulSet before any pod", func(t *testing.T) {
		w := newWorld(t, 3)
		w.sync()
		w.setSTSAnn(api.AnnBootstrap, "static/5")
		w.stsLag = true // the StatefulSet controller has not made pods or claims yet
		resp := w.sync()
		require.Contains(t, condMessage(resp, api.CondInputIgnored), "records a static creation of 5 members but has replicas 3")
		require.Contains(t, resp.Status.Message, "no member is asked to start")
		require.False(t, resp.Status.Bootstrapped)
		require.Equal(t, 3, w.replicas())
		for i := range w.leases {
			require.Nil(t, w.leaseAnn(i)[api.AnnBootstrap], "no member is asked to start any way")
		}
		w.setSTSAnn(api.AnnBootstrap, "static/3") // the edit undone: the creation goes on
		w.stsLag = false
		w.converge(20)
		require.Equal(t, []int{0, 1, 2}, w.voterOrdinals())
	})
	t.Run("member count changed on the StatefulSet with its claims made", func(t *testing.T) {
		w := newWorld(t, 3)
		w.sync()
		w.controllers()
		w.setSTSAnn(api.AnnBootstrap, "static/5")
		for n := 0; n < 6; n++ {
			resp := w.step(5 * time.Second)
			require.Contains(t, condMessage(resp, api.CondInputIgnored), "records a static creation of 5 members but has replicas 3")
			require.Equal(t, 3, w.replicas())
			for i := range w.leases {
				require.Nil(t, w.leaseAnn(i)[api.AnnBootstrap], "no member is asked to start any way")
			}
		}
		// The claims above ordinal 0 are evidence of a bootstrap: the hook waits for members that
		// never ran (a stall a human ends), and never starts one a second way.
		require.Empty(t, w.etcd.clusterID, "nothing started")
		require.True(t, w.status.Bootstrapped)
	})
	t.Run("record removed after the cluster formed", func(t *testing.T) {
		w := newWorld(t, 3)
		w.converge(20)
		members := slices.Clone(w.etcd.members)
		w.setSTSAnn(api.AnnBootstrap, "")
		w.converge(20)
		require.Equal(t, members, w.etcd.members)
		require.Empty(t, w.stsAnn(api.AnnBootstrap))
	})
}

func condMessage(resp *Response, typ string) string {
	for _, c := range resp.Status.Conditions {
		if c.Type == typ {
			return c.Message
		}
	}
	return ""
}
