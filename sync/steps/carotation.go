package steps

import (
	"github.com/etcdhook/etcdhook/api"
)

// CARotationState is the decision of one sync.
type CARotationState struct {
	Intent api.CARotationIntent // what every member Lease asks (zero: nothing)
	// Restart: the ordinal whose etcd may restart now (-1 none) into trust (etcd.io/ca-restart).
	Restart int
	Trust   string
	Status  *api.CARotation
	Active  bool // a rotation is in progress (not done)
}
