package api

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Storage that never fills (docs/design/15-maintenance.md §15.6): before a member's database reaches
// its quota the hook defragments it (a "space" pass) and, when the live data itself needs the room,
// raises the quota within spec.maintenance.space.maxQuota, growing the volumes first within
// spec.maintenance.space.maxStorage. These are the figures both the hook and the agents compute with.

// SpaceSpec configures it. Nil: members are defragmented at DefaultSpaceActAtPercent, and the quota
// and the volumes are never raised.
type SpaceSpec struct {
	// ActAtPercent: a member whose database file reaches this share of the quota is defragmented
	// when that gives back at least SpaceReclaimMin; otherwise the quota is raised. Default 70.
	ActAtPercent *int32 `json:"actAtPercent,omitempty"`
	// MaxQuota: the quota (quota-backend-bytes) is raised, doubling each time, up to this. Unset: never
	// raised.
	MaxQuota *resource.Quantity `json:"maxQuota,omitempty"`
	// MaxStorage: the member volumes grow, through the resize path of spec.storage.size, up to this
	// when a raised quota needs room (SpaceVolumeFor). Unset: never grown for the quota.
	MaxStorage *resource.Quantity `json:"maxStorage,omitempty"`
}

const (
	// DefaultSpaceActAtPercent is below DatabaseNearQuotaPercent: the step runs before the alert fires.
	DefaultSpaceActAtPercent = 70
	// SpaceQuotaCeiling: etcd's documented largest sensible quota (8 GiB); a larger maxQuota is refused.
	SpaceQuotaCeiling = 8 << 30
	// spaceVolumeReserve: room on a volume beside two database files: the WAL (etcd keeps 5 segments
	// of 64 MiB) and the raft snapshots.
	spaceVolumeReserve = 512 << 20
	// spaceReclaimFloor: SizeMoved's 1 MiB twice, so a defragmentation worth doing always moves the
	// report (otherwise the hook would keep asking a member with nothing left to give back).
	spaceReclaimFloor = 2 << 20
)

// SpacePassPrefix starts the token of a space pass: "space:<percent>". The percent is in the token so
// that the agent, asked, judges its own fresh state by the hook's line.
const SpacePassPrefix = "space:"

// SpacePass is the token of the space pass at percent.
func SpacePass(percent int32) string { return SpacePassPrefix + strconv.Itoa(int(percent)) }

// ParseSpacePass reads a space pass token; ok is false for any other token or a percent outside 1..99.
func ParseSpacePass(token string) (percent int32, ok bool) {
	v, found := strings.CutPrefix(token, SpacePassPrefix)
	if !found {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 || n > 99 {
		return 0, false
	}
	return int32(n), true
}

// SpaceReclaimMin is what a space defragmentation must give back to be worth a member's pause: an
// eighth of the quota, so a member is not defragmented again before it has written that much garbage.
func SpaceReclaimMin(quota int64) int64 {
	return max(quota/8, spaceReclaimFloor)
}

// SpaceOverLine says whether a database file of size bytes is at or above percent of quota.
func SpaceOverLine(size, quota int64, percent int32) bool {
	return quota > 0 && size > 0 && size*100 >= quota*int64(percent)
}

// SpaceWantsDefrag: the file is over the line and a defragmentation gives back SpaceReclaimMin.
func SpaceWantsDefrag(size, inUse, quota int64, percent int32) bool {
	return spaceSizes(size, inUse) && SpaceOverLine(size, quota, percent) && size-inUse >= SpaceReclaimMin(quota)
}

// SpaceWantsQuota: the file is over the line and a defragmentation would not give back enough: the live
// data (and the history the compaction keeps) needs a larger quota.
func SpaceWantsQuota(size, inUse, quota int64, percent int32) bool {
	return spaceSizes(size, inUse) && SpaceOverLine(size, quota, percent) && size-inUse < SpaceReclaimMin(quota)
}

// spaceSizes: sizes etcd could report (the part in use within the file). Anything else is a hand edit
// of the report, which asks for neither a defragmentation nor a larger quota.
func spaceSizes(size, inUse int64) bool { return inUse >= 0 && inUse <= size }

// SpaceVolumeFor is the volume a member needs under quota: the database file, the copy a
// defragmentation writes beside it, and spaceVolumeReserve.
func SpaceVolumeFor(quota int64) int64 { return 2*quota + spaceVolumeReserve }

// SpaceQuotaFor is the largest quota a volume of bytes holds (SpaceVolumeFor's inverse), 0 when none.
func SpaceQuotaFor(bytes int64) int64 { return max((bytes-spaceVolumeReserve)/2, 0) }

// SpaceActAt is the spec's ActAtPercent or the default.
func (s ClusterSpec) SpaceActAt() int32 {
	if sp := s.Maintenance.Space; sp != nil && sp.ActAtPercent != nil {
		return *sp.ActAtPercent
	}
	return DefaultSpaceActAtPercent
}

// validateSpace checks spec.maintenance.space against the quota and the storage it raises.
func validateSpace(s ClusterSpec) []Problem {
	sp := s.Maintenance.Space
	if sp == nil {
		return nil
	}
	var ps []Problem
	add := func(format string, a ...any) {
		ps = append(ps, Problem{"InvalidSpace", fmt.Sprintf(format, a...)})
	}
	if p := sp.ActAtPercent; p != nil && (*p < 50 || *p > 90) {
		add("spec.maintenance.space.actAtPercent %d is outside 50..90 (below 50 a raise would leave the new quota under a quarter full; above 90 leaves no time to act before NOSPACE)", *p)
	}
	quota, ok := QuotaBackendBytes(s.Options)
	if q := sp.MaxQuota; q != nil {
		switch {
		case !ok:
			// InvalidOption says it already.
		case quota == 0:
			add("spec.maintenance.space.maxQuota needs a quota: spec.options quota-backend-bytes is negative (no quota)")
		case q.Value() < quota:
			add("spec.maintenance.space.maxQuota %s is below the quota %d (spec.options quota-backend-bytes or etcd's default of 2 GiB)", q.String(), quota)
		case q.Value() > SpaceQuotaCeiling:
			add("spec.maintenance.space.maxQuota %s is above 8 GiB, etcd's documented largest quota", q.String())
		}
	}
	if m := sp.MaxStorage; m != nil {
		switch {
		case s.Storage.EmptyDir != nil:
			add("spec.maintenance.space.maxStorage needs volumes: storage.emptyDir has none to grow")
		case sp.MaxQuota == nil:
			add("spec.maintenance.space.maxStorage grows volumes for a raised quota: set maxQuota too")
		case s.Storage.Size != nil && m.Cmp(*s.Storage.Size) < 0:
			add("spec.maintenance.space.maxStorage %s is below spec.storage.size %s", m.String(), s.Storage.Size.String())
		}
	}
	return ps
}
