package steps

import (
	"k8s.io/apimachinery/pkg/api/resource"
)

// SpaceState is what decideSpace found, for the overlay, the records and status.
type SpaceState struct {
	// On: the spec has a quota to manage (not disabled, parses).
	On bool
	// SpecQuota: the spec's quota; Quota: the one rendered (raised or the spec's).
	SpecQuota, Quota int64
	// Storage: the claim size rendered when it is above the spec's (a growth for the quota), else nil.
	Storage *resource.Quantity
	// The figures it decided by, for the message (spaceMessage).
	Pct        int32
	MaxQuota   int64
	MaxStorage *resource.Quantity
	Volumes    bool
	// Message: where the raises stand and why a member past the line still waits (plan.conclude).
	Message string
}
