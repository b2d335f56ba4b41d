package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"time"

	"github.com/etcdhook/etcdhook/internal/hookcert"
	"github.com/etcdhook/etcdhook/internal/pki"
)

// runCerts is the hook pod's init container (docs/design/02-metacontroller.md §2.2): it creates or renews the hook's
// serving certificate in its Secret, the one Metacontroller's caBundle points at, and writes the leaf
// where the server reads it. It is the only container of the hook pod with an API token.
func runCerts(args []string) error {
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
	ns := fs.String("namespace", os.Getenv("POD_NAMESPACE"), "the hook's namespace (default: env POD_NAMESPACE, else the pod's)")
	secret := fs.String("secret", "etcdhook-serving-cert", "the Secret holding the serving CA and certificate")
	service := fs.String("service", "etcdhook", "the hook Service the certificate is for")
	out := fs.String("out-dir", "", "where to write tls.crt and tls.key for the server (required)")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *ns == "" {
		if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
			*ns = strings.TrimSpace(string(b))
		}
	}
	if *ns == "" || *out == "" {
		return usageError{errors.New("--out-dir and a namespace (--namespace, POD_NAMESPACE or the pod's) are required")}
	}
	log := jsonLogger()
	kube, err := inClusterKube()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	leaf, err := hookcert.Ensure(ctx, kube, hookcert.Options{Namespace: *ns, Secret: *secret, DNSNames: hookcert.ServiceNames(*service, *ns)})
	if err != nil {
		return err
	}
	if err := pki.WriteFiles(*out, map[string][]byte{hookcert.KeyCert: leaf.CertPEM, hookcert.KeyKey: leaf.KeyPEM}); err != nil {
		return err
	}
	log.Info("serving certificate ready", "secret", *ns+"/"+*secret, "names", leaf.Cert.DNSNames,
		"notAfter", leaf.Cert.NotAfter.UTC(), "renewAt", pki.RenewAt(leaf.Cert).UTC())
	return nil
}
