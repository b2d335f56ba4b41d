package hooks

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Over TLS (docs/design/02-metacontroller.md §2.2): every sync carries the user's TLS Secrets, private keys included, so
// Metacontroller calls the hooks on a TLS listener whose CA it trusts (the CompositeController's
// caBundle). The plain listener then serves only what the kubelet and Prometheus read.

// hookPaths are the paths only the TLS listener serves once there is one.
var hookPaths = []string{"/sync", "/customize", "/finalize"}

// OpsOnly is the plain listener's handler beside a TLS one: health, readiness, metrics and the log
// level; a hook request gets 404 naming the TLS port, never an answer.
func (s *Server) OpsOnly(tlsAddr string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range hookPaths {
			if r.URL.Path == p || strings.HasPrefix(r.URL.Path, p+"/") {
				writeError(w, http.StatusNotFound, "hooks are served over TLS only (listener "+tlsAddr+"): the requests carry private keys")
				return
			}
		}
		s.ServeHTTP(w, r)
	})
}

// HTTPSServer is HTTPServer on TLS with cert (its leaf parsed), and exports the certificate's expiry
// (etcdhook_hook_serving_certificate_expiry_timestamp_seconds) for the alert that says when a hook pod
// must be restarted to renew it (its init container renews; the server holds no API token).
func (s *Server) HTTPSServer(addr string, cert tls.Certificate) (*http.Server, error) {
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, err
	}
	s.cfg.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "etcdhook_hook_serving_certificate_expiry_timestamp_seconds",
		Help: "When the certificate the hook serves its hooks with expires (Unix seconds).",
	}, func() float64 { return float64(leaf.NotAfter.Unix()) }))
	hs := s.HTTPServer(addr)
	hs.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	return hs, nil
}
