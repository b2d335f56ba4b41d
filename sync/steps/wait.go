package steps

import (
	"fmt"
	"strings"
)

// WaitKind is the step family a wait holds: what a client or a test can group the waits by without
// parsing their text.
type WaitKind int

const (
	// Spec: a new spec (or a valid one) waits to be adopted.
	Spec WaitKind = iota + 1
	// SplitBrain: members report different cluster IDs.
	SplitBrain
	// Quorum: no voting member reports a healthy cluster.
	Quorum
	// Bootstrap: the cluster's creation (a seed, a static start).
	Bootstrap
	// Restore: a restore, from spec.restore or in place.
	Restore
	// InFlight: the membership or volume step an earlier answer started (its Subject).
	InFlight
	// Join: a member joining, or replacing one that lost its data.
	Join
	// Removal: a member leaving the member list (a dead one, an orphan).
	Removal
	// Scale: the size changing (a member leaving at the top, its pod and claim going).
	Scale
	// RollWait: the rolling update of the pods.
	RollWait
	// Volume: a claim growing or the StatefulSet re-created for its claim template.
	Volume
	// TLSSwitch: spec.security.tls.enabled being switched.
	TLSSwitch
	// CARotation: the built-in CA being rotated.
	CARotation
	// Pause: spec.paused.
	Pause
	// Promote: a standby's promotion (its applier stopping).
	Promote
)

// Wait is one thing the hook waits for. Its text is Subject (when the sentence starts with what is
// waited for: a pod, a step in flight) then Detail, after a prefix naming the family for the in-place
// restarts that run beside other steps (TLS switch, CA rotation).
type Wait struct {
	Kind    WaitKind
	Subject string
	Detail  string
}

func (w Wait) String() string {
	s := w.Detail
	switch {
	case w.Subject != "" && s != "":
		s = w.Subject + " " + s
	case w.Subject != "":
		s = w.Subject
	}
	switch w.Kind {
	case TLSSwitch:
		return "TLS switch: " + s
	case CARotation:
		return "CA rotation: " + s
	}
	return s
}

// Waits are the waits of one decision, in the order the steps added them.
type Waits []Wait

// Add adds w unless a wait of the same text is there already (two steps may name the same step in
// flight).
func (ws Waits) Add(w Wait) Waits {
	s := w.String()
	for _, o := range ws {
		if o.String() == s {
			return ws
		}
	}
	return append(ws, w)
}

// Addf adds a wait of kind about subject, the rest formatted (Add).
func (ws Waits) Addf(kind WaitKind, subject, format string, args ...any) Waits {
	return ws.Add(Wait{Kind: kind, Subject: subject, Detail: fmt.Sprintf(format, args...)})
}

// String is status.message's form: the waits in order, "; " between them.
func (ws Waits) String() string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.String()
	}
	return strings.Join(parts, "; ")
}
