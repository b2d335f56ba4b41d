package steps

import (
	"github.com/etcdhook/etcdhook/api"
)

// RecoveryState is the plan, for the Lease intents and status.recovery.
type RecoveryState struct {
	Status   *api.RecoveryStatus
	Token    string
	Survivor int // ordinal asked to force, -1 none
	// SurvivorID: the survivor's member ID, as its data holds it.
	SurvivorID string
	Fence      map[int]string // ordinal -> the member ID whose data it sets aside
}
