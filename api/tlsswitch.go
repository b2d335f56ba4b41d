package api

import "k8s.io/utils/ptr"

// Switching TLS on or off on a running cluster (docs/design/14-tls.md §14.8): members serve both schemes on the
// client port meanwhile, and each member's peer URL moves to the other scheme one member at a time.
const (
	// AnnPeerScheme (hook-owned, one member Lease at a time): the scheme ("http" or "https") this member
	// may move its peer URL to now. Its agent stops etcd, updates its own peer URL through the other
	// members (member update) and starts etcd listening on that scheme.
	AnnPeerScheme = "etcd.io/peer-scheme"
	// AnnHoldTLSSwitch on the EtcdCluster (any value): a TLS switch stops before its final roll, with
	// every peer URL moved and both schemes still served, until the annotation is removed; clients move
	// at their own pace meanwhile.
	AnnHoldTLSSwitch = "etcd.io/hold-tls-switch"
	// AnnTLSSwitch (hook-owned, on the StatefulSet): "transition <scheme left>" while the pods are given
	// the transition template, "final <scheme left>" while they roll from it to the final one. Read only
	// when no member list is known (the peer URLs' schemes say where a switch stands).
	AnnTLSSwitch = "etcd.io/tls-switch"

	// AgentFlagTLSTransition is the agent's flag (before "--") in the transition template: certificates on
	// both planes, the client port serving both schemes, the peer listener on the scheme of the member's
	// own peer URL in the member list. Its value is the scheme being left, which the agent's own clients
	// and a joining member's peer URL keep until the switch is over.
	AgentFlagTLSTransition = "--tls-transition="
)

// Phases of a TLS switch (status.tls.switch.phase).
const (
	// TLSSwitchRollingIn: the pods roll to the transition template (both schemes served).
	TLSSwitchRollingIn = "RollingToTransition"
	// TLSSwitchPeers: one member at a time moves its peer URL to the new scheme.
	TLSSwitchPeers = "UpdatingPeerURLs"
	// TLSSwitchRollingOut: every peer URL has the new scheme; the pods roll to the final template.
	TLSSwitchRollingOut = "RollingToFinal"
)

// TLSSwitch is a switch of spec.security.tls.enabled on a running cluster in progress.
type TLSSwitch struct {
	// To: "https" (enabling) or "http" (disabling).
	To    string `json:"to"`
	Phase string `json:"phase"`
	// Members counts the members; Switched those whose peer URL has the new scheme.
	Members  int32 `json:"members"`
	Switched int32 `json:"switched"`
	// Switching names the member moving its peer URL now.
	Switching string `json:"switching,omitempty"`
	Waiting   string `json:"waiting,omitempty"`
}

// Scheme is "https" or "http".
func Scheme(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

// As is the TLS spec with enabled set to on, and when on, the defaults a defaulted spec would have: the
// settings the transition template renders from, whichever way the switch goes (a spec switched off
// keeps its Secrets' names and lifetimes, but Defaulted fills them only when on).
func (s TLSSpec) As(on bool) TLSSpec {
	d := ClusterSpec{Security: SecuritySpec{TLS: s}}
	d = *d.DeepCopy()
	d.Security.TLS.Enabled = ptr.To(on)
	if on {
		d = Defaulted(d)
	}
	return d.Security.TLS
}
