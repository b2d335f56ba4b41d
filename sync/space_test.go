package sync

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

const mib = 1 << 20

// withSpace sets a quota and spec.maintenance.space's maximum (and maxStorage when not "").
func withSpace(quota int64, maxQuota, maxStorage string) func(*api.ClusterSpec) {
	return func(s *api.ClusterSpec) {
		s.Options = map[string]string{"quota-backend-bytes": fmt.Sprint(quota)}
		sp := &api.SpaceSpec{}
		if maxQuota != "" {
			sp.MaxQuota = ptr(resource.MustParse(maxQuota))
		}
		if maxStorage != "" {
			sp.MaxStorage = ptr(resource.MustParse(maxStorage))
		}
		s.Maintenance.Space = sp
	}
}

// renderedQuota is the --quota-backend-bytes flag of the rendered StatefulSet ("" without one).
func (w *world) renderedQuota() string {
	c := w.sts()["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0]
	for _, arg := range c.(map[string]any)["command"].([]any) {
		if v, ok := strings.CutPrefix(arg.(string), "--quota-backend-bytes="); ok {
			return v
		}
	}
	return ""
}

func (w *world) configData() map[string]any {
	return w.desired[wire.KeyConfigMap][w.names().ConfigMap()]["data"].(map[string]any)
}

// podQuotas are the quotas the member pods run with, by ordinal.
func (w *world) podQuotas() []int64 {
	var out []int64
	for _, i := range sortedKeys(w.pods) {
		out = append(out, w.pods[i].quota)
	}
	return out
}

// The whole path of a database that keeps growing: a file past the line with room to give back is
// defragmented, one member at a time, and the quota stays; live data past the line raises the quota,
// doubling, rolled member by member, up to maxQuota and never past it. The spec's record never
// carries the raised quota.
func TestSpaceDefragThenRaiseWithinMax(t *testing.T) {
	w := newWorld(t, 3)
	w.setSpec(withSpace(32*mib, "128Mi", ""))
	w.converge(120)
	require.Equal(t, fmt.Sprint(32*mib), w.renderedQuota())

	// 24 MiB of a 32 MiB quota (75%), 16 MiB of it free: defragment, nothing else.
	w.dbSize, w.dbSizeInUse = 24*mib, 8*mib
	seen := map[int]bool{}
	for range 30 {
		w.step(5 * time.Second)
		asked := defragIntents(w)
		require.LessOrEqual(t, len(asked), 1, "one member at a time: %v", asked)
		for i, tok := range asked {
			require.Equal(t, "space:70", tok)
			seen[i] = true
		}
	}
	require.Len(t, seen, 3, "every member defragmented")
	require.Empty(t, defragIntents(w), "the pass is over: every file is below the line")
	require.Equal(t, fmt.Sprint(32*mib), w.renderedQuota(), "room given back: the quota stays")
	require.Nil(t, w.status.Space)

	// The files fill with live data: 25 MiB, 22 MiB in use (3 MiB free, under an eighth of the quota).
	w.defragAt = map[int]time.Time{}
	w.dbSize, w.dbSizeInUse = 25*mib, 22*mib
	for range 3 { // the agents report, the hook reads
		w.step(5 * time.Second)
	}
	require.Equal(t, fmt.Sprint(64*mib), w.renderedQuota(), "raised, doubling")
	require.Equal(t, fmt.Sprint(64*mib), w.configData()[api.ConfigKeySpaceQuota])
	require.Contains(t, w.configData()[api.ConfigKeySpec], `"quota-backend-bytes":"33554432"`, "the spec's record keeps the user's quota")
	require.NotNil(t, w.status.Space)
	require.Equal(t, int64(64*mib), w.status.Space.QuotaBytes)
	require.Contains(t, w.status.Space.Message, "quota raised from 32.0 MiB to 64.0 MiB")
	require.Empty(t, defragIntents(w), "nothing to give back: no defragmentation")
	for range 60 {
		w.step(5 * time.Second)
	}
	require.Equal(t, []int64{64 * mib, 64 * mib, 64 * mib}, w.podQuotas(), "rolled onto every member")
	require.Contains(t, w.status.Space.Message, "3 of 3 members run it")

	// Past the line of 64 MiB: 128 MiB, the maximum.
	w.dbSize, w.dbSizeInUse = 46*mib, 45*mib
	w.converge(120)
	require.Equal(t, fmt.Sprint(128*mib), w.renderedQuota())
	require.Equal(t, []int64{128 * mib, 128 * mib, 128 * mib}, w.podQuotas())

	// Past the line of the maximum: nothing is raised, status says what to do.
	w.dbSize, w.dbSizeInUse = 100*mib, 99*mib
	w.step(5 * time.Second)
	w.step(5 * time.Second)
	require.Equal(t, fmt.Sprint(128*mib), w.renderedQuota(), "never past maxQuota")
	require.Contains(t, w.status.Space.Message, "the quota is at spec.maintenance.space.maxQuota")
	near := meta.FindStatusCondition(w.status.Conditions, api.CondDatabaseNearQuota)
	require.Nil(t, near, "78% of the raised quota is below the alert's 80%: the conditions judge the raised quota")
}

// Without maxQuota the quota is never raised; status says how to let the hook raise it.
func TestSpaceWithoutMaxNeverRaises(t *testing.T) {
	w := newWorld(t, 3)
	w.setSpec(func(s *api.ClusterSpec) { s.Options = map[string]string{"quota-backend-bytes": fmt.Sprint(32 * mib)} })
	w.converge(120)
	w.dbSize, w.dbSizeInUse = 25*mib, 24*mib
	for range 5 {
		w.step(5 * time.Second)
	}
	require.Equal(t, fmt.Sprint(32*mib), w.renderedQuota())
	require.NotContains(t, w.configData(), api.ConfigKeySpaceQuota)
	require.Contains(t, w.status.Space.Message, "set spec.maintenance.space.maxQuota")
}

// The records are inputs: a hand edit past the maximum is bounded by it, one that does not parse is
// ignored and said, and losing the record (or the ConfigMap) never lowers the quota the members run
// with: it is re-derived from their reports.
func TestSpaceRecordsDistrusted(t *testing.T) {
	w := newWorld(t, 3)
	w.setSpec(withSpace(32*mib, "128Mi", ""))
	w.converge(120)
	w.dbSize, w.dbSizeInUse = 25*mib, 22*mib
	w.converge(120)
	require.Equal(t, fmt.Sprint(64*mib), w.renderedQuota())
	hash := w.sts()["metadata"].(map[string]any)["annotations"].(map[string]any)[api.AnnTemplateHash]

	w.configData()[api.ConfigKeySpaceQuota] = fmt.Sprint(1 << 40)
	w.step(5 * time.Second)
	require.Equal(t, fmt.Sprint(128*mib), w.renderedQuota(), "a hand edit is bounded by maxQuota")
	w.setSpec(withSpace(32*mib, "64Mi", ""))
	w.configData()[api.ConfigKeySpaceQuota] = fmt.Sprint(1 << 40)
	w.converge(120)
	require.Equal(t, fmt.Sprint(64*mib), w.renderedQuota(), "a lowered maxQuota wins over the record")

	w.configData()[api.ConfigKeySpaceQuota] = "lots"
	w.step(5 * time.Second)
	require.Equal(t, fmt.Sprint(64*mib), w.renderedQuota(), "re-derived from the members' reports")
	ignored := meta.FindStatusCondition(w.status.Conditions, api.CondInputIgnored)
	require.NotNil(t, ignored)
	require.Contains(t, ignored.Message, `key space-quota "lots" is ignored`)
	require.Equal(t, hash, w.sts()["metadata"].(map[string]any)["annotations"].(map[string]any)[api.AnnTemplateHash], "no roll")

	delete(w.configData(), api.ConfigKeySpaceQuota)
	w.step(5 * time.Second)
	require.Equal(t, fmt.Sprint(64*mib), w.renderedQuota(), "a lost record lowers nothing")
	require.Equal(t, fmt.Sprint(64*mib), w.configData()[api.ConfigKeySpaceQuota], "and is written again")
}

// A raised quota that does not fit the volumes (SpaceVolumeFor) grows them first, within maxStorage,
// through the volume growth path; the quota follows once every claim has the size. Without
// maxStorage the quota stops at what the volumes hold.
func TestSpaceGrowsVolumesFirst(t *testing.T) {
	w := newWorld(t, 3)
	w.setSpec(func(s *api.ClusterSpec) {
		withSpace(1<<30, "4Gi", "8Gi")(s)
		q := resource.MustParse("3Gi") // holds a 1.25 GiB quota
		s.Storage.Size = &q
	})
	w.converge(120)
	w.dbSize, w.dbSizeInUse = 800*mib, 780*mib
	for range 3 {
		w.step(5 * time.Second)
	}
	require.Equal(t, fmt.Sprint(1<<30+256*mib), w.renderedQuota(), "what the volumes hold now, at once")
	require.Equal(t, "5Gi", w.configData()[api.ConfigKeySpaceStorage], "a 2 GiB quota needs 4.5 GiB: grown to 5Gi")
	require.Contains(t, w.status.Space.Message, "volumes raised to 5Gi for the quota")
	w.stepUntilGrown("5Gi")
	require.Equal(t, int32(3), w.status.Storage.AtSize)
	require.Equal(t, "5Gi", w.status.Storage.Size)
	require.Contains(t, w.configData()[api.ConfigKeySpec], `"size":"3Gi"`, "the spec's record keeps the user's size")

	// The data passes the line again: the volumes hold 2 GiB now.
	w.dbSize, w.dbSizeInUse = 950*mib, 940*mib
	w.converge(120)
	require.Equal(t, fmt.Sprint(2<<30+256*mib), w.renderedQuota(), "doubling 1.25 GiB, as far as 5 GiB volumes hold")
	require.Equal(t, "6Gi", w.configData()[api.ConfigKeySpaceStorage], "the rest grows the volumes: a 2.5 GiB quota needs 5.5 GiB")

	// Without maxStorage: no growth, the quota stops at what the volumes hold.
	v := newWorld(t, 3)
	v.setSpec(func(s *api.ClusterSpec) {
		withSpace(1<<30, "4Gi", "")(s)
		q := resource.MustParse("2Gi") // holds 768 MiB: no raise at all
		s.Storage.Size = &q
	})
	v.converge(120)
	v.dbSize, v.dbSizeInUse = 800*mib, 780*mib
	for range 3 {
		v.step(5 * time.Second)
	}
	require.Equal(t, fmt.Sprint(1<<30), v.renderedQuota())
	require.NotContains(t, v.configData(), api.ConfigKeySpaceStorage)
	require.Contains(t, v.status.Space.Message, "set spec.maintenance.space.maxStorage")
	require.Empty(t, v.activeJobs(v.name+"-grow-"))
}

// The space pass waits like any pass (a roll, an unhealthy member) and never runs beside another: the
// scheduled pass a member executes finishes first.
func TestSpacePassHeld(t *testing.T) {
	w := newWorld(t, 3)
	w.setSpec(withSpace(32*mib, "", ""))
	w.converge(120)
	w.down[1] = true
	w.dbSize, w.dbSizeInUse = 24*mib, 8*mib
	for range 3 {
		w.step(5 * time.Second)
	}
	require.Empty(t, defragIntents(w), "a member down holds the pass")
	c := meta.FindStatusCondition(w.status.Conditions, api.CondDefragmenting)
	require.NotNil(t, c)
	require.Contains(t, c.Message, "pass space:70")
	require.Contains(t, c.Message, "to be healthy")
	delete(w.down, 1)
	var order []int
	for range 30 {
		w.step(5 * time.Second)
		for i := range defragIntents(w) {
			if !slices.Contains(order, i) {
				order = append(order, i)
			}
		}
	}
	require.Len(t, order, 3)
	require.Equal(t, w.status.Leader, w.names().Pod(order[2]), "the leader last")
}

func TestSpaceFigures(t *testing.T) {
	const q = 32 * mib
	require.False(t, api.SpaceOverLine(22*mib, q, 70))
	require.True(t, api.SpaceOverLine(23*mib, q, 70))
	require.True(t, api.SpaceWantsDefrag(24*mib, 20*mib, q, 70), "4 MiB back: an eighth of the quota")
	require.False(t, api.SpaceWantsDefrag(24*mib, 21*mib, q, 70))
	require.True(t, api.SpaceWantsQuota(24*mib, 21*mib, q, 70))
	require.False(t, api.SpaceWantsQuota(20*mib, 20*mib, q, 70), "below the line: nothing")
	require.False(t, api.SpaceWantsDefrag(24*mib, 30*mib, q, 70), "in use above the size: a hand edit")
	require.False(t, api.SpaceWantsQuota(24*mib, 30*mib, q, 70), "a hand edit raises no quota either")
	require.Equal(t, int64(2*mib), api.SpaceReclaimMin(4*mib), "a floor that always moves the report")
	require.Equal(t, int64(1<<30), api.SpaceQuotaFor(api.SpaceVolumeFor(1<<30)))
	for _, tok := range []string{"space:0", "space:100", "space:x", "nospace", "now:space:70"} {
		_, ok := api.ParseSpacePass(tok)
		require.False(t, ok, tok)
	}
	pct, ok := api.ParseSpacePass(api.SpacePass(75))
	require.True(t, ok)
	require.Equal(t, int32(75), pct)
}
