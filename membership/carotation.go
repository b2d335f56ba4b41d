package membership

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/internal/pki"
)

// CA rotation, the agent's half (docs/design/14-tls.md §14.6). The CA Secret holds the CA that signs
// (tls.crt, tls.key) and, during a rotation, the CA replacing it (next.crt, next.key); its ca.crt lists
// both. The hook asks for each step on the member Leases (etcd.io/ca-rotation) from what the agents
// report; every step here is conditional on the Secret's resourceVersion, so agents racing (or a crash
// in between) never leave two new CAs: the loser reads the winner's.

// addNextCA makes the rotation's new CA when the hook asks for the trust step of a rotation the Secret
// has not started: the current CA was not made for the mark and there is no next one. A next CA of
// another mark (an earlier request not finished) is left alone: the hook finishes that rotation first.
func (c *Certs) addNextCA(ctx context.Context, sec caSecret) (caSecret, error) {
	r := c.Rotation
	if r.Phase != api.CAPhaseTrust || sec.next != nil || pki.RotationOf(sec.cur.Cert) == r.Mark {
		return sec, nil
	}
	next, err := pki.NewRotatedCA(c.CASecret, c.now(), c.CADuration, r.Mark, r.Carry)
	if err != nil {
		return sec, err
	}
	data := copyData(sec.data)
	data[KeyNextCert], data[KeyNextKey] = next.CertPEM, next.KeyPEM
	data[pki.KeyCA] = append(append([]byte(nil), sec.cur.CertPEM...), next.CertPEM...)
	if err := c.Store.Update(ctx, c.CASecret, sec.version, data); err != nil {
		if errors.Is(err, ErrSecretConflict) {
			return c.ensureCA(ctx) // another agent made it (or the Secret changed): use what is there
		}
		return sec, fmt.Errorf("adding the new CA to Secret %s: %w", c.CASecret, err)
	}
	c.log().Info("made the rotation's new CA", "secret", c.CASecret, "fingerprint", pki.Short(next.Cert), "mark", r.Mark)
	c.event(EventCACreated, "RotateCA", "made the new CA %s in Secret %s for the CA rotation (trusted beside %s until every member trusts both)", pki.Short(next.Cert), c.CASecret, pki.Short(sec.cur.Cert))
	return c.ensureCA(ctx)
}

// signer is the CA that issues now: the new one once the hook asks for the sign or drop step of its
// rotation and every member trusts it (checked by the agent itself, once per new CA), the current one
// otherwise.
func (c *Certs) signer(ctx context.Context, sec caSecret) pki.KeyPair {
	r := c.Rotation
	if sec.next == nil || pki.RotationOf(sec.next.Cert) != r.Mark || (r.Phase != api.CAPhaseSign && r.Phase != api.CAPhaseDrop) {
		return sec.cur
	}
	next := pki.Fingerprint(sec.next.Cert)
	if c.confirmedNext != next && c.issuedByNext(ctx, sec) {
		c.confirmedNext = next // another agent confirmed the step already: never go back to the old CA
	}
	if c.confirmedNext != next {
		if !c.confirm(ctx, func(rep api.Report) bool { return containsFP(rep.TLSCAs, next) }) {
			c.log().Warn("the hook asks to sign with the new CA, but not every member reports trusting it: signing with the current one", "ca", pki.Short(sec.next.Cert))
			return sec.cur
		}
		c.confirmedNext = next
	}
	return *sec.next
}

// issuedByNext says whether this member's certificate or the shared client Secret is already issued by
// the rotation's new CA: an agent confirmed the sign step (a new or restarted agent, or a learner, has no
// member list to confirm it with itself, and reissuing from the old CA would flip the shared Secret).
func (c *Certs) issuedByNext(ctx context.Context, sec caSecret) bool {
	for _, dir := range []string{c.PeerDir, c.ClientDir} {
		if files, err := pki.ReadFiles(dir, pki.KeyCert); err == nil && issuedBefore(files, sec.next.Cert, c.now().Add(time.Hour)) {
			return true
		}
	}
	if c.ClientSecret == "" {
		return false
	}
	data, _, found, err := c.Store.Get(ctx, c.ClientSecret)
	return err == nil && found && issuedBefore(data, sec.next.Cert, c.now().Add(time.Hour))
}

func containsFP(list, fp string) bool {
	for _, f := range strings.Split(list, ",") {
		if f == fp {
			return true
		}
	}
	return false
}

// dropOldCA makes the new CA the Secret's only one when the hook asks for the drop step and this
// member has checked what it can: it issues from the new CA (member certificate and client Secret,
// ensured just before) and its etcd trusts it.
func (c *Certs) dropOldCA(ctx context.Context, sec caSecret, signer pki.KeyPair, member map[string][]byte) error {
	r := c.Rotation
	if r.Phase != api.CAPhaseDrop || sec.next == nil || pki.Fingerprint(signer.Cert) != pki.Fingerprint(sec.next.Cert) {
		return nil
	}
	next := pki.Fingerprint(sec.next.Cert)
	if f, err := factsOf(member); err != nil || f.Issuer != next {
		return nil
	}
	// The client, root and users' Secrets: issued by the new CA long enough ago for mounted copies to
	// have it (an application holding an old user certificate would be refused once the old CA goes).
	// A user's Secret name held by another application is skipped: nobody holds that user's certificate.
	for _, id := range c.identities() {
		data, _, found, err := c.getIdentity(ctx, id)
		if errors.Is(err, ErrSecretNotOwned) {
			continue
		}
		if err != nil || !found || !issuedBefore(data, sec.next.Cert, c.now().Add(-c.clientGrace())) {
			return nil
		}
	}
	if !c.confirm(ctx, func(rep api.Report) bool { return rep.TLSIssuer == next }) {
		return nil // a member still serves a certificate of the old CA
	}
	data := copyData(sec.data)
	delete(data, KeyNextCert)
	delete(data, KeyNextKey)
	data[pki.KeyCert], data[pki.KeyKey], data[pki.KeyCA] = sec.next.CertPEM, sec.next.KeyPEM, sec.next.CertPEM
	switch err := c.Store.Update(ctx, c.CASecret, sec.version, data); {
	case errors.Is(err, ErrSecretConflict):
		return nil // another agent did it, or the Secret changed: the next look reads it
	case err != nil:
		return fmt.Errorf("dropping the old CA from Secret %s: %w", c.CASecret, err)
	}
	c.secret = api.CASecretState{Current: pki.Fingerprint(sec.next.Cert), CurrentMark: pki.RotationOf(sec.next.Cert), CurrentCarry: pki.CarriedOf(sec.next.Cert)}
	c.log().Info("dropped the old CA", "secret", c.CASecret, "old", pki.Short(sec.cur.Cert), "ca", pki.Short(sec.next.Cert))
	c.event(EventCertificateRenewed, "RotateCA", "CA %s now signs alone in Secret %s; %s is dropped (members trust it until their restart)", pki.Short(sec.next.Cert), c.CASecret, pki.Short(sec.cur.Cert))
	return nil
}

func (c *Certs) clientGrace() time.Duration {
	if c.ClientGrace > 0 {
		return c.ClientGrace
	}
	return 2 * time.Minute
}

// issuedBefore says whether the Secret's certificate was signed by ca and issued before t (NotBefore is
// set ClockSkew back at issue).
func issuedBefore(data map[string][]byte, ca *x509.Certificate, t time.Time) bool {
	leafs, err := pki.ParseCertificates(data[pki.KeyCert])
	if err != nil || leafs[0].CheckSignatureFrom(ca) != nil {
		return false
	}
	return leafs[0].NotBefore.Add(pki.ClockSkew).Before(t)
}

// rotationLook is how soon an agent looks at its certificates again while a rotation is asked for: each
// step waits for every member, so a minute per look would make a rotation take minutes per step.
const rotationLook = 5 * time.Second

// copyData is a copy of a Secret's data map: a store must never share the caller's map.
func copyData(d map[string][]byte) map[string][]byte {
	if d == nil {
		return nil
	}
	out := make(map[string][]byte, len(d))
	for k, v := range d {
		out[k] = append([]byte(nil), v...)
	}
	return out
}
