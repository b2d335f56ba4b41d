package api

import (
	"fmt"
	"strings"
)

// CA rotation (docs/design/14-tls.md §14.6): the hook decides each step from what the agents report of the CA
// Secret and of the files their etcd runs with; the agents make the new CA, reissue from it and swap the
// Secret, and restart their etcd in place only when the hook lets them, one member at a time.
const (
	// AnnRotateCA on the EtcdCluster asks for the built-in CA to be replaced, once per value never used
	// before (any token): the new CA carries its mark (RenewalMark of the value) in its subject.
	AnnRotateCA = "etcd.io/rotate-ca"

	// AnnCARotation (hook-owned, every member Lease while a rotation runs): "<mark> <phase>".
	AnnCARotation = "etcd.io/ca-rotation"
	// AnnCARestart (hook-owned, one member Lease at a time): the CAs (fingerprints, sorted, comma-
	// separated) this member may restart its etcd to trust. etcd reads its trusted CAs only at start; the
	// agent restarts it in place when the CA Secret lists exactly these and etcd trusts others.
	AnnCARestart = "etcd.io/ca-restart"

	// AnnTLSIssuer (agent-owned): the fingerprint of the CA that signed the built-in member certificate in
	// use. AnnTLSCASecret: the CA Secret as the agent last read it (CASecretState).
	AnnTLSIssuer   = "etcd.io/tls-issuer"
	AnnTLSCASecret = "etcd.io/tls-ca-secret"
)

// Phases of a CA rotation, as the hook asks for them on the member Leases.
const (
	// CAPhaseTrust: the new CA is made (by one agent, in the CA Secret beside the one that signs) and
	// every member's etcd restarts, one at a time, trusting both.
	CAPhaseTrust = "trust"
	// CAPhaseSign: every member's etcd trusts both; the member certificates and the client Secret are
	// reissued from the new CA (no restart: etcd reads them at each handshake).
	CAPhaseSign = "sign"
	// CAPhaseDrop: everything is issued from the new CA; an agent makes it the only CA of the Secret and
	// the members restart again, one at a time, trusting it alone.
	CAPhaseDrop = "drop"
)

// CARotationIntent is the hook's AnnCARotation: "<mark> <phase>[ <carry>]". Carry is the mark of an
// etcd.io/rotate-ca request the replaced CA had served, written into the new CA (an automatic rotation
// under a request left in place), so the request still reads as served afterwards.
type CARotationIntent struct {
	Mark  string
	Phase string
	Carry string
}

func (r CARotationIntent) String() string {
	if r.Mark == "" {
		return ""
	}
	if r.Carry != "" {
		return r.Mark + " " + r.Phase + " " + r.Carry
	}
	return r.Mark + " " + r.Phase
}

// ParseCARotation reads AnnCARotation; a value the hook could not have written is an error.
func ParseCARotation(s string) (CARotationIntent, error) {
	if s == "" {
		return CARotationIntent{}, nil
	}
	parts := strings.Split(s, " ")
	bad := len(parts) < 2 || len(parts) > 3 || !IsMark(parts[0]) || (len(parts) == 3 && !IsMark(parts[2]))
	if bad || (parts[1] != CAPhaseTrust && parts[1] != CAPhaseSign && parts[1] != CAPhaseDrop) {
		return CARotationIntent{}, fmt.Errorf("%s %q is not \"<mark> trust|sign|drop[ <mark>]\"", AnnCARotation, s)
	}
	r := CARotationIntent{Mark: parts[0], Phase: parts[1]}
	if len(parts) == 3 {
		r.Carry = parts[2]
	}
	return r, nil
}

// IsMark says whether s is a mark the hook writes (RenewalMark: 10 hex digits).
func IsMark(s string) bool { return len(s) == 10 && strings.Trim(s, "0123456789abcdef") == "" }

// CASecretState is what the CA Secret holds: the CA that signs (Current) and, during a rotation, the one
// replacing it (Next), each by fingerprint with its rotation mark ("" for a CA made without a request)
// and the request mark it carries (CARotationIntent.Carry).
type CASecretState struct {
	Current, CurrentMark, CurrentCarry string
	Next, NextMark, NextCarry          string
}

// Serves says whether the current CA answers the request of mark: made for it, or carrying it.
func (s CASecretState) Serves(mark string) bool {
	return mark != "" && (s.CurrentMark == mark || s.CurrentCarry == mark)
}

// String renders "<fp>[/<mark>[/<carry>]][,…]" (current first).
func (s CASecretState) String() string {
	if s.Current == "" {
		return ""
	}
	one := func(fp, mark, carry string) string {
		switch {
		case carry != "":
			return fp + "/" + mark + "/" + carry
		case mark != "":
			return fp + "/" + mark
		}
		return fp
	}
	out := one(s.Current, s.CurrentMark, s.CurrentCarry)
	if s.Next != "" {
		out += "," + one(s.Next, s.NextMark, s.NextCarry)
	}
	return out
}

// Trust is what members should trust by this Secret: its CAs, sorted, comma-separated.
func (s CASecretState) Trust() string {
	switch {
	case s.Next == "":
		return s.Current
	case s.Next < s.Current:
		return s.Next + "," + s.Current
	}
	return s.Current + "," + s.Next
}

// ParseCASecretState reads AnnTLSCASecret; ok is false for a value an agent could not have written.
func ParseCASecretState(v string) (s CASecretState, ok bool) {
	if v == "" {
		return s, true
	}
	parts := strings.Split(v, ",")
	if len(parts) > 2 {
		return CASecretState{}, false
	}
	one := func(p string) (fp, mark, carry string, ok bool) {
		f := strings.Split(p, "/")
		if len(f) > 3 || !IsSHA256(f[0]) {
			return "", "", "", false
		}
		fp = f[0]
		if len(f) > 1 {
			mark = f[1]
		}
		if len(f) > 2 {
			carry = f[2]
		}
		return fp, mark, carry, (mark == "" || IsMark(mark)) && (carry == "" || IsMark(carry) && mark != "")
	}
	var good bool
	if s.Current, s.CurrentMark, s.CurrentCarry, good = one(parts[0]); !good {
		return CASecretState{}, false
	}
	if len(parts) == 2 {
		if s.Next, s.NextMark, s.NextCarry, good = one(parts[1]); !good || s.Next == s.Current {
			return CASecretState{}, false
		}
	}
	return s, true
}

// IsSHA256 is a SHA-256 as the project writes one: 64 lower-case hex digits (pki.Fingerprint, snapshot
// manifests and restore reports).
func IsSHA256(s string) bool { return len(s) == 64 && strings.Trim(s, "0123456789abcdef") == "" }

// CA rotation phases in status.tls.caRotation.phase.
const (
	CARotationAddingCA   = "AddingCA"
	CARotationReissuing  = "Reissuing"
	CARotationDroppingCA = "DroppingOldCA"
	CARotationDone       = "Done"
)
