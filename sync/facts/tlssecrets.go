package facts

import (
	"fmt"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/pki"
)

// The user's TLS Secrets (docs/design/14-tls.md §14.5), checked before a pod that mounts them is rendered.

// CertProblem is one thing wrong with a user's TLS Secret, for CertificatesInvalid.
type CertProblem struct {
	Secret string
	pki.Problem
}

func (c CertProblem) String() string {
	if c.Key == "" {
		return fmt.Sprintf("Secret %s: %s", c.Secret, c.Message)
	}
	return fmt.Sprintf("Secret %s: %s: %s", c.Secret, c.Key, c.Message)
}

// secretsToCheck is the spec whose TLS Secrets the pods may mount: the spec as it is, or, with TLS off
// while a switch off may be under way (the applied spec had TLS on, or a peer URL or the StatefulSet says
// so), the same settings with TLS on: the transition template mounts the user's Secrets, and a member it
// restarts could not start on an unusable one (docs/design/14-tls.md §14.8). The final roll is checked too,
// though its pods no longer mount them: a check one roll too long holds nothing that was safe.
func (f *Facts) secretsToCheck(s api.ClusterSpec) api.ClusterSpec {
	if s.Security.TLS.TLSOn() {
		return s
	}
	if (f.Applied != nil && f.Applied.Security.TLS.TLSOn()) || f.TLSSwitchSeen() {
		s.Security.TLS = s.Security.TLS.As(true)
	}
	return s
}

// checkTLSSecrets checks the user's Secrets a spec names against what every member of its size needs
// (docs/design/14-tls.md §14.5): the peer certificate covers every member's peer host with server and client
// auth; the client-plane certificate covers every member's client host, the client Service and 127.0.0.1
// with server and client auth (the agents and Jobs present it as their client certificate). A Secret
// the request does not hold is missing: Metacontroller relates the named Secrets, so absence is either
// no such Secret or a cache that has not seen it yet, and both mean not yet.
func (f *Facts) checkTLSSecrets(s api.ClusterSpec) []CertProblem {
	t := s.Security.TLS
	if !t.TLSOn() {
		return nil
	}
	size := int(*s.Size)
	var out []CertProblem
	check := func(name string, names func(int) []string, peer bool) {
		if name == "" {
			return
		}
		sec := f.Observed.Secrets[name]
		if sec == nil {
			out = append(out, CertProblem{Secret: name, Problem: pki.Problem{Message: "not found in namespace " + f.Names.Namespace}})
			return
		}
		var want []string
		for i := 0; i < size; i++ {
			want = append(want, names(i)...)
		}
		leaf, problems := pki.CheckSecret(sec.Data, want, pki.Usage{Server: true, Client: true}, f.Now)
		for _, pr := range problems {
			out = append(out, CertProblem{Secret: name, Problem: pr})
		}
		if peer && len(problems) == 0 && leaf != nil {
			if msg := peerDNSProblem(f.Names, leaf.DNSNames, size); msg != "" {
				out = append(out, CertProblem{Secret: name, Problem: pki.Problem{Key: pki.KeyCert, Message: msg}})
			}
		}
	}
	check(t.Peer.SecretName, f.Names.PeerTLSNames, true)
	check(t.Client.SecretName, f.Names.ClientTLSNames, false)
	return out
}

// sameTLSSecrets: the two specs name the same Secrets for the same planes.
func sameTLSSecrets(a, b api.ClusterSpec) bool {
	ta, tb := a.Security.TLS, b.Security.TLS
	return ta.TLSOn() == tb.TLSOn() && ta.Peer.SecretName == tb.Peer.SecretName && ta.Client.SecretName == tb.Client.SecretName
}

// peerDNSProblem: why etcd would refuse the members' peer connections with this certificate (see
// api.Names.PeerDNSChecked), "" when it would not.
func peerDNSProblem(n api.Names, dnsNames []string, size int) string {
	for i := 0; i < size; i++ {
		if !n.PeerDNSChecked(dnsNames, i) {
			return fmt.Sprintf("etcd checks a connecting peer's certificate against its address through DNS, which a wildcard for %s.%s.svc cannot pass: list each member's host (%s, …) or add *.%s.%s.svc.cluster.local",
				n.PeerService(), n.Namespace, n.PeerHost(i), n.PeerService(), n.Namespace)
		}
	}
	return ""
}

func sameTLSSecretNames(a, b api.TLSSpec) bool {
	return a.Peer.SecretName == b.Peer.SecretName && a.Client.SecretName == b.Client.SecretName
}
