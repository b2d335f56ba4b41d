package steps

import (
	"strings"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
)

// TLSMode is the TLS of the pod template.
type TLSMode int

const (
	TLSPlain TLSMode = iota
	TLSOn
	TLSTransition
)

// TLSSwitchState is the decision of one sync.
type TLSSwitchState struct {
	Mode TLSMode
	// From is the scheme being left (transition, or the final roll after it): the agents' own clients
	// and a joining member's peer URL keep it until every member serves the new one.
	From string
	// Final: the pods roll from the transition template to the final one.
	Final bool
	// Turn: the ordinal whose peer URL moves now (-1 none).
	Turn   int
	Status *api.TLSSwitch
}

func (s TLSSwitchState) Active() bool { return s.Mode == TLSTransition || s.Final }

// SwitchAnnotation is the StatefulSet's etcd.io/tls-switch: "transition <from>" while the pods are
// given the transition template, "final <from>" while they roll from it to the final one.
func (s TLSSwitchState) SwitchAnnotation() string {
	switch {
	case s.Mode == TLSTransition:
		return "transition " + s.From
	case s.Final:
		return "final " + s.From
	}
	return ""
}

// RenewRequest is the etcd.io/renew-certificates value.
func RenewRequest(f *facts.Facts) string {
	return strings.TrimSpace(f.Parent.Annotations[api.AnnRenewCertificates])
}
