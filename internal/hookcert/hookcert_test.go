package hookcert

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/etcdhook/etcdhook/internal/pki"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func opts(now time.Time) Options {
	return Options{Namespace: "etcdhook-system", Secret: "etcdhook-serving-cert", DNSNames: ServiceNames("etcdhook", "etcdhook-system"), Now: func() time.Time { return now }}
}

func secret(t *testing.T, kube *fake.Clientset) *corev1.Secret {
	s, err := kube.CoreV1().Secrets("etcdhook-system").Get(context.Background(), "etcdhook-serving-cert", metav1.GetOptions{})
	require.NoError(t, err)
	return s
}

func writes(kube *fake.Clientset) (n int) {
	for _, a := range kube.Actions() {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			n++
		}
	}
	return n
}

// The first start makes a CA and a leaf for the Service that chains to it; the next starts reuse both
// without a write; past two thirds of its life the leaf is renewed under the same CA, which
// Metacontroller keeps trusting.
func TestEnsureCreatesReusesAndRenews(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	leaf, err := Ensure(ctx, kube, opts(t0))
	require.NoError(t, err)
	s := secret(t, kube)
	require.Equal(t, corev1.SecretTypeTLS, s.Type)
	ca, err := pki.ParseKeyPair(s.Data[KeyCACert], s.Data[KeyCAKey])
	require.NoError(t, err)
	require.NoError(t, pki.Verify(leaf.Cert, []*x509.Certificate{ca.Cert}, pki.Usage{Server: true}, t0))
	require.NoError(t, leaf.Cert.VerifyHostname("etcdhook.etcdhook-system.svc"), "the name Metacontroller dials")
	require.Equal(t, 1, writes(kube))

	again, err := Ensure(ctx, kube, opts(t0.Add(24*time.Hour)))
	require.NoError(t, err)
	require.Equal(t, leaf.CertPEM, again.CertPEM)
	require.Equal(t, 1, writes(kube), "nothing written when nothing is due")

	later := pki.RenewAt(leaf.Cert).Add(time.Hour)
	renewed, err := Ensure(ctx, kube, opts(later))
	require.NoError(t, err)
	require.NotEqual(t, leaf.CertPEM, renewed.CertPEM)
	require.True(t, renewed.Cert.NotAfter.After(leaf.Cert.NotAfter))
	s = secret(t, kube)
	require.Equal(t, ca.CertPEM, s.Data[KeyCACert], "the CA Metacontroller trusts stays")
	require.Equal(t, renewed.CertPEM, s.Data[KeyCert])
	require.NoError(t, pki.Verify(renewed.Cert, []*x509.Certificate{ca.Cert}, pki.Usage{Server: true}, later))
}

// A leaf that does not cover the Service (a renamed Service, a hand edit) is reissued; a CA that cannot
// sign is an error, never replaced.
func TestEnsureReissuesAWrongLeafAndKeepsABadCA(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	_, err := Ensure(ctx, kube, opts(t0))
	require.NoError(t, err)
	o := opts(t0)
	o.DNSNames = ServiceNames("hook", "etcdhook-system")
	leaf, err := Ensure(ctx, kube, o)
	require.NoError(t, err)
	require.NoError(t, leaf.Cert.VerifyHostname("hook.etcdhook-system.svc"))

	s := secret(t, kube)
	s.Data[KeyCAKey] = []byte("not a key")
	_, err = kube.CoreV1().Secrets("etcdhook-system").Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	before := writes(kube)
	_, err = Ensure(ctx, kube, opts(t0))
	require.ErrorIs(t, err, ErrBadCA)
	require.Equal(t, before, writes(kube), "the Secret is left for a person")
}

// Two replicas starting at once: the one whose create loses uses the winner's Secret.
func TestEnsureConvergesWhenACreateLoses(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	winner := fake.NewClientset()
	first, err := Ensure(ctx, winner, opts(t0))
	require.NoError(t, err)
	won := secret(t, winner)
	kube.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		// The other replica's Secret lands between our get and our create.
		require.NoError(t, kube.Tracker().Add(won.DeepCopy()))
		return true, nil, apierrors.NewAlreadyExists(corev1.Resource("secrets"), won.Name)
	})
	leaf, err := Ensure(ctx, kube, opts(t0))
	require.NoError(t, err)
	require.Equal(t, first.CertPEM, leaf.CertPEM)
}
