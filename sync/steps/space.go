package steps

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// Storage that never fills (docs/design/15-maintenance.md §15.6). A member whose database file passes
// spec.maintenance.space.actAtPercent of the quota is defragmented when that gives room back (the
// space pass, defrag.go); when it would not, the live data needs room and the quota is raised, doubling,
// within maxQuota, after the volumes grew within maxStorage where the raised quota needs them to. The
// raised quota and storage are the hook's records (ConfigMap space-quota, space-storage), bounded by
// the spec at every read; the rendered spec (SpaceDecision.Spec) carries them, the recorded one (the
// spec as adopted) never.

// SpaceState is what Space found, for the overlay, the records and status.
type SpaceState struct {
	// On: the spec has a quota to manage (not disabled, parses).
	On bool
	// SpecQuota: the spec's quota; Quota: the one rendered (raised or the spec's).
	SpecQuota, Quota int64
	// Storage: the claim size rendered when it is above the spec's (a growth for the quota), else nil.
	Storage *resource.Quantity
	// The figures it decided by, for the message (SpaceMessage).
	Pct        int32
	MaxQuota   int64
	MaxStorage *resource.Quantity
	Volumes    bool
	// Message: where the raises stand and why a member past the line still waits (SpaceMessage, drawn
	// by plan.conclude).
	Message string
}

// SpaceInput is what Space reads of the decisions before it.
type SpaceInput struct {
	// Spec: the spec adopted (ChooseSpec).
	Spec api.ClusterSpec
	// Paused: spec.paused (ChooseSpec): no raise while paused.
	Paused bool
	// Replicas: the members' count so far (carry): their claims hold the quota.
	Replicas int32
}

// SpaceDecision is the space step's part of the decision.
type SpaceDecision struct {
	// State: where spec.maintenance.space stands (Decision.Space).
	State SpaceState
	// Spec: the adopted spec with the raised quota and storage overlaid (Decision.Spec, rendered from).
	Spec api.ClusterSpec
}

// Space bounds the records by the adopted spec, raises them when a member's data needs room, and
// overlays the result on the spec rendered (in.Spec stays the spec as adopted, for the record).
func Space(f *facts.Facts, in SpaceInput) SpaceDecision {
	s := in.Spec
	d := SpaceDecision{Spec: s}
	specQuota, ok := api.QuotaBackendBytes(s.Options)
	if !ok || specQuota <= 0 {
		return d // no quota: nothing fills
	}
	st := SpaceState{On: true, SpecQuota: specQuota, Quota: specQuota}
	var maxQuota int64
	var maxStorage *resource.Quantity
	if sp := s.Maintenance.Space; sp != nil {
		if sp.MaxQuota != nil {
			maxQuota = sp.MaxQuota.Value()
		}
		maxStorage = sp.MaxStorage
	}
	// The records, re-derived and bounded. The quota is the larger of the record and what a member
	// reports running: a record lost or edited by hand must not lower a quota the data already needs
	// (the roll back would end in NOSPACE). Never below the spec (a user's raise wins), never above its
	// maximum (a user's lowered maximum wins; no record or report goes past it).
	if raised := max(f.SpaceQuota, reportedQuota(f)); raised > specQuota && maxQuota > specQuota {
		st.Quota = min(raised, maxQuota)
	}
	volumes := s.Storage.EmptyDir == nil && s.Storage.Size != nil
	if volumes && maxStorage != nil {
		// The same for the claim size: the claims never shrink, so the largest one asked is a floor.
		raised := f.StorageFloor()
		if r := f.SpaceStorage; r != nil && (raised == nil || r.Cmp(*raised) > 0) {
			raised = r
		}
		if raised != nil && raised.Cmp(*s.Storage.Size) > 0 {
			q := minQuantity(*raised, *maxStorage)
			if q.Cmp(*s.Storage.Size) > 0 {
				st.Storage = &q
			}
		}
	}
	pct := s.SpaceActAt()
	if need := spaceNeeders(f, st.Quota, pct); len(need) > 0 && maxQuota > st.Quota && !in.Paused {
		raiseSpace(f, in, &st, maxQuota, maxStorage, volumes)
	}
	st.Pct, st.MaxQuota, st.MaxStorage, st.Volumes = pct, maxQuota, maxStorage, volumes
	d.State = st
	if st.Quota != specQuota {
		d.Spec.Options = maps.Clone(s.Options)
		if d.Spec.Options == nil {
			d.Spec.Options = map[string]string{}
		}
		d.Spec.Options["quota-backend-bytes"] = strconv.FormatInt(st.Quota, 10)
	}
	if st.Storage != nil {
		q := st.Storage.DeepCopy()
		d.Spec.Storage.Size = &q
	}
	return d
}

// raiseSpace raises the quota (doubling, within maxQuota) as far as the members' volumes hold it now
// (SpaceQuotaFor of the smallest claim's capacity), and the storage record when the volumes must grow
// for the rest (within maxStorage, whole GiB): what does not fit waits for the volumes.
func raiseSpace(f *facts.Facts, in SpaceInput, st *SpaceState, maxQuota int64, maxStorage *resource.Quantity, volumes bool) {
	next := min(2*st.Quota, maxQuota)
	if !volumes {
		st.Quota = next
		return
	}
	if api.SpaceVolumeFor(next) > spaceCapacity(f, in, st) && maxStorage != nil {
		target := minQuantity(roundUpGi(api.SpaceVolumeFor(next)), *maxStorage)
		if cur := renderedStorage(in, st); target.Cmp(cur) > 0 {
			st.Storage = &target
		}
	}
	st.Quota = max(st.Quota, min(next, api.SpaceQuotaFor(spaceCapacity(f, in, st))))
}

// spaceWait says why a member past the line still waits for room.
func spaceWait(f *facts.Facts, in SpaceInput, st SpaceState) string {
	maxQuota, maxStorage, volumes := st.MaxQuota, st.MaxStorage, st.Volumes
	switch {
	case maxQuota == 0:
		return "set spec.maintenance.space.maxQuota to let the hook raise the quota"
	case maxQuota <= st.Quota:
		return "the quota is at spec.maintenance.space.maxQuota: delete data, shorten spec.maintenance.compaction, or raise maxQuota"
	case in.Paused:
		return "the quota is raised once spec.paused is cleared"
	case !volumes:
		return "the quota is raised at the next sync"
	}
	next := min(2*st.Quota, maxQuota)
	cur := renderedStorage(in, &st)
	switch {
	case api.SpaceVolumeFor(next) <= spaceCapacity(f, in, &st):
		return "the quota is raised at the next sync"
	case cur.Value() >= api.SpaceVolumeFor(next) || (maxStorage != nil && cur.Cmp(*maxStorage) < 0):
		return fmt.Sprintf("the quota waits for the volumes to grow to %s", cur.String())
	case maxStorage != nil:
		return fmt.Sprintf("a %s quota needs %s volumes and spec.maintenance.space.maxStorage is %s", HumanBytes(next), HumanBytes(api.SpaceVolumeFor(next)), maxStorage.String())
	}
	return fmt.Sprintf("a %s quota needs %s volumes: set spec.maintenance.space.maxStorage to let the hook grow them", HumanBytes(next), HumanBytes(api.SpaceVolumeFor(next)))
}

// renderedStorage is the claim size rendered: the raised one, else the spec's.
func renderedStorage(in SpaceInput, st *SpaceState) resource.Quantity {
	if st.Storage != nil {
		return *st.Storage
	}
	return *in.Spec.Storage.Size
}

// spaceNeeders names the members whose file is past the line with too little to give back to a
// defragmentation (api.SpaceWantsQuota), by fresh reports only: a stale one may be hours old.
func spaceNeeders(f *facts.Facts, quota int64, pct int32) []string {
	var out []string
	for _, i := range slices.Sorted(maps.Keys(f.Truth.Primary)) {
		m, lv := f.Truth.Primary[i], f.Leases[i]
		if lv == nil || !lv.Fresh || lv.Report.MemberID != m.ID {
			continue
		}
		if api.SpaceWantsQuota(m.DBSize, m.DBSizeInUse, quota, pct) {
			out = append(out, fmt.Sprintf("%s (%s, %s in use)", facts.MemberName(f, m), HumanBytes(m.DBSize), HumanBytes(m.DBSizeInUse)))
		}
	}
	return out
}

// reportedQuota is the largest quota a member's agent reports its etcd running with (fresh or not: a
// member down still has the quota it will start with again).
func reportedQuota(f *facts.Facts) int64 {
	var q int64
	for _, lv := range f.Leases {
		if lv != nil && lv.Report.MemberID != "" {
			q = max(q, lv.Report.QuotaBytes)
		}
	}
	return q
}

// spaceCapacity is the smallest volume a member has: the claims' reported capacity (their request
// until the provisioner reports one), the claim size rendered when no claim is observed.
func spaceCapacity(f *facts.Facts, in SpaceInput, st *SpaceState) int64 {
	var have int64 = -1
	for i, pvc := range f.PVCs {
		if int32(i) >= in.Replicas || pvc.DeletionTimestamp != nil {
			continue
		}
		q, ok := pvc.Status.Capacity[corev1.ResourceStorage]
		if !ok {
			q, ok = pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		}
		if ok && (have < 0 || q.Value() < have) {
			have = q.Value()
		}
	}
	if have < 0 {
		r := renderedStorage(in, st)
		have = r.Value()
	}
	return have
}

// spaceRunning says how many members run the quota (their reports).
func spaceRunning(f *facts.Facts, quota int64) string {
	n := 0
	for _, i := range slices.Sorted(maps.Keys(f.Truth.Primary)) {
		if lv := f.Leases[i]; lv != nil && lv.Report.QuotaBytes == quota {
			n++
		}
	}
	return fmt.Sprintf("%d of %d members run it", n, len(f.Truth.Primary))
}

// SpaceMessage says where the raises stand and why a member past the line still waits, from the state
// reached (st), not from the step taken: the next sync, which reads the records, says the same (status
// is a fixed point too). in is read once every step has run: the replicas decided, the spec rendered.
func SpaceMessage(f *facts.Facts, st SpaceState, in SpaceInput) string {
	var say []string
	if st.Quota > st.SpecQuota {
		say = append(say, fmt.Sprintf("quota raised from %s to %s (%s)", HumanBytes(st.SpecQuota), HumanBytes(st.Quota), spaceRunning(f, st.Quota)))
	}
	if st.Storage != nil {
		at, claims := ClaimsAtSize(f, in.Replicas, *st.Storage)
		say = append(say, fmt.Sprintf("volumes raised to %s for the quota (%d of %d claims have it)", st.Storage.String(), at, claims))
	}
	if need := spaceNeeders(f, st.Quota, st.Pct); len(need) > 0 {
		say = append(say, fmt.Sprintf("%s past %d%% of the %s quota with little to defragment: %s", strings.Join(need, ", "), st.Pct, HumanBytes(st.Quota), spaceWait(f, in, st)))
	}
	return strings.Join(say, "; ")
}

// HumanBytes renders a size with a binary unit, one decimal.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func minQuantity(a, b resource.Quantity) resource.Quantity {
	if a.Cmp(b) <= 0 {
		return a.DeepCopy()
	}
	return b.DeepCopy()
}

// roundUpGi is bytes rounded up to a whole GiB: claim sizes a person reads.
func roundUpGi(bytes int64) resource.Quantity {
	const gi = 1 << 30
	return resource.MustParse(strconv.FormatInt((bytes+gi-1)/gi, 10) + "Gi")
}
