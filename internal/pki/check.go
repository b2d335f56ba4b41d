package pki

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Problem is one thing wrong with a Secret: which key, what. String() is the form users see in
// the CertificatesInvalid condition, e.g. `tls.crt: expired at 2026-01-02T03:04:05Z`.
type Problem struct {
	Key     string
	Message string
}

func (p Problem) String() string { return p.Key + ": " + p.Message }

// Summary joins problems with "; " for a condition message.
func Summary(problems []Problem) string {
	s := make([]string, len(problems))
	for i, p := range problems {
		s[i] = p.String()
	}
	return strings.Join(s, "; ")
}

// Usage is what a certificate must be good for: Server (serverAuth), Client (clientAuth), both
// (etcd peers), or neither (only the chain is checked).
type Usage struct{ Server, Client bool }

// extKeyUsages are the usages to verify one at a time: x509.VerifyOptions.KeyUsages accepts a
// chain valid for ANY of the listed usages, so asking for both at once would pass a server-only
// certificate as a peer certificate. Neither means any usage (an empty list would mean serverAuth).
func (u Usage) extKeyUsages() []x509.ExtKeyUsage {
	var out []x509.ExtKeyUsage
	if u.Server {
		out = append(out, x509.ExtKeyUsageServerAuth)
	}
	if u.Client {
		out = append(out, x509.ExtKeyUsageClientAuth)
	}
	if len(out) == 0 {
		out = append(out, x509.ExtKeyUsageAny)
	}
	return out
}

// maxListedNames is how many uncovered names a problem lists before "and N more": enough to see
// the pattern (one member, all members, the client Service) without a wall of names.
const maxListedNames = 3

// CheckSecret validates the data of a cert-manager-layout Secret (tls.crt, tls.key, ca.crt) for use
// as a TLS identity at now, for usage, under every name in wantNames. It returns the leaf (the
// first certificate of tls.crt; nil if there is none) so the caller can report its NotAfter, and
// the problems, in a fixed order: each key missing or unparseable (tls.crt, tls.key, ca.crt); the
// key not matching; the leaf expired or not yet valid; the chain (ca.crt did not sign tls.crt, a CA
// or intermediate out of its validity, anything else x509 verification refuses); a missing
// extended key usage; names not covered. No problems means etcd will accept the files: the chain is
// checked by x509.Certificate.Verify, the pair by tls.X509KeyPair and the names by VerifyHostname,
// the same code etcd and its clients run.
//
// Expired means NotAfter <= now (x509 itself still accepts the very second of NotAfter; a
// certificate in its last second is as good as expired for a member about to use it).
func CheckSecret(data map[string][]byte, wantNames []string, usage Usage, now time.Time) (*x509.Certificate, []Problem) {
	var problems []Problem
	add := func(key, format string, args ...any) {
		problems = append(problems, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
	}
	get := func(key string) ([]byte, bool) {
		b, ok := data[key]
		switch {
		case !ok:
			add(key, "missing")
		case len(bytes.TrimSpace(b)) == 0:
			add(key, "empty")
		default:
			return b, true
		}
		return nil, false
	}

	var chain, roots []*x509.Certificate
	var signer crypto.Signer
	certPEM, haveCert := get(KeyCert)
	if haveCert {
		var err error
		if chain, err = ParseCertificates(certPEM); err != nil {
			add(KeyCert, "%v", err)
		}
	}
	keyPEM, haveKey := get(KeyKey)
	if haveKey {
		var err error
		if signer, err = parsePrivateKey(keyPEM); err != nil {
			add(KeyKey, "%v", err)
		}
	}
	if caPEM, ok := get(KeyCA); ok {
		var err error
		if roots, err = ParseCertificates(caPEM); err != nil {
			add(KeyCA, "%v", err)
		}
	}
	if len(chain) == 0 {
		return nil, problems
	}
	leaf := chain[0]

	if signer != nil {
		if !keyMatches(leaf, signer) {
			add(KeyKey, "does not match %s", KeyCert)
		} else if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
			// Not expected once the checks above pass; here so that no pair etcd would refuse
			// passes as valid.
			add(KeyKey, "crypto/tls refuses the pair: %v", err)
		}
	}

	leafValid := true
	if !now.Before(leaf.NotAfter) {
		leafValid = false
		add(KeyCert, "expired at %s", formatTime(leaf.NotAfter))
	} else if now.Before(leaf.NotBefore) {
		leafValid = false
		add(KeyCert, "not yet valid (valid from %s)", formatTime(leaf.NotBefore))
	}

	if len(roots) > 0 {
		problems = append(problems, checkChain(leaf, chain[1:], roots, usage, now, leafValid)...)
	}
	problems = append(problems, checkUsage(leaf, usage)...)

	var missing []string
	for _, name := range dedupeStrings(wantNames) {
		// VerifyHostname is what a Go TLS client runs: wildcards cover one label, IP strings
		// match IP SANs only (compared as IPs), the CN is never consulted.
		if leaf.VerifyHostname(name) != nil {
			missing = append(missing, fmt.Sprintf("%q", name))
		}
	}
	if len(missing) > maxListedNames {
		add(KeyCert, "does not cover %s and %d more", strings.Join(missing[:maxListedNames], ", "), len(missing)-maxListedNames)
	} else if len(missing) > 0 {
		add(KeyCert, "does not cover %s", strings.Join(missing, ", "))
	}
	return leaf, problems
}

// checkChain runs x509 verification of leaf (with its intermediates) against roots and, when it
// fails, explains why in terms of the Secret's keys. Verification is authoritative: a problem is
// reported only if Verify fails, or, when the leaf itself is out of its validity (already
// reported, and Verify is run at a time inside it so the chain is still checked), if the chain's
// CAs are out of theirs at now.
func checkChain(leaf *x509.Certificate, intermediates, roots []*x509.Certificate, usage Usage, now time.Time, leafValid bool) []Problem {
	at := now
	if !leafValid {
		at = clamp(now, leaf.NotBefore, leaf.NotAfter)
	}
	opts := x509.VerifyOptions{Roots: Pool(roots...), Intermediates: Pool(intermediates...), CurrentTime: at}
	var verifyErr error
	var chains [][]*x509.Certificate
	for _, eku := range usage.extKeyUsages() {
		opts.KeyUsages = []x509.ExtKeyUsage{eku}
		c, err := leaf.Verify(opts)
		if err != nil {
			verifyErr = err
			break
		}
		chains = c
	}
	if verifyErr == nil {
		if leafValid {
			return nil
		}
		// Verified at a time when the leaf was valid; say whether the CAs are valid now, choosing
		// the chain with fewest complaints (a bundle may hold an expired old CA and a good new one).
		var best []Problem
		for i, c := range chains {
			if p := timeProblems(c, roots, now); i == 0 || len(p) < len(best) {
				best = p
			}
		}
		return best
	}

	found := findChain(leaf, intermediates, roots)
	if found == nil {
		return []Problem{{Key: KeyCA, Message: "did not sign " + KeyCert + " (" + whyUnsigned(leaf, intermediates, roots) + ")"}}
	}
	if p := timeProblems(found, roots, now); len(p) > 0 {
		return p
	}
	var cie x509.CertificateInvalidError
	if errors.As(verifyErr, &cie) && cie.Reason == x509.IncompatibleUsage && cie.Cert == leaf && !allowsAll(leaf, usage) {
		return nil // the leaf's own usages; checkUsage says which is missing
	}
	return []Problem{{Key: KeyCert, Message: "does not verify against " + KeyCA + ": " + verifyErr.Error()}}
}

// findChain walks from leaf to a root by issuer name and signature only (ignoring validity periods
// and usages), depth first through the intermediates, to tell "ca.crt did not sign tls.crt" from
// "ca.crt signed it but something else is wrong". nil if there is no such path.
func findChain(leaf *x509.Certificate, intermediates, roots []*x509.Certificate) []*x509.Certificate {
	for _, r := range roots {
		if r.Equal(leaf) { // x509 accepts a certificate that is itself in the root pool
			return []*x509.Certificate{leaf}
		}
	}
	var walk func(chain []*x509.Certificate) []*x509.Certificate
	walk = func(chain []*x509.Certificate) []*x509.Certificate {
		cur := chain[len(chain)-1]
		for _, r := range roots {
			if signedBy(cur, r) {
				return append(chain, r)
			}
		}
		for _, in := range intermediates {
			if !contains(chain, in) && signedBy(cur, in) {
				if c := walk(append(chain[:len(chain):len(chain)], in)); c != nil {
					return c
				}
			}
		}
		return nil
	}
	return walk([]*x509.Certificate{leaf})
}

func signedBy(c, parent *x509.Certificate) bool {
	return bytes.Equal(c.RawIssuer, parent.RawSubject) && c.CheckSignatureFrom(parent) == nil
}

func contains(certs []*x509.Certificate, c *x509.Certificate) bool {
	for _, x := range certs {
		if x.Equal(c) {
			return true
		}
	}
	return false
}

// whyUnsigned names the issuer tls.crt asks for and what ca.crt holds, the two things a user
// compares to find the wrong CA.
func whyUnsigned(leaf *x509.Certificate, intermediates, roots []*x509.Certificate) string {
	// The top of tls.crt's own chain: follow intermediates as far as signatures go.
	top := leaf
	for seen := 0; seen < len(intermediates); seen++ {
		var next *x509.Certificate
		for _, in := range intermediates {
			if signedBy(top, in) {
				next = in
				break
			}
		}
		if next == nil {
			break
		}
		top = next
	}
	issuer := top.Issuer.String()
	what := fmt.Sprintf("issued by %q", issuer)
	if top != leaf {
		what = fmt.Sprintf("its chain ends at %q, issued by %q", top.Subject.String(), issuer)
	}
	var held []string
	sameName := false
	for _, r := range roots {
		held = append(held, fmt.Sprintf("%q", r.Subject.String()))
		if !bytes.Equal(top.RawIssuer, r.RawSubject) {
			continue
		}
		sameName = true
		// CheckSignatureFrom failed (else findChain had a path); if the bare signature is good,
		// the key is right and the certificate is not allowed to sign.
		if r.CheckSignature(top.SignatureAlgorithm, top.RawTBSCertificate, top.Signature) == nil {
			return what + fmt.Sprintf("; %q in %s is not a CA allowed to sign certificates", issuer, KeyCA)
		}
	}
	if sameName {
		return what + fmt.Sprintf("; %s holds a CA named %q but with a different key", KeyCA, issuer)
	}
	// A user who pasted a whole system bundle into ca.crt gets the first few names, not 150.
	if len(held) > maxListedNames {
		held = append(held[:maxListedNames], fmt.Sprintf("and %d more", len(held)-maxListedNames))
	}
	return what + "; " + KeyCA + " holds " + strings.Join(held, ", ")
}

// timeProblems are the CAs and intermediates of chain (everything but the leaf) out of their
// validity at now, attributed to ca.crt or tls.crt by where the certificate came from.
func timeProblems(chain, roots []*x509.Certificate, now time.Time) []Problem {
	var out []Problem
	for _, c := range chain[1:] {
		key, kind := KeyCert, "intermediate"
		if contains(roots, c) {
			key, kind = KeyCA, "CA"
		}
		if now.After(c.NotAfter) {
			out = append(out, Problem{Key: key, Message: fmt.Sprintf("%s %q expired at %s", kind, c.Subject.String(), formatTime(c.NotAfter))})
		} else if now.Before(c.NotBefore) {
			out = append(out, Problem{Key: key, Message: fmt.Sprintf("%s %q not yet valid (valid from %s)", kind, c.Subject.String(), formatTime(c.NotBefore))})
		}
	}
	return out
}

// checkUsage reports each usage the leaf's extended key usages lack. A certificate without the
// extension is good for any usage (RFC 5280, and x509 agrees).
func checkUsage(leaf *x509.Certificate, usage Usage) []Problem {
	var out []Problem
	for _, eku := range usage.extKeyUsages() {
		if eku != x509.ExtKeyUsageAny && !allows(leaf, eku) {
			out = append(out, Problem{Key: KeyCert, Message: fmt.Sprintf("has no %s extended key usage (has %s)", ekuName(eku), ekuList(leaf))})
		}
	}
	return out
}

func allowsAll(leaf *x509.Certificate, usage Usage) bool {
	for _, eku := range usage.extKeyUsages() {
		if eku != x509.ExtKeyUsageAny && !allows(leaf, eku) {
			return false
		}
	}
	return true
}

func allows(c *x509.Certificate, eku x509.ExtKeyUsage) bool {
	if len(c.ExtKeyUsage) == 0 && len(c.UnknownExtKeyUsage) == 0 {
		return true
	}
	for _, u := range c.ExtKeyUsage {
		if u == eku || u == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

func ekuName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageAny:
		return "any"
	case x509.ExtKeyUsageServerAuth:
		return "serverAuth"
	case x509.ExtKeyUsageClientAuth:
		return "clientAuth"
	case x509.ExtKeyUsageCodeSigning:
		return "codeSigning"
	case x509.ExtKeyUsageEmailProtection:
		return "emailProtection"
	case x509.ExtKeyUsageTimeStamping:
		return "timeStamping"
	case x509.ExtKeyUsageOCSPSigning:
		return "OCSPSigning"
	default:
		return fmt.Sprintf("usage %d", int(u))
	}
}

func ekuList(c *x509.Certificate) string {
	var names []string
	for _, u := range c.ExtKeyUsage {
		names = append(names, ekuName(u))
	}
	for _, oid := range c.UnknownExtKeyUsage {
		names = append(names, oid.String())
	}
	return strings.Join(names, ", ")
}

func clamp(t, lo, hi time.Time) time.Time {
	if t.Before(lo) {
		return lo
	}
	if t.After(hi) {
		return hi
	}
	return t
}

// Verify reports whether leaf chains to one of roots for usage at now: the agent's check of the
// files it is about to hand to etcd, and of what it reads back.
func Verify(leaf *x509.Certificate, roots []*x509.Certificate, usage Usage, now time.Time) error {
	return VerifyChain(leaf, nil, roots, usage, now)
}

// VerifyChain is Verify for a leaf that needs intermediates (a user-provided tls.crt; see
// KeyPair.Intermediates). Each usage is verified on its own (see Usage). A zero now means the
// wall clock, as in x509.
func VerifyChain(leaf *x509.Certificate, intermediates, roots []*x509.Certificate, usage Usage, now time.Time) error {
	if leaf == nil {
		return errors.New("pki: no certificate to verify")
	}
	if len(roots) == 0 {
		return errors.New("pki: no trusted CA to verify against")
	}
	opts := x509.VerifyOptions{Roots: Pool(roots...), Intermediates: Pool(intermediates...), CurrentTime: now}
	for _, eku := range usage.extKeyUsages() {
		opts.KeyUsages = []x509.ExtKeyUsage{eku}
		if _, err := leaf.Verify(opts); err != nil {
			return fmt.Errorf("pki: %q for %s: %w", leaf.Subject.String(), ekuName(eku), err)
		}
	}
	return nil
}
