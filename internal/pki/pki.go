// Package pki is the one place etcdhook makes and checks certificates: the built-in CA and the
// member, peer and client certificates it signs (NewCA, Issue), the parsing of what users and
// cert-manager put into Secrets (ParseKeyPair, ParseCertificates), the validation that turns a bad
// Secret into a precise CertificatesInvalid message (CheckSecret, Verify), the renewal schedule
// (RenewAt), trust bundles for CA rotation (EncodeBundle) and the atomic hand-over of certificate
// files to etcd (WriteFiles, ReadFiles).
//
// Everything here is the standard library (crypto/x509, crypto/ecdsa, crypto/tls, encoding/pem): no
// hand-written ASN.1 and no third-party crypto, so what this package accepts is exactly what etcd,
// itself a Go program using crypto/tls, accepts. Times are always passed in (now) rather than read
// from the clock, so callers can keep their decisions pure functions of (input, time) and tests can
// be exact; only key generation reads crypto/rand.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// Secret layout of cert-manager's kubernetes.io/tls Secrets, which etcdhook also uses for the
// Secrets it makes, so a cert-manager Certificate can stand in for a built-in one unchanged.
const (
	KeyCert = "tls.crt"
	KeyKey  = "tls.key"
	KeyCA   = "ca.crt"
)

// Organization is the subject O of every CA etcdhook makes, so a CA found in a Secret can be
// recognised as ours by a human reading `openssl x509 -text`.
const Organization = "etcdhook"

// ClockSkew is how far NotBefore is set before now: nodes' clocks differ by seconds, and a
// certificate issued by a replica whose clock runs ahead must not be "not yet valid" on a member
// whose clock runs behind.
const ClockSkew = 5 * time.Minute

// KeyPair is a certificate with its private key, in PEM and parsed.
type KeyPair struct {
	// CertPEM is the certificate, followed by any intermediates up to (not including) the root.
	CertPEM []byte
	// KeyPEM is the private key: "EC PRIVATE KEY" (SEC 1) for keys made here; for parsed pairs,
	// whatever the input was.
	KeyPEM []byte
	// Cert is the first certificate of CertPEM.
	Cert *x509.Certificate
	// Intermediates are the certificates after the first in CertPEM, in order.
	Intermediates []*x509.Certificate
	// Key is the private key when it is ECDSA (always for pairs made here); nil for RSA and Ed25519
	// keys of user-provided Secrets.
	Key *ecdsa.PrivateKey
	// Signer is the private key whatever its type; never nil in a valid KeyPair.
	Signer crypto.Signer
}

// TLSCertificate is the pair as crypto/tls wants it (for a tls.Config's Certificates or
// GetClientCertificate).
func (kp KeyPair) TLSCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
}

func (kp KeyPair) signer() crypto.Signer {
	if kp.Signer != nil {
		return kp.Signer
	}
	if kp.Key != nil {
		return kp.Key
	}
	return nil
}

// NewCA makes a self-signed ECDSA P-256 CA valid from now-ClockSkew for lifetime, with a random
// 128-bit serial, subject CN=commonName, O=etcdhook. It may sign leaves only (MaxPathLenZero): the
// built-in CA never needs intermediates, and a stolen leaf key then cannot be turned into a CA.
func NewCA(commonName string, now time.Time, lifetime time.Duration) (KeyPair, error) {
	return newCA(commonName, now, lifetime, nil, 0)
}

// NewRotatedCA is NewCA for a CA rotation: the subject's organizational unit says "rotation <mark>"
// (RotationOf reads it back), so every agent can tell which request a CA was made for.
// carry, when set, is written as "carries <mark>" (CarriedOf).
func NewRotatedCA(commonName string, now time.Time, lifetime time.Duration, mark, carry string) (KeyPair, error) {
	if mark == "" {
		return NewCA(commonName, now, lifetime)
	}
	units := []string{rotationPrefix + mark}
	if carry != "" {
		units = append(units, carryPrefix+carry)
	}
	return newCAWith(commonName, now, lifetime, nil, 0, units)
}

// rotationPrefix marks the organizational unit of a CA made for a rotation request; carryPrefix one
// that names a request the CA it replaced had served.
const (
	rotationPrefix = "rotation "
	carryPrefix    = "carries "
)

// CarriedOf is the request mark a CA carries over from the CA it replaced ("" when none).
func CarriedOf(cert *x509.Certificate) string { return unitMark(cert, carryPrefix) }

// RotationOf is the rotation mark a CA was made for ("" when none).
func RotationOf(cert *x509.Certificate) string { return unitMark(cert, rotationPrefix) }

// unitMark is what follows prefix in the first organizational unit of cert's subject that has it.
func unitMark(cert *x509.Certificate, prefix string) string {
	if cert == nil {
		return ""
	}
	for _, ou := range cert.Subject.OrganizationalUnit {
		if mark, ok := strings.CutPrefix(ou, prefix); ok {
			return mark
		}
	}
	return ""
}

// newCA makes a CA signed by parent (self-signed when parent is nil) that allows maxPathLen
// intermediates below it. Only tests make intermediates (to check user-provided chains), so this
// stays unexported.
func newCA(commonName string, now time.Time, lifetime time.Duration, parent *KeyPair, maxPathLen int) (KeyPair, error) {
	return newCAWith(commonName, now, lifetime, parent, maxPathLen, nil)
}

func newCAWith(commonName string, now time.Time, lifetime time.Duration, parent *KeyPair, maxPathLen int, units []string) (KeyPair, error) {
	if lifetime <= 0 {
		return KeyPair{}, fmt.Errorf("pki: CA lifetime %v is not positive", lifetime)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("pki: generating CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return KeyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{Organization}, OrganizationalUnit: units},
		NotBefore:             now.Add(-ClockSkew),
		NotAfter:              now.Add(lifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLen:            maxPathLen,
		MaxPathLenZero:        maxPathLen == 0,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		// SubjectKeyId is left empty: crypto/x509 derives it from the public key for CAs, and
		// copies it into the AuthorityKeyId of everything this CA signs.
	}
	issuer, signer := tmpl, crypto.Signer(key)
	var chain []*x509.Certificate
	if parent != nil {
		if parent.Cert == nil || parent.signer() == nil {
			return KeyPair{}, errors.New("pki: parent CA has no certificate or key")
		}
		if parent.Cert.NotAfter.Before(tmpl.NotAfter) {
			tmpl.NotAfter = parent.Cert.NotAfter
		}
		issuer, signer = parent.Cert, parent.signer()
		chain = chainAbove(*parent)
	}
	return create(tmpl, issuer, signer, key, chain)
}

// LeafRequest is what a leaf certificate is for.
type LeafRequest struct {
	// CommonName is the subject CN; etcd takes a client certificate's CN as the user name when
	// authentication is on.
	CommonName string
	// DNSNames and IPs are the subject alternative names; clients match only these (never the CN).
	DNSNames []string
	IPs      []net.IP
	// Server and Client select the extended key usages serverAuth and clientAuth. etcd members need
	// both on the peer plane: each member dials the others and is dialled by them.
	Server, Client bool
	// Lifetime is how long the certificate is valid after now; the CA's own expiry caps it.
	Lifetime time.Duration
	// Renewal, when set, is written into the subject's organizational unit as "renewal <mark>": the
	// certificate was issued for that renewal request (RenewalOf reads it back).
	Renewal string
}

// renewalPrefix marks the organizational unit that carries a renewal mark.
const renewalPrefix = "renewal "

// RenewalOf is the renewal mark a leaf was issued for ("" when none).
func RenewalOf(cert *x509.Certificate) string { return unitMark(cert, renewalPrefix) }

func subject(req LeafRequest) pkix.Name {
	n := pkix.Name{CommonName: req.CommonName}
	if req.Renewal != "" {
		n.OrganizationalUnit = []string{renewalPrefix + req.Renewal}
	}
	return n
}

// Issue signs a new ECDSA P-256 leaf with ca: extended key usages serverAuth and/or clientAuth
// as asked, key usage DigitalSignature (the only one an ECDSA TLS key needs), AuthorityKeyId from
// the CA, NotBefore now-ClockSkew, NotAfter min(now+Lifetime, ca's NotAfter): a leaf never outlives
// its CA, so renewing the CA is always what renews the last leaf it signed. When ca is itself an
// intermediate, the leaf's CertPEM carries ca and the chain above it (not the root), as
// cert-manager's tls.crt does.
func Issue(ca KeyPair, req LeafRequest, now time.Time) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("pki: generating key: %w", err)
	}
	return IssueWithKey(ca, req, now, key)
}

// IssueWithKey is Issue for an existing key. Renewing a leaf with the key it already has makes the
// file hand-over to etcd free of any window: etcd reads the certificate file and then the key file
// on each handshake, and a read that straddles a rotation pairs the old certificate with the new
// key; with the same key on both sides that pair still matches. The price is that the key is not
// rotated with the certificate: after a suspected leak of a member key the member must restart too
// (a new pod makes a new key); etcd.io/renew-certificates renews certificates, not member keys.
func IssueWithKey(ca KeyPair, req LeafRequest, now time.Time, key *ecdsa.PrivateKey) (KeyPair, error) {
	if ca.Cert == nil || ca.signer() == nil {
		return KeyPair{}, errors.New("pki: CA has no certificate or key")
	}
	if !ca.Cert.IsCA {
		return KeyPair{}, fmt.Errorf("pki: %q is not a CA", ca.Cert.Subject.String())
	}
	if key == nil {
		return KeyPair{}, errors.New("pki: no key")
	}
	if !req.Server && !req.Client {
		return KeyPair{}, errors.New("pki: a leaf must be for server or client authentication, or both")
	}
	if req.Lifetime <= 0 {
		return KeyPair{}, fmt.Errorf("pki: lifetime %v is not positive", req.Lifetime)
	}
	if !now.Before(ca.Cert.NotAfter) {
		return KeyPair{}, fmt.Errorf("pki: CA %q expired at %s", ca.Cert.Subject.String(), formatTime(ca.Cert.NotAfter))
	}
	serial, err := randomSerial()
	if err != nil {
		return KeyPair{}, err
	}
	notAfter := now.Add(req.Lifetime)
	if ca.Cert.NotAfter.Before(notAfter) {
		notAfter = ca.Cert.NotAfter
	}
	var eku []x509.ExtKeyUsage
	if req.Server {
		eku = append(eku, x509.ExtKeyUsageServerAuth)
	}
	if req.Client {
		eku = append(eku, x509.ExtKeyUsageClientAuth)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               subject(req),
		DNSNames:              dedupeStrings(req.DNSNames),
		IPAddresses:           dedupeIPs(req.IPs),
		NotBefore:             now.Add(-ClockSkew),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           eku,
		BasicConstraintsValid: true, // and IsCA false: a leaf says outright that it cannot sign
		AuthorityKeyId:        ca.Cert.SubjectKeyId,
	}
	return create(tmpl, ca.Cert, ca.signer(), key, chainAbove(ca))
}

// chainAbove is what a certificate signed by ca must carry after itself: ca and its own
// intermediates, unless ca is a self-signed root (roots come from the trust bundle, not tls.crt).
func chainAbove(ca KeyPair) []*x509.Certificate {
	if bytes.Equal(ca.Cert.RawIssuer, ca.Cert.RawSubject) && ca.Cert.CheckSignatureFrom(ca.Cert) == nil {
		return nil
	}
	return append([]*x509.Certificate{ca.Cert}, ca.Intermediates...)
}

// create signs tmpl with issuer/signer for key and returns the pair, the parsed certificate being
// re-read from its DER so it is exactly what a reader of CertPEM sees (e.g. times truncated to
// seconds).
func create(tmpl, issuer *x509.Certificate, signer crypto.Signer, key *ecdsa.PrivateKey, chain []*x509.Certificate) (KeyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, key.Public(), signer)
	if err != nil {
		return KeyPair{}, fmt.Errorf("pki: signing %q: %w", tmpl.Subject.String(), err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return KeyPair{}, fmt.Errorf("pki: parsing what was just signed: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("pki: encoding key: %w", err)
	}
	all := append([]*x509.Certificate{cert}, chain...)
	return KeyPair{
		CertPEM:       EncodeBundle(all...),
		KeyPEM:        pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		Cert:          cert,
		Intermediates: chain,
		Key:           key,
		Signer:        key,
	}, nil
}

// serialLimit is 2^128: serials are 128 random bits (RFC 5280 allows up to 20 octets and asks for
// unpredictable ones; CAs that reuse a serial produce certificates clients may confuse).
var serialLimit = new(big.Int).Lsh(big.NewInt(1), 128)

func randomSerial() (*big.Int, error) {
	for {
		n, err := rand.Int(rand.Reader, serialLimit)
		if err != nil {
			return nil, fmt.Errorf("pki: generating serial: %w", err)
		}
		if n.Sign() > 0 { // serials must be positive; zero comes up once in 2^128
			return n, nil
		}
	}
}

// ParseKeyPair parses a PEM certificate (the first CERTIFICATE block is the leaf, further blocks
// are its intermediates) and a PEM private key (SEC 1 "EC PRIVATE KEY", PKCS#1 "RSA PRIVATE KEY" or
// PKCS#8 "PRIVATE KEY" holding ECDSA, RSA or Ed25519, the forms crypto/tls accepts), and checks
// that the key belongs to the certificate. The pair is also handed to tls.X509KeyPair, so what
// passes here is what etcd will load.
func ParseKeyPair(certPEM, keyPEM []byte) (KeyPair, error) {
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return KeyPair{}, fmt.Errorf("pki: certificate: %w", err)
	}
	signer, err := parsePrivateKey(keyPEM)
	if err != nil {
		return KeyPair{}, fmt.Errorf("pki: private key: %w", err)
	}
	if !keyMatches(certs[0], signer) {
		return KeyPair{}, ErrKeyMismatch
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return KeyPair{}, fmt.Errorf("pki: crypto/tls rejects the pair: %w", err)
	}
	kp := KeyPair{
		CertPEM:       bytes.Clone(certPEM),
		KeyPEM:        bytes.Clone(keyPEM),
		Cert:          certs[0],
		Intermediates: certs[1:],
		Signer:        signer,
	}
	if ec, ok := signer.(*ecdsa.PrivateKey); ok {
		kp.Key = ec
	}
	return kp, nil
}

// ErrKeyMismatch is returned by ParseKeyPair when the key does not belong to the certificate.
var ErrKeyMismatch = errors.New("pki: private key does not match the certificate's public key")

// ParseCertificates parses every CERTIFICATE block of a PEM bundle, in order: a trust bundle holds
// the old and the new CA during a rotation, a tls.crt its leaf and intermediates. It fails if there
// is none, if a block does not parse, if a block is of another type (a private key pasted into
// ca.crt would be shipped to every client; crypto/tls would silently skip it, this refuses it), or
// if a block is cut off (a half-copied bundle must not pass as its first half).
func ParseCertificates(pemBytes []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	blocks := 0
	for rest := pemBytes; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		blocks++
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is %q, not CERTIFICATE", blocks, block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d does not parse: %w", blocks, err)
		}
		certs = append(certs, c)
	}
	// pem.Decode skips what it cannot read, including a block missing its END line; counting BEGIN
	// lines catches those.
	if begins := bytes.Count(pemBytes, []byte("-----BEGIN ")); begins > blocks {
		return nil, fmt.Errorf("%d of %d PEM blocks are malformed or truncated", begins-blocks, begins)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM-encoded certificate found")
	}
	return certs, nil
}

// parsePrivateKey reads the first "... PRIVATE KEY" block as crypto/tls does (skipping others such
// as openssl's "EC PARAMETERS") and tries PKCS#1, PKCS#8 and SEC 1 in crypto/tls's order.
func parsePrivateKey(keyPEM []byte) (crypto.Signer, error) {
	var block *pem.Block
	var skipped []string
	for rest := keyPEM; ; {
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type == "PRIVATE KEY" || strings.HasSuffix(block.Type, " PRIVATE KEY") {
			break
		}
		skipped = append(skipped, block.Type)
	}
	if block == nil {
		if len(skipped) > 0 {
			return nil, fmt.Errorf("no PEM-encoded private key found (found %s)", strings.Join(skipped, ", "))
		}
		if bytes.Contains(keyPEM, []byte("-----BEGIN ")) {
			return nil, errors.New("PEM block is malformed or truncated")
		}
		return nil, errors.New("no PEM-encoded private key found")
	}
	if block.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(block.Headers["Proc-Type"], "ENCRYPTED") {
		return nil, errors.New("is encrypted; etcd needs an unencrypted key")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		switch k := k.(type) {
		case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
			return k.(crypto.Signer), nil
		default:
			return nil, fmt.Errorf("PKCS#8 key of type %T cannot sign TLS handshakes", k)
		}
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	return nil, fmt.Errorf("%q block is not a PKCS#1, PKCS#8 or SEC 1 private key", block.Type)
}

// keyMatches reports whether signer is the private half of cert's public key.
func keyMatches(cert *x509.Certificate, signer crypto.Signer) bool {
	pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(signer.Public())
}

// RenewAt is when a certificate should be replaced: two thirds into its validity, which leaves a
// third of the lifetime (30 days of a 90-day leaf) to notice and fix a renewal that fails.
func RenewAt(c *x509.Certificate) time.Time {
	d := c.NotAfter.Sub(c.NotBefore) // saturates for far-future NotAfter, which only moves RenewAt earlier
	if d <= 0 {
		return c.NotBefore
	}
	return c.NotBefore.Add(d/3*2 + d%3*2/3) // 2*d/3 without overflowing d*2
}

// Fingerprint is the SHA-256 of the certificate's DER, lowercase hex: what `openssl x509
// -fingerprint -sha256` prints, without the colons.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// Short is the first 16 hex characters of the fingerprint, for status and logs, where the full 64
// would drown the message; 64 bits are plenty to tell a cluster's few certificates apart.
func Short(c *x509.Certificate) string {
	return Fingerprint(c)[:16]
}

// EncodeBundle concatenates certificates as PEM, in order, dropping repeats (by fingerprint) and
// nils: a trust bundle during a CA rotation is old + new CA, and building it from a bundle that
// already holds the new CA must not grow it.
func EncodeBundle(certs ...*x509.Certificate) []byte {
	var buf bytes.Buffer
	seen := make(map[[sha256.Size]byte]bool, len(certs))
	for _, c := range certs {
		if c == nil {
			continue
		}
		sum := sha256.Sum256(c.Raw)
		if seen[sum] {
			continue
		}
		seen[sum] = true
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}) // writing to a bytes.Buffer does not fail
	}
	return buf.Bytes()
}

// Pool is a CertPool of certs (nils skipped).
func Pool(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		if c != nil {
			p.AddCert(c)
		}
	}
	return p
}

func dedupeStrings(in []string) []string {
	var out []string
	seen := make(map[string]bool, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func dedupeIPs(in []net.IP) []net.IP {
	var out []net.IP
	for _, ip := range in {
		dup := false
		for _, o := range out {
			if o.Equal(ip) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, ip)
		}
	}
	return out
}

// formatTime is how times appear in problems: RFC 3339 in UTC, as kubectl shows status times.
func formatTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339)
}
