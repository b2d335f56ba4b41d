package membership

import (
	"fmt"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/pki"
)

// The cluster CA's Secret as the members read it: the CA in use and, during a rotation, the one replacing
// it (docs/design/14-tls.md).

// Keys of the CA replacing the current one during a rotation.
const (
	KeyNextCert = "next.crt"
	KeyNextKey  = "next.key"
)

// caSecret is the CA Secret as read.
type caSecret struct {
	data    map[string][]byte
	version string
	cur     pki.KeyPair
	next    *pki.KeyPair
}

func parseCASecret(name string, data map[string][]byte, version string) (caSecret, error) {
	cur, err := pki.ParseKeyPair(data[pki.KeyCert], data[pki.KeyKey])
	if err != nil {
		return caSecret{}, fmt.Errorf("Secret %s: %w", name, err)
	}
	if !cur.Cert.IsCA {
		return caSecret{}, fmt.Errorf("Secret %s: %s is not a CA certificate", name, pki.KeyCert)
	}
	sec := caSecret{data: data, version: version, cur: cur}
	if len(data[KeyNextCert]) > 0 || len(data[KeyNextKey]) > 0 {
		next, err := pki.ParseKeyPair(data[KeyNextCert], data[KeyNextKey])
		if err != nil {
			return caSecret{}, fmt.Errorf("Secret %s: the rotation's new CA: %w", name, err)
		}
		if !next.Cert.IsCA || pki.Fingerprint(next.Cert) == pki.Fingerprint(cur.Cert) {
			return caSecret{}, fmt.Errorf("Secret %s: %s is not a second CA certificate", name, KeyNextCert)
		}
		sec.next = &next
	}
	return sec, nil
}

func (s caSecret) state() api.CASecretState {
	st := api.CASecretState{Current: pki.Fingerprint(s.cur.Cert), CurrentMark: pki.RotationOf(s.cur.Cert), CurrentCarry: pki.CarriedOf(s.cur.Cert)}
	if s.next != nil {
		st.Next, st.NextMark, st.NextCarry = pki.Fingerprint(s.next.Cert), pki.RotationOf(s.next.Cert), pki.CarriedOf(s.next.Cert)
	}
	return st
}

// trustPEM is the ca.crt members started now get: the CA that signs and, during a rotation, the new one.
// Without a rotation it is the Secret's certificate as stored, so a cluster made before rotations
// existed keeps byte-identical files.
func (s caSecret) trustPEM() []byte {
	if s.next == nil {
		return s.cur.CertPEM
	}
	return append(append([]byte(nil), s.cur.CertPEM...), s.next.CertPEM...)
}
