package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/internal/testsupport"
)

// t0 is the tests' clock; with a nanosecond part, to see that certificate times are truncated to
// seconds the way a reader of the PEM sees them.
var t0 = time.Date(2026, 1, 1, 12, 0, 0, 500, time.UTC)

const day = 24 * time.Hour

func mustCA(t *testing.T, cn string, now time.Time, lifetime time.Duration) KeyPair {
	t.Helper()
	ca, err := NewCA(cn, now, lifetime)
	require.NoError(t, err)
	return ca
}

func mustIssue(t *testing.T, ca KeyPair, req LeafRequest, now time.Time) KeyPair {
	t.Helper()
	kp, err := Issue(ca, req, now)
	require.NoError(t, err)
	return kp
}

func peerRequest(lifetime time.Duration) LeafRequest {
	return LeafRequest{
		CommonName: "a-0",
		DNSNames:   []string{"a-0.a-peer.ns.svc", "*.a-peer.ns.svc.cluster.local", "localhost"},
		IPs:        []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		Server:     true, Client: true,
		Lifetime: lifetime,
	}
}

func TestNewCA(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cn       string
		lifetime time.Duration
		wantErr  string
	}{
		{name: "five years", cn: "etcd-a-ca", lifetime: 5 * 365 * day},
		{name: "one hour", cn: "x", lifetime: time.Hour},
		{name: "zero lifetime", cn: "x", lifetime: 0, wantErr: "not positive"},
		{name: "negative lifetime", cn: "x", lifetime: -time.Hour, wantErr: "not positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca, err := NewCA(tc.cn, t0, tc.lifetime)
			if testsupport.FailedAsWanted(t, err, tc.wantErr) {
				return
			}
			c := ca.Cert
			assert.True(t, c.IsCA)
			assert.True(t, c.BasicConstraintsValid)
			assert.Equal(t, 0, c.MaxPathLen)
			assert.True(t, c.MaxPathLenZero, "no intermediates below the built-in CA")
			assert.Equal(t, x509.KeyUsageCertSign|x509.KeyUsageCRLSign|x509.KeyUsageDigitalSignature, c.KeyUsage)
			assert.Equal(t, tc.cn, c.Subject.CommonName)
			assert.Equal(t, []string{"etcdhook"}, c.Subject.Organization)
			assert.Equal(t, t0.Add(-5*time.Minute).Truncate(time.Second), c.NotBefore)
			assert.Equal(t, t0.Add(tc.lifetime).Truncate(time.Second), c.NotAfter)
			assert.Equal(t, 1, c.SerialNumber.Sign())
			assert.LessOrEqual(t, c.SerialNumber.BitLen(), 128)
			assert.NotEmpty(t, c.SubjectKeyId, "leaves take their AuthorityKeyId from it")
			require.NoError(t, c.CheckSignatureFrom(c), "self-signed")
			require.IsType(t, &ecdsa.PublicKey{}, c.PublicKey)
			assert.Equal(t, elliptic.P256(), c.PublicKey.(*ecdsa.PublicKey).Curve)
			assert.Empty(t, ca.Intermediates)
			assert.Same(t, ca.Key, ca.Signer)

			// Round trip through PEM.
			assert.Contains(t, string(ca.KeyPEM), "-----BEGIN EC PRIVATE KEY-----")
			back, err := ParseKeyPair(ca.CertPEM, ca.KeyPEM)
			require.NoError(t, err)
			assert.True(t, back.Cert.Equal(ca.Cert))
			assert.True(t, back.Key.Equal(ca.Key))
		})
	}
	a, b := mustCA(t, "x", t0, day), mustCA(t, "x", t0, day)
	assert.NotEqual(t, a.Cert.SerialNumber, b.Cert.SerialNumber, "serials are random")
	assert.False(t, a.Key.Equal(b.Key))
}

func TestIssue(t *testing.T) {
	ca := mustCA(t, "etcd-a-ca", t0, 365*day)
	for _, tc := range []struct {
		name         string
		ca           KeyPair
		req          LeafRequest
		now          time.Time
		wantErr      string
		wantEKU      []x509.ExtKeyUsage
		wantNotAfter time.Time
	}{
		{
			name: "peer: server and client", ca: ca, req: peerRequest(90 * day), now: t0,
			wantEKU:      []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			wantNotAfter: t0.Add(90 * day),
		},
		{
			name: "server only", ca: ca, req: LeafRequest{CommonName: "s", DNSNames: []string{"s"}, Server: true, Lifetime: day}, now: t0,
			wantEKU: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, wantNotAfter: t0.Add(day),
		},
		{
			name: "client only", ca: ca, req: LeafRequest{CommonName: "root", Client: true, Lifetime: day}, now: t0.Add(day),
			wantEKU: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, wantNotAfter: t0.Add(2 * day),
		},
		{
			name: "never outlives its CA", ca: ca, req: peerRequest(90 * day), now: t0.Add(300 * day),
			wantEKU:      []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			wantNotAfter: ca.Cert.NotAfter,
		},
		{name: "neither usage", ca: ca, req: LeafRequest{CommonName: "x", Lifetime: day}, now: t0, wantErr: "server or client"},
		{name: "zero lifetime", ca: ca, req: LeafRequest{Server: true}, now: t0, wantErr: "not positive"},
		{name: "CA expired", ca: ca, req: peerRequest(day), now: ca.Cert.NotAfter, wantErr: "expired at"},
		{name: "no CA", ca: KeyPair{}, req: peerRequest(day), now: t0, wantErr: "no certificate or key"},
		{name: "CA without key", ca: KeyPair{Cert: ca.Cert}, req: peerRequest(day), now: t0, wantErr: "no certificate or key"},
		{
			name: "a leaf is not a CA", ca: mustIssue(t, ca, peerRequest(day), t0), req: peerRequest(day), now: t0,
			wantErr: "is not a CA",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaf, err := Issue(tc.ca, tc.req, tc.now)
			if testsupport.FailedAsWanted(t, err, tc.wantErr) {
				return
			}
			c := leaf.Cert
			assert.False(t, c.IsCA)
			assert.True(t, c.BasicConstraintsValid)
			assert.Equal(t, x509.KeyUsageDigitalSignature, c.KeyUsage)
			assert.Equal(t, tc.wantEKU, c.ExtKeyUsage)
			assert.Equal(t, tc.ca.Cert.SubjectKeyId, c.AuthorityKeyId)
			assert.Equal(t, tc.req.CommonName, c.Subject.CommonName)
			assert.Equal(t, tc.req.DNSNames, nilIfEmpty(c.DNSNames))
			require.Len(t, c.IPAddresses, len(tc.req.IPs))
			for i, ip := range tc.req.IPs {
				assert.True(t, ip.Equal(c.IPAddresses[i]), "IP %d", i)
			}
			assert.Equal(t, tc.now.Add(-5*time.Minute).Truncate(time.Second), c.NotBefore)
			assert.Equal(t, tc.wantNotAfter.Truncate(time.Second), c.NotAfter)
			assert.False(t, c.NotAfter.After(tc.ca.Cert.NotAfter))
			require.NoError(t, c.CheckSignatureFrom(tc.ca.Cert))
			require.IsType(t, &ecdsa.PublicKey{}, c.PublicKey)
			assert.Equal(t, elliptic.P256(), c.PublicKey.(*ecdsa.PublicKey).Curve)
			assert.Empty(t, leaf.Intermediates, "a root's leaves carry no chain")

			// Usages asked verify, usages not asked do not.
			for _, u := range []struct {
				usage Usage
				ok    bool
			}{
				{Usage{Server: true}, tc.req.Server},
				{Usage{Client: true}, tc.req.Client},
				{Usage{Server: true, Client: true}, tc.req.Server && tc.req.Client},
			} {
				err := Verify(c, []*x509.Certificate{tc.ca.Cert}, u.usage, tc.now)
				if u.ok {
					assert.NoError(t, err, "%+v", u.usage)
				} else {
					assert.Error(t, err, "%+v", u.usage)
				}
			}

			back, err := ParseKeyPair(leaf.CertPEM, leaf.KeyPEM)
			require.NoError(t, err)
			assert.True(t, back.Cert.Equal(c))
			assert.True(t, back.Key.Equal(leaf.Key))
			_, err = leaf.TLSCertificate()
			require.NoError(t, err)
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestIssueDedupesNames(t *testing.T) {
	ca := mustCA(t, "ca", t0, day)
	leaf := mustIssue(t, ca, LeafRequest{
		DNSNames: []string{"a", "b", "a"},
		IPs:      []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::ffff:127.0.0.1"), net.ParseIP("::1")},
		Server:   true, Lifetime: time.Hour,
	}, t0)
	assert.Equal(t, []string{"a", "b"}, leaf.Cert.DNSNames)
	assert.Len(t, leaf.Cert.IPAddresses, 2)
}

// An intermediate's leaves carry the intermediate in CertPEM, like cert-manager's tls.crt.
func TestIssueFromIntermediate(t *testing.T) {
	root, err := newCA("root", t0, 10*day, nil, 1)
	require.NoError(t, err)
	inter, err := newCA("inter", t0, 20*day, &root, 0)
	require.NoError(t, err)
	assert.Equal(t, root.Cert.NotAfter, inter.Cert.NotAfter, "an intermediate never outlives its parent either")
	require.Empty(t, inter.Intermediates)

	leaf := mustIssue(t, inter, peerRequest(day), t0)
	require.Len(t, leaf.Intermediates, 1)
	assert.True(t, leaf.Intermediates[0].Equal(inter.Cert))
	certs, err := ParseCertificates(leaf.CertPEM)
	require.NoError(t, err)
	require.Len(t, certs, 2)

	roots := []*x509.Certificate{root.Cert}
	both := Usage{Server: true, Client: true}
	require.NoError(t, VerifyChain(leaf.Cert, leaf.Intermediates, roots, both, t0))
	require.Error(t, Verify(leaf.Cert, roots, both, t0), "needs its intermediate")

	back, err := ParseKeyPair(leaf.CertPEM, leaf.KeyPEM)
	require.NoError(t, err)
	require.Len(t, back.Intermediates, 1)
	assert.True(t, back.Intermediates[0].Equal(inter.Cert))
}

// Renewing with the same key: the old certificate and the new key still make a pair, which is what
// makes a straddled read of the files harmless.
func TestIssueWithKey(t *testing.T) {
	ca := mustCA(t, "ca", t0, 365*day)
	old := mustIssue(t, ca, peerRequest(90*day), t0)
	renewed, err := IssueWithKey(ca, peerRequest(90*day), t0.Add(60*day), old.Key)
	require.NoError(t, err)
	assert.NotEqual(t, old.Cert.SerialNumber, renewed.Cert.SerialNumber)
	assert.True(t, renewed.Key.Equal(old.Key))
	_, err = ParseKeyPair(old.CertPEM, renewed.KeyPEM)
	require.NoError(t, err)
	_, err = ParseKeyPair(renewed.CertPEM, old.KeyPEM)
	require.NoError(t, err)

	_, err = IssueWithKey(ca, peerRequest(day), t0, nil)
	require.ErrorContains(t, err, "no key")
}

// signWith makes a certificate for pub signed by ca, for keys Issue never makes.
func signWith(t *testing.T, ca KeyPair, pub crypto.PublicKey) []byte {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(7),
		Subject:      pkix.Name{CommonName: "user"},
		DNSNames:     []string{"a-0.a-peer.ns.svc"},
		NotBefore:    t0.Add(-time.Hour),
		NotAfter:     t0.Add(day),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, ca.Cert, pub, ca.Key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func pkcs8(t *testing.T, key any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return pemOf("PRIVATE KEY", der)
}

func TestParseKeyPair(t *testing.T) {
	ca := mustCA(t, "ca", t0, 365*day)
	leaf := mustIssue(t, ca, peerRequest(day), t0)
	other := mustIssue(t, ca, peerRequest(day), t0)

	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	rsaCert := signWith(t, ca, rsaKey.Public())
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	edCert := signWith(t, ca, edKey.Public())
	ecParams := pemOf("EC PARAMETERS", []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07})
	encrypted := []byte("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00000000000000000000000000000000\n\nAAAA\n-----END RSA PRIVATE KEY-----\n")

	for _, tc := range []struct {
		name        string
		cert, key   []byte
		wantErr     string
		wantECDSA   bool
		wantIntermd int
	}{
		{name: "SEC 1 EC key", cert: leaf.CertPEM, key: leaf.KeyPEM, wantECDSA: true},
		{name: "PKCS#8 EC key", cert: leaf.CertPEM, key: pkcs8(t, leaf.Key), wantECDSA: true},
		{name: "openssl ecparam -genkey output (EC PARAMETERS first)", cert: leaf.CertPEM, key: append(ecParams, leaf.KeyPEM...), wantECDSA: true},
		{name: "PKCS#1 RSA key", cert: rsaCert, key: pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey))},
		{name: "PKCS#8 RSA key", cert: rsaCert, key: pkcs8(t, rsaKey)},
		{name: "PKCS#8 Ed25519 key", cert: edCert, key: pkcs8(t, edKey)},
		{name: "chain in the certificate", cert: append(append([]byte{}, leaf.CertPEM...), ca.CertPEM...), key: leaf.KeyPEM, wantECDSA: true, wantIntermd: 1},
		{name: "key of another certificate", cert: leaf.CertPEM, key: other.KeyPEM, wantErr: "does not match"},
		{name: "RSA key for an EC certificate", cert: leaf.CertPEM, key: pkcs8(t, rsaKey), wantErr: "does not match"},
		{name: "garbage key", cert: leaf.CertPEM, key: []byte("not a key"), wantErr: "private key: no PEM-encoded private key found"},
		{name: "certificate as key", cert: leaf.CertPEM, key: leaf.CertPEM, wantErr: "found CERTIFICATE"},
		{name: "encrypted key", cert: leaf.CertPEM, key: encrypted, wantErr: "encrypted"},
		{name: "garbage certificate", cert: []byte("hello"), key: leaf.KeyPEM, wantErr: "certificate: no PEM-encoded certificate found"},
		{name: "key as certificate", cert: leaf.KeyPEM, key: leaf.KeyPEM, wantErr: `PEM block 1 is "EC PRIVATE KEY", not CERTIFICATE`},
		{name: "corrupt key DER", cert: leaf.CertPEM, key: pemOf("EC PRIVATE KEY", []byte{1, 2, 3}), wantErr: "is not a PKCS#1, PKCS#8 or SEC 1 private key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kp, err := ParseKeyPair(tc.cert, tc.key)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				// What this refuses, crypto/tls (and so etcd) refuses too, except the cases where
				// this is stricter on purpose (non-certificate blocks in the certificate input).
				if !strings.Contains(tc.name, "as certificate") {
					_, tlsErr := tls.X509KeyPair(tc.cert, tc.key)
					assert.Error(t, tlsErr)
				}
				return
			}
			require.NoError(t, err)
			require.NotNil(t, kp.Signer)
			assert.True(t, keyMatches(kp.Cert, kp.Signer))
			assert.Equal(t, tc.wantECDSA, kp.Key != nil)
			assert.Len(t, kp.Intermediates, tc.wantIntermd)
			_, err = kp.TLSCertificate()
			require.NoError(t, err)
		})
	}
}

func TestParseCertificates(t *testing.T) {
	a, b := mustCA(t, "old", t0, day), mustCA(t, "new", t0, day)
	bundle := append(append([]byte("# old CA\n"), a.CertPEM...), append([]byte("subject=CN=new\n"), b.CertPEM...)...)
	truncated := append(append([]byte{}, a.CertPEM...), b.CertPEM[:len(b.CertPEM)/2]...)
	badDER := pemOf("CERTIFICATE", []byte{0x30, 0x03, 0x01, 0x01, 0xff})

	for _, tc := range []struct {
		name    string
		in      []byte
		wantCNs []string
		wantErr string
	}{
		{name: "two CAs, in order, text between blocks", in: bundle, wantCNs: []string{"old", "new"}},
		{name: "one", in: b.CertPEM, wantCNs: []string{"new"}},
		{name: "empty", in: nil, wantErr: "no PEM-encoded certificate found"},
		{name: "garbage", in: []byte("-----BEGIN nonsense"), wantErr: "1 of 1 PEM blocks are malformed or truncated"},
		{name: "second block cut off", in: truncated, wantErr: "1 of 2 PEM blocks are malformed or truncated"},
		{name: "private key in the bundle", in: append(append([]byte{}, a.CertPEM...), a.KeyPEM...), wantErr: `PEM block 2 is "EC PRIVATE KEY", not CERTIFICATE`},
		{name: "bad DER", in: append(append([]byte{}, a.CertPEM...), badDER...), wantErr: "certificate 2 does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certs, err := ParseCertificates(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				assert.Nil(t, certs)
				return
			}
			require.NoError(t, err)
			var cns []string
			for _, c := range certs {
				cns = append(cns, c.Subject.CommonName)
			}
			assert.Equal(t, tc.wantCNs, cns)
		})
	}
}

func TestRenewAt(t *testing.T) {
	for _, tc := range []struct {
		name                string
		notBefore, notAfter time.Time
		want                time.Time
	}{
		{name: "90 days: renew after 60", notBefore: t0, notAfter: t0.Add(90 * day), want: t0.Add(60 * day)},
		{name: "3 seconds", notBefore: t0, notAfter: t0.Add(3 * time.Second), want: t0.Add(2 * time.Second)},
		{name: "rounds down", notBefore: t0, notAfter: t0.Add(2 * time.Nanosecond), want: t0.Add(time.Nanosecond)},
		{name: "5 years", notBefore: t0, notAfter: t0.Add(3 * 600 * day), want: t0.Add(2 * 600 * day)},
		{name: "inverted", notBefore: t0, notAfter: t0.Add(-day), want: t0},
		{
			name: "no-expiry date 9999-12-31 does not overflow", notBefore: t0,
			notAfter: time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
			want:     t0.Add(time.Duration(1<<63-1) / 3 * 2),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RenewAt(&x509.Certificate{NotBefore: tc.notBefore, NotAfter: tc.notAfter})
			assert.Equal(t, tc.want, got)
		})
	}

	// A real certificate: 2/3 of the way from its NotBefore (now-5m) to its NotAfter.
	ca := mustCA(t, "ca", t0, 365*day)
	leaf := mustIssue(t, ca, peerRequest(90*day), t0)
	nb := t0.Add(-5 * time.Minute).Truncate(time.Second)
	assert.Equal(t, nb.Add((90*day+5*time.Minute)*2/3), RenewAt(leaf.Cert))
}

func TestFingerprint(t *testing.T) {
	a, b := mustCA(t, "a", t0, day), mustCA(t, "a", t0, day)
	fa := Fingerprint(a.Cert)
	assert.Regexp(t, `^[0-9a-f]{64}$`, fa)
	assert.Equal(t, fa, Fingerprint(a.Cert))
	assert.NotEqual(t, fa, Fingerprint(b.Cert))
	assert.Equal(t, fa[:16], Short(a.Cert))

	// Known value: a fixed DER (not a valid certificate; Fingerprint only hashes Raw).
	c := &x509.Certificate{Raw: []byte("abc")}
	assert.Equal(t, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", Fingerprint(c))
}

func TestEncodeBundle(t *testing.T) {
	a, b, c := mustCA(t, "a", t0, day), mustCA(t, "b", t0, day), mustCA(t, "c", t0, day)
	aAgain, err := ParseCertificates(a.CertPEM) // another *Certificate with the same DER
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		in   []*x509.Certificate
		want []string
	}{
		{name: "old then new", in: []*x509.Certificate{a.Cert, b.Cert}, want: []string{"a", "b"}},
		{name: "order kept", in: []*x509.Certificate{b.Cert, a.Cert, c.Cert}, want: []string{"b", "a", "c"}},
		{name: "repeats dropped, first place kept", in: []*x509.Certificate{b.Cert, a.Cert, b.Cert, aAgain[0]}, want: []string{"b", "a"}},
		{name: "nils skipped", in: []*x509.Certificate{nil, a.Cert, nil}, want: []string{"a"}},
		{name: "nothing", in: nil, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := EncodeBundle(tc.in...)
			if tc.want == nil {
				assert.Empty(t, out)
				return
			}
			certs, err := ParseCertificates(out)
			require.NoError(t, err)
			var cns []string
			for _, c := range certs {
				cns = append(cns, c.Subject.CommonName)
			}
			assert.Equal(t, tc.want, cns)
		})
	}
	assert.Equal(t, a.CertPEM, EncodeBundle(a.Cert), "the same PEM as a KeyPair's")
}

// A CA made for a rotation says which request it was made for and which it carries over.
func TestRotatedCA(t *testing.T) {
	now := time.Now()
	ca, err := NewRotatedCA("x-ca", now, time.Hour, "0123456789", "abcdef0123")
	require.NoError(t, err)
	require.True(t, ca.Cert.IsCA)
	require.Equal(t, "0123456789", RotationOf(ca.Cert))
	require.Equal(t, "abcdef0123", CarriedOf(ca.Cert))
	plain, err := NewRotatedCA("x-ca", now, time.Hour, "", "")
	require.NoError(t, err)
	require.Empty(t, RotationOf(plain.Cert))
	require.Empty(t, CarriedOf(plain.Cert))
}
