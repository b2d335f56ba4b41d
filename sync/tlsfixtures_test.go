package sync

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/internal/pki"
)

// Certificates for the user-Secret fixtures. Keys are random, so they are made once and kept under
// testdata/tls (made again only with -update when missing): the fixtures compare exactly. Lifetimes are
// fixed around the fixture clock (fixtureNow), so a certificate that is expired in a fixture stays so.
const tlsFixtureDir = "testdata/tls"

// fixtureSecrets are cert-manager-layout Secret data by a short name:
//
//	peer, client      good for cluster demo/prod of up to 9 members (CA "a")
//	client-expired    expired a month before fixtureNow
//	client-narrow     covers only demo-0
//	client-other-ca   signed by CA "b", ca.crt is CA "a"
//	client-nokey      tls.key missing
//	client-mismatch   tls.key of another certificate
//	peer-svc-only     wildcard for .svc only: covers the names, but etcd's peer check would refuse it
func fixtureSecrets(t testing.TB) map[string]map[string][]byte {
	t.Helper()
	load := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(tlsFixtureDir, name))
		require.NoError(t, err, "fixture certificates: run go test ./sync -run Fixtures -update to make them")
		return b
	}
	if _, err := os.Stat(filepath.Join(tlsFixtureDir, "ca-a.crt")); os.IsNotExist(err) && *update {
		makeFixtureCerts(t)
	}
	caA := load("ca-a.crt")
	pair := func(name string) (crt, key []byte) { return load(name + ".crt"), load(name + ".key") }
	secret := func(name string) map[string][]byte {
		crt, key := pair(name)
		return map[string][]byte{pki.KeyCert: crt, pki.KeyKey: key, pki.KeyCA: caA}
	}
	out := map[string]map[string][]byte{
		"peer":            secret("peer"),
		"client":          secret("client"),
		"client-expired":  secret("client-expired"),
		"client-narrow":   secret("client-narrow"),
		"client-other-ca": secret("client-other-ca"),
		"peer-svc-only":   secret("peer-svc-only"),
	}
	noKey := secret("client")
	delete(noKey, pki.KeyKey)
	out["client-nokey"] = noKey
	mismatch := secret("client")
	mismatch[pki.KeyKey] = load("peer.key")
	out["client-mismatch"] = mismatch
	return out
}

func makeFixtureCerts(t testing.TB) {
	require.NoError(t, os.MkdirAll(tlsFixtureDir, 0o755))
	write := func(name string, kp pki.KeyPair) {
		require.NoError(t, os.WriteFile(filepath.Join(tlsFixtureDir, name+".crt"), kp.CertPEM, 0o644))
		if kp.KeyPEM != nil {
			require.NoError(t, os.WriteFile(filepath.Join(tlsFixtureDir, name+".key"), kp.KeyPEM, 0o644))
		}
	}
	born := fixtureNow.Add(-365 * 24 * time.Hour)
	caA, err := pki.NewCA("fixture-ca-a", born, 20*365*24*time.Hour)
	require.NoError(t, err)
	caB, err := pki.NewCA("fixture-ca-b", born, 20*365*24*time.Hour)
	require.NoError(t, err)
	write("ca-a", pki.KeyPair{CertPEM: caA.CertPEM})
	both := func(ca pki.KeyPair, dns []string, ips []net.IP, at time.Time, life time.Duration) pki.KeyPair {
		kp, err := pki.Issue(ca, pki.LeafRequest{CommonName: "fixture", DNSNames: dns, IPs: ips, Server: true, Client: true, Lifetime: life}, at)
		require.NoError(t, err)
		return kp
	}
	// The .svc.cluster.local wildcard matches the PTR names etcd checks peers by (api.Names.PeerDNSChecked).
	peers := []string{"*.demo-peer.prod.svc", "*.demo-peer.prod.svc.cluster.local"}
	clients := []string{"*.demo-peer.prod.svc", "demo.prod.svc"}
	local := []net.IP{net.IPv4(127, 0, 0, 1)}
	long := 10 * 365 * 24 * time.Hour
	write("peer", both(caA, peers, nil, born, long))
	write("client", both(caA, clients, local, born, long))
	write("peer-svc-only", both(caA, []string{"*.demo-peer.prod.svc"}, nil, born, long))
	write("client-expired", both(caA, clients, local, born, 335*24*time.Hour))
	write("client-narrow", both(caA, []string{"demo-0.demo-peer.prod.svc", "demo.prod.svc"}, local, born, long))
	write("client-other-ca", both(caB, clients, local, born, long))
}
