// Package hookcert keeps the hook server's own serving certificate (docs/design/02-metacontroller.md §2.2): Metacontroller
// calls the hook over TLS, trusting a CA it reads from the same Secret (the CompositeController's
// caBundle.secretRef), because every sync carries the user's TLS Secrets, private keys included.
//
// Ensure runs in the hook pod's init container, the only container that holds an API token: it creates
// the Secret (a CA and a leaf for the hook Service) when there is none, renews the leaf with the same CA
// when it is two thirds through its life or no longer fits, and returns the leaf for the server. The CA
// is never replaced: Metacontroller resolves the bundle once, when the CompositeController is created or
// updated, so a new CA would cut it off (operations.md §10 says how to rotate it by hand).
package hookcert

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/etcdhook/etcdhook/internal/pki"
)

// Keys of the Secret: kubernetes.io/tls's two, the CA certificate under the key Metacontroller's
// caBundle.secretRef reads by default, and the CA's key (to renew the leaf with the same CA).
const (
	KeyCert   = corev1.TLSCertKey       // tls.crt
	KeyKey    = corev1.TLSPrivateKeyKey // tls.key
	KeyCACert = "ca.crt"
	KeyCAKey  = "ca.key"
)

// Lifetimes: the CA lives long (replacing it means re-applying the CompositeController); the leaf is
// renewed at each hook pod start past two thirds of its life (pki.RenewAt: 16 months of 2 years), and
// the hook's metric and alert say when a pod has run so long that it needs a restart to renew it.
const (
	CALifetime   = 10 * 365 * 24 * time.Hour
	LeafLifetime = 2 * 365 * 24 * time.Hour
)

// Options says which Secret holds the certificate and which names the leaf must cover.
type Options struct {
	Namespace, Secret string
	// DNSNames are the hook Service's names (<service>.<namespace>.svc and its variants).
	DNSNames []string
	Now      func() time.Time
}

// ServiceNames are the names a client may reach Service service in namespace by: Metacontroller dials
// <service>.<namespace>.svc.
func ServiceNames(service, namespace string) []string {
	return []string{service, service + "." + namespace, service + "." + namespace + ".svc", service + "." + namespace + ".svc.cluster.local"}
}

// ErrBadCA: the Secret exists but its CA cannot be used. It is not replaced (that would cut off
// Metacontroller, which trusts the old one): a person deletes the Secret and re-applies the
// CompositeController.
var ErrBadCA = errors.New("the hook's serving CA in its Secret is unusable")

// Ensure returns the leaf to serve with, creating or renewing the Secret as needed. Concurrent callers
// (two hook replicas starting at once) converge on one Secret: a create that loses finds the winner's,
// an update that loses reads it again.
func Ensure(ctx context.Context, kube kubernetes.Interface, o Options) (pki.KeyPair, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	secrets := kube.CoreV1().Secrets(o.Namespace)
	var leaf pki.KeyPair
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sec, err := secrets.Get(ctx, o.Secret, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			ca, err := pki.NewCA("etcdhook serving CA", now(), CALifetime)
			if err != nil {
				return err
			}
			if leaf, err = issue(ca, o, now()); err != nil {
				return err
			}
			_, err = secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: o.Secret, Namespace: o.Namespace, Labels: map[string]string{"app.kubernetes.io/name": "etcdhook"}},
				Type:       corev1.SecretTypeTLS,
				Data:       data(ca, leaf),
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				// Another replica made it first: use that one (RetryOnConflict goes round again).
				return apierrors.NewConflict(corev1.Resource("secrets"), o.Secret, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		ca, err := pki.ParseKeyPair(sec.Data[KeyCACert], sec.Data[KeyCAKey])
		if err != nil || !ca.Cert.IsCA || !now().Before(ca.Cert.NotAfter) {
			return fmt.Errorf("%w: Secret %s/%s %s (delete it and re-apply the CompositeController: operations.md §10)", ErrBadCA, o.Namespace, o.Secret, caProblem(ca, err, now()))
		}
		if current, err := pki.ParseKeyPair(sec.Data[KeyCert], sec.Data[KeyKey]); err == nil && fits(current, ca, o, now()) {
			leaf = current
			return nil
		}
		if leaf, err = issue(ca, o, now()); err != nil {
			return err
		}
		sec = sec.DeepCopy()
		sec.Data = data(ca, leaf)
		_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return pki.KeyPair{}, err
	}
	return leaf, nil
}

// fits: the leaf was signed by ca, serves every name, and is not yet due for renewal.
func fits(leaf, ca pki.KeyPair, o Options, now time.Time) bool {
	if pki.Verify(leaf.Cert, []*x509.Certificate{ca.Cert}, pki.Usage{Server: true}, now) != nil || !now.Before(pki.RenewAt(leaf.Cert)) {
		return false
	}
	for _, n := range o.DNSNames {
		if leaf.Cert.VerifyHostname(n) != nil {
			return false
		}
	}
	return true
}

func issue(ca pki.KeyPair, o Options, now time.Time) (pki.KeyPair, error) {
	return pki.Issue(ca, pki.LeafRequest{CommonName: o.DNSNames[0], DNSNames: o.DNSNames, Server: true, Lifetime: LeafLifetime}, now)
}

func data(ca, leaf pki.KeyPair) map[string][]byte {
	return map[string][]byte{KeyCert: leaf.CertPEM, KeyKey: leaf.KeyPEM, KeyCACert: ca.CertPEM, KeyCAKey: ca.KeyPEM}
}

func caProblem(ca pki.KeyPair, err error, now time.Time) string {
	switch {
	case err != nil:
		return "does not hold a CA certificate and key (" + err.Error() + ")"
	case !ca.Cert.IsCA:
		return "holds a ca.crt that is not a CA"
	}
	return "holds a CA that expired at " + ca.Cert.NotAfter.UTC().Format(time.RFC3339)
}
