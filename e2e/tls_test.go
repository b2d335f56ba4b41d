//go:build e2e

package e2e

import (
	"crypto/tls"
	"fmt"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/pki"
	"github.com/etcdhook/etcdhook/membership"
)

// userSecret writes a cert-manager-layout Secret (as a cert-manager Certificate would).
func (s *scenario) userSecret(name string, kp pki.KeyPair, ca pki.KeyPair) {
	s.t.Helper()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{pki.KeyCert: kp.CertPEM, pki.KeyKey: kp.KeyPEM, pki.KeyCA: ca.CertPEM},
	}
	cur, err := s.e.kube.CoreV1().Secrets(s.ns).Get(s.ctx, name, metav1.GetOptions{})
	if err == nil {
		cur.Data = sec.Data
		_, err = s.e.kube.CoreV1().Secrets(s.ns).Update(s.ctx, cur, metav1.UpdateOptions{})
	} else {
		_, err = s.e.kube.CoreV1().Secrets(s.ns).Create(s.ctx, sec, metav1.CreateOptions{})
	}
	require.NoError(s.t, err)
}

// servedSerials: the serial each member presents to a new connection on its client port, dialled with
// the client Secret; a member that does not answer (a pod just replaced, a loaded machine) is missing.
func (s *scenario) servedSerials() map[string]*big.Int {
	tc, err := s.clientTLS()
	require.NoError(s.t, err)
	return s.servedSerialsWith(tc)
}

// allServed waits, up to a minute, for every one of n members to answer servedSerials: one dial that
// missed a member would make a comparison over the map check less than it says (or compare with nil).
func (s *scenario) allServed(n int) map[string]*big.Int {
	s.t.Helper()
	var got map[string]*big.Int
	s.waitFor(fmt.Sprintf("%d members to answer a TLS dial", n), time.Minute, func() bool {
		got = s.servedSerials()
		return len(got) == n
	})
	return got
}

func (s *scenario) servedSerialsWith(tc *tls.Config) map[string]*big.Int {
	out := map[string]*big.Int{}
	n := s.names()
	for _, p := range s.pods() {
		i := n.PodOrdinal(p.Name)
		addr := fmt.Sprintf("%s:%d", n.PeerHost(i), api.ClientPort)
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr, tc)
		if err != nil {
			continue
		}
		out[p.Name] = conn.ConnectionState().PeerCertificates[0].SerialNumber
		conn.Close()
	}
	return out
}

type podSeen struct {
	uid      string
	restarts int32
}

func (s *scenario) podIdentities() map[string]podSeen {
	out := map[string]podSeen{}
	for _, p := range s.pods() {
		var restarts int32
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
		out[p.Name] = podSeen{string(p.UID), restarts}
	}
	return out
}

// TLS from the user's Secrets in cert-manager's layout (docs/design/14-tls.md §14.5): create a cluster on them;
// renew the client-plane certificate in place, as cert-manager does, and see every member serve it
// without a restart; put an expired certificate in the Secret and see it refused (CertificatesInvalid)
// while the cluster keeps serving, again without a restart.
func TestTLSUserSecrets(t *testing.T) {
	beside(t)
	s := newScenario(t, "tlsuser")
	now := time.Now()
	ca, err := pki.NewCA("e2e-ca", now, 24*time.Hour)
	require.NoError(t, err)
	hosts := fmt.Sprintf("*.%s-peer.%s.svc", s.name, s.ns)
	issue := func(at time.Time, life time.Duration, client bool) pki.KeyPair {
		// The .svc.cluster.local wildcard: etcd matches a connecting peer by its PTR name.
		req := pki.LeafRequest{CommonName: "e2e", DNSNames: []string{hosts, hosts + ".cluster.local"}, Server: true, Client: true, Lifetime: life}
		if client {
			req.DNSNames = append(req.DNSNames, fmt.Sprintf("%s.%s.svc", s.name, s.ns))
			req.IPs = []net.IP{net.IPv4(127, 0, 0, 1)}
		}
		kp, err := pki.Issue(ca, req, at)
		require.NoError(t, err)
		return kp
	}
	s.userSecret("etcd-peer-tls", issue(now, 12*time.Hour, false), ca)
	s.userSecret("etcd-client-tls-user", issue(now, 12*time.Hour, true), ca)
	sp := spec(3, *etcdVersion)
	sp["security"] = map[string]any{"tls": map[string]any{
		"peer":   map[string]any{"secretName": "etcd-peer-tls"},
		"client": map[string]any{"secretName": "etcd-client-tls-user"},
	}}
	s.apply(sp)
	created := s.waitFor("settled", stepTimeout, s.settled(3))
	w := s.startWriter("steady")
	time.Sleep(5 * time.Second)

	w.Step("client certificate renewed in the Secret")
	s.allServed(3) // every member answers the first certificate before it is replaced
	pods := s.podIdentities()
	renewed := issue(time.Now(), 12*time.Hour, true)
	s.userSecret("etcd-client-tls-user", renewed, ca)
	// The kubelet refreshes a Secret volume at its own pace (1m54s for the last member in CI5).
	rotated := s.waitFor("every member to serve the renewed certificate", 8*time.Minute, func() bool {
		got := s.servedSerials()
		if len(got) != 3 {
			return false
		}
		for _, serial := range got {
			if serial.Cmp(renewed.Cert.SerialNumber) != 0 {
				return false
			}
		}
		return true
	})
	require.Equal(t, pods, s.podIdentities(), "no member pod was replaced or restarted")

	w.Step("expired certificate in the Secret")
	s.userSecret("etcd-client-tls-user", issue(time.Now().Add(-3*time.Hour), time.Hour, true), ca)
	refused := s.waitFor("CertificatesInvalid", 3*time.Minute, func() bool {
		c := condition(s.cluster(), api.CondCertificatesInvalid)
		return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "expired")
	})
	// Long enough for the kubelet to hand every pod the bad files and every agent to look at them: the
	// renewal above took up to 1m54s from the Secret update to the last member serving it (CI5).
	time.Sleep(150 * time.Second)
	// Dialled with the last good key pair: the Secret's expired one may be refused, and an empty map
	// would check nothing.
	good, err := membership.ClientTLSFromFiles(map[string][]byte{pki.KeyCert: renewed.CertPEM, pki.KeyKey: renewed.KeyPEM, pki.KeyCA: ca.CertPEM})
	require.NoError(t, err)
	var still map[string]*big.Int
	s.waitFor("every member to answer with the last good key pair", time.Minute, func() bool {
		still = s.servedSerialsWith(good)
		return len(still) == 3
	})
	for name, serial := range still {
		require.Zero(t, serial.Cmp(renewed.Cert.SerialNumber), "%s still serves the last good certificate", name)
	}
	require.Equal(t, pods, s.podIdentities(), "no member pod was replaced or restarted")
	msg := condition(s.cluster(), api.CondCertificatesInvalid).Message

	w.Step("good certificate back")
	s.userSecret("etcd-client-tls-user", renewed, ca)
	s.waitFor("CertificatesInvalid gone", 3*time.Minute, func() bool {
		c := condition(s.cluster(), api.CondCertificatesInvalid)
		return c == nil || c.Status != metav1.ConditionTrue
	})
	w.Finish(fmt.Sprintf("create 3 on the user's Secrets: %s; renewed certificate served by every member %s after the Secret update (no restart); expired certificate refused in %s, members kept serving (%q)\n\n",
		created.Round(100*time.Millisecond), rotated.Round(time.Second), refused.Round(time.Second), msg))
}

// etcd.io/renew-certificates on a cluster with the built-in CA (docs/design/14-tls.md §14.7): every member
// serves a renewed certificate (new serial) and the client Secret is renewed, without a restart and
// without a failed write; status.tls.renewal counts the members.
func TestCertificateRenewal(t *testing.T) {
	beside(t)
	s := settledScenario(t, "renew", 3)
	w := s.startWriter("steady")
	time.Sleep(3 * time.Second)
	before, pods := s.allServed(3), s.podIdentities()
	client, err := s.e.kube.CoreV1().Secrets(s.ns).Get(s.ctx, s.names().ClientSecret(), metav1.GetOptions{})
	require.NoError(t, err)

	w.Step("etcd.io/renew-certificates")
	_, err = s.e.dyn.Resource(gvrCluster).Namespace(s.ns).Patch(s.ctx, s.name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+api.AnnRenewCertificates+`":"e2e-renewal-1"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	took := s.waitFor("every member to serve a renewed certificate, counted in status", 3*time.Minute, func() bool {
		got := s.servedSerials()
		if len(got) != 3 {
			return false
		}
		for name, serial := range got {
			if serial.Cmp(before[name]) == 0 {
				return false
			}
		}
		r := s.cluster().Status.TLS
		return r != nil && r.Renewal != nil && r.Renewal.Renewed == 3 && r.Renewal.Members == 3
	})
	require.Equal(t, pods, s.podIdentities(), "no member pod was replaced or restarted")
	after, err := s.e.kube.CoreV1().Secrets(s.ns).Get(s.ctx, s.names().ClientSecret(), metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEqual(t, client.Data[pki.KeyCert], after.Data[pki.KeyCert], "the client Secret was renewed too")
	w.Finish(fmt.Sprintf("etcd.io/renew-certificates on 3 members (built-in CA): every member served a renewed certificate and status counted 3 of 3 after %s; client Secret renewed; no restart\n\n",
		took.Round(100*time.Millisecond)))
}

// etcd.io/rotate-ca, asked with kubectl etcd rotate-ca, on a cluster with the built-in CA
// (docs/design/14-tls.md §14.6): a new CA is trusted beside the old one (each member's etcd restarted
// in place, one at a time), everything is reissued from it,
// the old CA is dropped (restarted again), under a writer that reads the client Secret at each
// handshake. No pod is replaced or restarted (the agents restart etcd inside the pod); afterwards every
// member trusts and serves the new CA alone, and a client trusting only the new CA reaches every member.
func TestCARotation(t *testing.T) {
	beside(t)
	s := newScenario(t, "carot")
	sp := spec(3, *etcdVersion)
	// The writer reads the client Secret through the API at each handshake (no mounted copy to wait
	// for): a short grace keeps the scenario within the CI budget. The default (2m) is in the agents'
	// and the membership tests.
	sp["security"] = map[string]any{"tls": map[string]any{"builtIn": map[string]any{"rotationGrace": "15s"}}}
	s.apply(sp)
	s.waitFor("settled", stepTimeout, s.settled(3))
	w := s.startWriter("steady")
	time.Sleep(3 * time.Second)
	pods := s.podIdentities()
	before := s.cluster().Status.TLS
	require.NotNil(t, before)
	require.Len(t, before.CAFingerprints, 1)
	old := before.CAFingerprints[0]

	w.Step("etcd.io/rotate-ca")
	// With the plugin, as tls.md shows it (etcd.io/rotate-ca=<the time>, followed until done); the
	// phases and figures are the test's own watch.
	rotate := s.kubectlEtcdMeanwhile(s.ctx, "rotate-ca", s.name)
	phases := map[string]time.Duration{}
	began := time.Now()
	took := s.waitFor("the CA rotation to be done", 6*time.Minute, func() bool {
		st := s.cluster().Status.TLS
		if st == nil || st.CARotation == nil {
			return false
		}
		if _, seen := phases[st.CARotation.Phase]; !seen {
			phases[st.CARotation.Phase] = time.Since(began)
		}
		return st.CARotation.Phase == api.CARotationDone && st.CARotation.Trusting == 3 && st.CARotation.Issued == 3
	})
	code, out, _ := rotate()
	require.Equal(t, 0, code, "kubectl etcd rotate-ca")
	require.Contains(t, out, "done: every member of "+s.ns+"/"+s.name+" trusts and serves the new CA alone")
	after := s.cluster().Status.TLS
	require.Len(t, after.CAFingerprints, 1, "every member trusts one CA")
	require.NotEqual(t, old, after.CAFingerprints[0], "a new CA")
	require.Equal(t, pods, s.podIdentities(), "no member pod was replaced or restarted: etcd restarted inside the pods")
	// A client that trusts only the new CA (the client Secret holds it alone now) reaches every member
	// (waited for: the last member's etcd restarted in its pod moments ago).
	s.allServed(3)
	data, err := s.secretData(s.names().CASecret())
	require.NoError(t, err)
	require.Empty(t, data["next.crt"], "the CA Secret holds the new CA alone")
	w.Finish(fmt.Sprintf("etcd.io/rotate-ca on 3 members (built-in CA): done after %s (phases first seen: AddingCA %s, Reissuing %s, DroppingOldCA %s); each member's etcd restarted twice in place, no pod restarted; every member trusts and serves the new CA alone (rotationGrace 15s)\n\n",
		took.Round(100*time.Millisecond), phases[api.CARotationAddingCA].Round(100*time.Millisecond),
		phases[api.CARotationReissuing].Round(100*time.Millisecond), phases[api.CARotationDroppingCA].Round(100*time.Millisecond)))
}
