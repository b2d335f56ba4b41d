package pki

import (
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func secret(leaf, ca KeyPair) map[string][]byte {
	return map[string][]byte{KeyCert: leaf.CertPEM, KeyKey: leaf.KeyPEM, KeyCA: ca.CertPEM}
}

func with(data map[string][]byte, key string, value []byte) map[string][]byte {
	out := make(map[string][]byte, len(data))
	for k, v := range data {
		out[k] = v
	}
	if value == nil {
		delete(out, key)
	} else {
		out[key] = value
	}
	return out
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestCheckSecret(t *testing.T) {
	peer := Usage{Server: true, Client: true}
	ca := mustCA(t, "etcd-a-ca", t0, 365*day)
	other := mustCA(t, "other-ca", t0, 365*day)
	sameName := mustCA(t, "etcd-a-ca", t0, 365*day) // a rotated CA: same name, new key
	leaf := mustIssue(t, ca, peerRequest(90*day), t0)
	leaf2 := mustIssue(t, ca, peerRequest(90*day), t0)
	good := secret(leaf, ca)
	serverOnly := mustIssue(t, ca, LeafRequest{DNSNames: []string{"a-0.a-peer.ns.svc"}, Server: true, Lifetime: day}, t0)
	clientOnly := mustIssue(t, ca, LeafRequest{CommonName: "root", Client: true, Lifetime: day}, t0)
	later := mustIssue(t, ca, peerRequest(90*day), t0.Add(time.Hour)) // NotBefore after the CA's
	ipAsDNS := mustIssue(t, ca, LeafRequest{DNSNames: []string{"10.0.0.2"}, Server: true, Lifetime: day}, t0)

	shortCA := mustCA(t, "short-ca", t0, time.Hour)
	shortLeaf := mustIssue(t, shortCA, peerRequest(90*day), t0) // capped at the CA's NotAfter

	// A user's chain: root -> intermediate -> leaf.
	root, err := newCA("user-root", t0, 365*day, nil, 1)
	require.NoError(t, err)
	inter, err := newCA("user-inter", t0, 365*day, &root, 0)
	require.NoError(t, err)
	userLeaf := mustIssue(t, inter, peerRequest(90*day), t0)
	shortInter, err := newCA("short-inter", t0, time.Hour, &root, 0)
	require.NoError(t, err)
	shortInterLeaf := mustIssue(t, shortInter, peerRequest(90*day), t0)
	// The built-in CA allows no intermediates (MaxPathLenZero).
	strictInter, err := newCA("inter-under-builtin", t0, 365*day, &ca, 0)
	require.NoError(t, err)
	strictLeaf := mustIssue(t, strictInter, peerRequest(day), t0)

	// A certificate with the CA's name and key that is not a CA.
	notCADER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: ca.Cert.Subject, NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(day),
		BasicConstraintsValid: true, IsCA: false,
	}, &x509.Certificate{Subject: ca.Cert.Subject}, ca.Key.Public(), ca.Key)
	require.NoError(t, err)

	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	names := []string{"a-0.a-peer.ns.svc", "a-0.a-peer.ns.svc.cluster.local", "localhost", "127.0.0.1"}

	for _, tc := range []struct {
		name     string
		data     map[string][]byte
		names    []string
		usage    Usage
		now      time.Time
		want     []string
		wantLeaf *x509.Certificate
	}{
		{name: "good", data: good, names: names, usage: peer, now: t0.Add(day), wantLeaf: leaf.Cert},
		{name: "good in its first second", data: good, names: names, usage: peer, now: leaf.Cert.NotBefore, wantLeaf: leaf.Cert},
		{
			name: "nothing", data: map[string][]byte{}, names: names, usage: peer, now: t0,
			want: []string{"tls.crt: missing", "tls.key: missing", "ca.crt: missing"},
		},
		{name: "tls.crt missing", data: with(good, KeyCert, nil), names: names, usage: peer, now: t0, want: []string{"tls.crt: missing"}},
		{name: "tls.key missing", data: with(good, KeyKey, nil), names: names, usage: peer, now: t0, want: []string{"tls.key: missing"}, wantLeaf: leaf.Cert},
		{name: "ca.crt missing", data: with(good, KeyCA, nil), names: names, usage: peer, now: t0, want: []string{"ca.crt: missing"}, wantLeaf: leaf.Cert},
		{name: "tls.key empty", data: with(good, KeyKey, []byte("\n")), names: names, usage: peer, now: t0, want: []string{"tls.key: empty"}, wantLeaf: leaf.Cert},
		{
			name: "garbage everywhere", names: names, usage: peer, now: t0,
			data: map[string][]byte{KeyCert: []byte("garbage"), KeyKey: []byte("garbage"), KeyCA: []byte("garbage")},
			want: []string{
				"tls.crt: no PEM-encoded certificate found",
				"tls.key: no PEM-encoded private key found",
				"ca.crt: no PEM-encoded certificate found",
			},
		},
		{
			name: "tls.crt cut off", data: with(good, KeyCert, leaf.CertPEM[:100]), names: names, usage: peer, now: t0,
			want: []string{"tls.crt: 1 of 1 PEM blocks are malformed or truncated"},
		},
		{
			name: "key and certificate swapped", data: with(with(good, KeyCert, leaf.KeyPEM), KeyKey, leaf.CertPEM), names: names, usage: peer, now: t0,
			want: []string{`tls.crt: PEM block 1 is "EC PRIVATE KEY", not CERTIFICATE`, "tls.key: no PEM-encoded private key found (found CERTIFICATE)"},
		},
		{
			name: "mismatched key", data: with(good, KeyKey, leaf2.KeyPEM), names: names, usage: peer, now: t0,
			want: []string{"tls.key: does not match tls.crt"}, wantLeaf: leaf.Cert,
		},
		{
			name: "expired", data: good, names: names, usage: peer, now: leaf.Cert.NotAfter.Add(time.Second),
			want: []string{"tls.crt: expired at " + at(leaf.Cert.NotAfter)}, wantLeaf: leaf.Cert,
		},
		{
			name: "expired in its last second", data: good, names: names, usage: peer, now: leaf.Cert.NotAfter,
			want: []string{"tls.crt: expired at " + at(leaf.Cert.NotAfter)}, wantLeaf: leaf.Cert,
		},
		{
			name: "not yet valid", data: secret(later, ca), names: names, usage: peer, now: later.Cert.NotBefore.Add(-time.Second),
			want: []string{"tls.crt: not yet valid (valid from " + at(later.Cert.NotBefore) + ")"}, wantLeaf: later.Cert,
		},
		{
			name: "expired together with its CA", data: secret(shortLeaf, shortCA), names: names, usage: peer, now: t0.Add(2 * time.Hour),
			want: []string{
				"tls.crt: expired at " + at(shortLeaf.Cert.NotAfter),
				`ca.crt: CA "CN=short-ca,O=etcdhook" expired at ` + at(shortCA.Cert.NotAfter),
			},
			wantLeaf: shortLeaf.Cert,
		},
		{
			name: "wrong CA", data: with(good, KeyCA, other.CertPEM), names: names, usage: peer, now: t0,
			want:     []string{`ca.crt: did not sign tls.crt (issued by "CN=etcd-a-ca,O=etcdhook"; ca.crt holds "CN=other-ca,O=etcdhook")`},
			wantLeaf: leaf.Cert,
		},
		{
			name: "wrong CA among many", data: with(good, KeyCA, cat(other.CertPEM, shortCA.CertPEM, root.CertPEM, inter.CertPEM, sameName.CertPEM)), names: names, usage: peer, now: t0,
			want:     []string{`ca.crt: did not sign tls.crt (issued by "CN=etcd-a-ca,O=etcdhook"; ca.crt holds a CA named "CN=etcd-a-ca,O=etcdhook" but with a different key)`},
			wantLeaf: leaf.Cert,
		},
		{
			name: "wrong CAs, first few listed", data: with(good, KeyCA, cat(other.CertPEM, shortCA.CertPEM, root.CertPEM, inter.CertPEM)), names: names, usage: peer, now: t0,
			want:     []string{`ca.crt: did not sign tls.crt (issued by "CN=etcd-a-ca,O=etcdhook"; ca.crt holds "CN=other-ca,O=etcdhook", "CN=short-ca,O=etcdhook", "CN=user-root,O=etcdhook", and 1 more)`},
			wantLeaf: leaf.Cert,
		},
		{
			name: "CA of the same name with another key", data: with(good, KeyCA, sameName.CertPEM), names: names, usage: peer, now: t0,
			want:     []string{`ca.crt: did not sign tls.crt (issued by "CN=etcd-a-ca,O=etcdhook"; ca.crt holds a CA named "CN=etcd-a-ca,O=etcdhook" but with a different key)`},
			wantLeaf: leaf.Cert,
		},
		{
			name: "ca.crt holds the right key in a certificate that is not a CA", data: with(good, KeyCA, pemOf("CERTIFICATE", notCADER)), names: names, usage: peer, now: t0,
			want:     []string{`ca.crt: did not sign tls.crt (issued by "CN=etcd-a-ca,O=etcdhook"; "CN=etcd-a-ca,O=etcdhook" in ca.crt is not a CA allowed to sign certificates)`},
			wantLeaf: leaf.Cert,
		},
		{name: "trust bundle, old CA first", data: with(good, KeyCA, cat(sameName.CertPEM, ca.CertPEM)), names: names, usage: peer, now: t0, wantLeaf: leaf.Cert},
		{name: "trust bundle, new CA first", data: with(good, KeyCA, cat(ca.CertPEM, sameName.CertPEM)), names: names, usage: peer, now: t0, wantLeaf: leaf.Cert},
		{
			name: "trust bundle with an expired old CA", data: with(secret(leaf, ca), KeyCA, cat(shortCA.CertPEM, ca.CertPEM)), names: names, usage: peer, now: t0.Add(2 * time.Hour),
			wantLeaf: leaf.Cert,
		},
		{
			name: "server certificate used as a peer certificate", data: secret(serverOnly, ca), names: []string{"a-0.a-peer.ns.svc"}, usage: peer, now: t0,
			want: []string{"tls.crt: has no clientAuth extended key usage (has serverAuth)"}, wantLeaf: serverOnly.Cert,
		},
		{name: "server certificate as a server", data: secret(serverOnly, ca), names: []string{"a-0.a-peer.ns.svc"}, usage: Usage{Server: true}, now: t0, wantLeaf: serverOnly.Cert},
		{name: "chain only, any usage", data: secret(serverOnly, ca), usage: Usage{}, now: t0, wantLeaf: serverOnly.Cert},
		{
			name: "client certificate as a server", data: secret(clientOnly, ca), usage: Usage{Server: true}, now: t0,
			want: []string{"tls.crt: has no serverAuth extended key usage (has clientAuth)"}, wantLeaf: clientOnly.Cert,
		},
		{name: "client certificate as a client, no names", data: secret(clientOnly, ca), usage: Usage{Client: true}, now: t0, wantLeaf: clientOnly.Cert},
		{
			name: "a member's name not covered", data: good, usage: peer, now: t0,
			names:    []string{"a-0.a-peer.ns.svc", "a-2.a-peer.ns.svc"},
			want:     []string{`tls.crt: does not cover "a-2.a-peer.ns.svc"`},
			wantLeaf: leaf.Cert,
		},
		{
			name: "wildcard covers exactly one label", data: good, usage: peer, now: t0,
			names: []string{
				"a-7.a-peer.ns.svc.cluster.local",    // covered by *.a-peer.ns.svc.cluster.local
				"A-8.A-PEER.ns.svc.cluster.local",    // names are case-insensitive
				"x.a-7.a-peer.ns.svc.cluster.local",  // two labels
				"a-peer.ns.svc.cluster.local",        // zero labels
				"a-7.a-peer.other.svc.cluster.local", // another namespace
			},
			want:     []string{`tls.crt: does not cover "x.a-7.a-peer.ns.svc.cluster.local", "a-peer.ns.svc.cluster.local", "a-7.a-peer.other.svc.cluster.local"`},
			wantLeaf: leaf.Cert,
		},
		{
			name: "IP SANs compared as IPs", data: good, usage: peer, now: t0,
			names:    []string{"127.0.0.1", "::1", "0:0:0:0:0:0:0:1", "10.0.0.1", "127.0.0.1", "[::1]"},
			want:     []string{`tls.crt: does not cover "10.0.0.1"`},
			wantLeaf: leaf.Cert,
		},
		{
			name: "an IP in a DNS SAN does not count", data: secret(ipAsDNS, ca), usage: Usage{Server: true}, now: t0,
			names: []string{"10.0.0.2"}, want: []string{`tls.crt: does not cover "10.0.0.2"`}, wantLeaf: ipAsDNS.Cert,
		},
		{
			name: "many names missing: first three listed", data: good, usage: peer, now: t0,
			names:    []string{"a-1.a-peer.ns.svc", "a-2.a-peer.ns.svc", "a-0.a-peer.ns.svc", "a-3.a-peer.ns.svc", "a-4.a-peer.ns.svc", "a-5.a-peer.ns.svc"},
			want:     []string{`tls.crt: does not cover "a-1.a-peer.ns.svc", "a-2.a-peer.ns.svc", "a-3.a-peer.ns.svc" and 2 more`},
			wantLeaf: leaf.Cert,
		},
		{
			name: "the CN does not count as a name", data: secret(clientOnly, ca), usage: Usage{Client: true}, now: t0,
			names: []string{"root"}, want: []string{`tls.crt: does not cover "root"`}, wantLeaf: clientOnly.Cert,
		},
		{name: "intermediate in tls.crt", data: secret(userLeaf, root), names: names, usage: peer, now: t0, wantLeaf: userLeaf.Cert},
		{
			name: "intermediate missing", data: with(secret(userLeaf, root), KeyCert, EncodeBundle(userLeaf.Cert)), names: names, usage: peer, now: t0,
			want:     []string{`ca.crt: did not sign tls.crt (issued by "CN=user-inter,O=etcdhook"; ca.crt holds "CN=user-root,O=etcdhook")`},
			wantLeaf: userLeaf.Cert,
		},
		{
			name: "intermediate in ca.crt instead of tls.crt", data: with(with(secret(userLeaf, root), KeyCert, EncodeBundle(userLeaf.Cert)), KeyCA, EncodeBundle(root.Cert, inter.Cert)),
			names: names, usage: peer, now: t0, wantLeaf: userLeaf.Cert,
		},
		{
			name: "chain to another root", data: secret(userLeaf, ca), names: names, usage: peer, now: t0,
			want:     []string{`ca.crt: did not sign tls.crt (its chain ends at "CN=user-inter,O=etcdhook", issued by "CN=user-root,O=etcdhook"; ca.crt holds "CN=etcd-a-ca,O=etcdhook")`},
			wantLeaf: userLeaf.Cert,
		},
		{
			name: "intermediate expired", data: secret(shortInterLeaf, root), names: names, usage: peer, now: t0.Add(2 * time.Hour),
			want: []string{
				"tls.crt: expired at " + at(shortInterLeaf.Cert.NotAfter),
				`tls.crt: intermediate "CN=short-inter,O=etcdhook" expired at ` + at(shortInter.Cert.NotAfter),
			},
			wantLeaf: shortInterLeaf.Cert,
		},
		{
			name: "intermediate under the built-in CA (path length 0)", data: secret(strictLeaf, ca), names: names, usage: peer, now: t0,
			want:     []string{"tls.crt: does not verify against ca.crt: x509: too many intermediates for path length constraint"},
			wantLeaf: strictLeaf.Cert,
		},
		{
			name: "everything at once, in order", usage: peer, now: t0.Add(91 * day),
			data:  map[string][]byte{KeyCert: serverOnly.CertPEM, KeyKey: leaf.KeyPEM},
			names: []string{"a-0.a-peer.ns.svc", "a-1.a-peer.ns.svc"},
			want: []string{
				"ca.crt: missing",
				"tls.key: does not match tls.crt",
				"tls.crt: expired at " + at(serverOnly.Cert.NotAfter),
				"tls.crt: has no clientAuth extended key usage (has serverAuth)",
				`tls.crt: does not cover "a-1.a-peer.ns.svc"`,
			},
			wantLeaf: serverOnly.Cert,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotLeaf, problems := CheckSecret(tc.data, tc.names, tc.usage, tc.now)
			var got []string
			for _, p := range problems {
				got = append(got, p.String())
			}
			assert.Equal(t, tc.want, got)
			if tc.wantLeaf == nil {
				assert.Nil(t, gotLeaf)
			} else {
				require.NotNil(t, gotLeaf)
				assert.True(t, tc.wantLeaf.Equal(gotLeaf))
			}
			// Deterministic: the same input, the same answer.
			_, again := CheckSecret(tc.data, tc.names, tc.usage, tc.now)
			assert.Equal(t, problems, again)
		})
	}
}

// No problems from CheckSecret must mean etcd accepts the files: crypto/tls loads the pair and
// x509 verifies it for each usage at that time.
func TestCheckSecretAgreesWithVerify(t *testing.T) {
	ca := mustCA(t, "ca", t0, 365*day)
	other := mustCA(t, "other", t0, 365*day)
	leaves := []KeyPair{
		mustIssue(t, ca, peerRequest(90*day), t0),
		mustIssue(t, ca, LeafRequest{Server: true, DNSNames: []string{"a-0.a-peer.ns.svc"}, Lifetime: day}, t0),
		mustIssue(t, ca, LeafRequest{Client: true, Lifetime: day}, t0),
		mustIssue(t, other, peerRequest(90*day), t0),
	}
	times := []time.Time{t0.Add(-time.Hour), t0, t0.Add(2 * day), t0.Add(100 * day)}
	usages := []Usage{{}, {Server: true}, {Client: true}, {Server: true, Client: true}}
	for i, leaf := range leaves {
		for _, now := range times {
			for _, u := range usages {
				t.Run(fmt.Sprintf("leaf%d/%s/%+v", i, now.Sub(t0), u), func(t *testing.T) {
					_, problems := CheckSecret(secret(leaf, ca), nil, u, now)
					err := Verify(leaf.Cert, []*x509.Certificate{ca.Cert}, u, now)
					if len(problems) == 0 {
						assert.NoError(t, err)
					} else if now != leaf.Cert.NotAfter { // the one second CheckSecret is stricter
						assert.Error(t, err, "problems %v", problems)
					}
				})
			}
		}
	}
}

func TestVerify(t *testing.T) {
	ca := mustCA(t, "ca", t0, 365*day)
	rotated := mustCA(t, "ca", t0.Add(day), 365*day)
	other := mustCA(t, "other", t0, 365*day)
	peerLeaf := mustIssue(t, ca, peerRequest(90*day), t0)
	serverLeaf := mustIssue(t, ca, LeafRequest{Server: true, Lifetime: 90 * day}, t0)
	clientLeaf := mustIssue(t, ca, LeafRequest{Client: true, Lifetime: 90 * day}, t0)
	both := Usage{Server: true, Client: true}

	for _, tc := range []struct {
		name    string
		leaf    *x509.Certificate
		roots   []*x509.Certificate
		usage   Usage
		now     time.Time
		wantErr string
	}{
		{name: "peer as peer", leaf: peerLeaf.Cert, roots: []*x509.Certificate{ca.Cert}, usage: both, now: t0},
		{name: "peer as server", leaf: peerLeaf.Cert, roots: []*x509.Certificate{ca.Cert}, usage: Usage{Server: true}, now: t0},
		{name: "server as server", leaf: serverLeaf.Cert, roots: []*x509.Certificate{ca.Cert}, usage: Usage{Server: true}, now: t0},
		// x509 accepts a chain valid for ANY of VerifyOptions.KeyUsages; each usage must be checked alone.
		{name: "server as peer", leaf: serverLeaf.Cert, roots: []*x509.Certificate{ca.Cert}, usage: both, now: t0, wantErr: "for clientAuth"},
		{name: "client as peer", leaf: clientLeaf.Cert, roots: []*x509.Certificate{ca.Cert}, usage: both, now: t0, wantErr: "for serverAuth"},
		{name: "client, no usage asked (not serverAuth by default)", leaf: clientLeaf.Cert, roots: []*x509.Certificate{ca.Cert}, now: t0},
		{name: "trust bundle", leaf: peerLeaf.Cert, roots: []*x509.Certificate{rotated.Cert, ca.Cert}, usage: both, now: t0.Add(day)},
		{name: "rotated CA only", leaf: peerLeaf.Cert, roots: []*x509.Certificate{rotated.Cert}, usage: both, now: t0.Add(day), wantErr: "unknown authority"},
		{name: "wrong CA", leaf: peerLeaf.Cert, roots: []*x509.Certificate{other.Cert}, usage: both, now: t0, wantErr: "unknown authority"},
		{name: "expired", leaf: peerLeaf.Cert, roots: []*x509.Certificate{ca.Cert}, usage: both, now: t0.Add(91 * day), wantErr: "expired"},
		{name: "not yet valid", leaf: peerLeaf.Cert, roots: []*x509.Certificate{ca.Cert}, usage: both, now: t0.Add(-time.Hour), wantErr: "not yet valid"},
		{name: "no roots", leaf: peerLeaf.Cert, usage: both, now: t0, wantErr: "no trusted CA"},
		{name: "no leaf", roots: []*x509.Certificate{ca.Cert}, usage: both, now: t0, wantErr: "no certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(tc.leaf, tc.roots, tc.usage, tc.now)
			if tc.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.wantErr)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	assert.Equal(t, "", Summary(nil))
	assert.Equal(t, `tls.key: missing; tls.crt: does not cover "x"`,
		Summary([]Problem{{Key: KeyKey, Message: "missing"}, {Key: KeyCert, Message: `does not cover "x"`}}))
}
