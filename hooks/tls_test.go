package hooks

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/internal/hookcert"
	"github.com/etcdhook/etcdhook/internal/pki"
)

// Beside a TLS listener the plain one answers no hook (the requests carry private keys), only health,
// readiness and metrics; over TLS a client that trusts the serving CA gets the hook's answer, and the
// certificate's expiry is a metric.
func TestHooksOverTLSOnly(t *testing.T) {
	srv := fixtureServer()
	body, err := os.ReadFile("testdata/sync/scale-down-leave-intent.request.json")
	require.NoError(t, err)

	plain := srv.OpsOnly(":8443")
	for _, p := range []string{"/sync", "/customize", "/finalize"} {
		rec := post(t, plain, p, "application/json", body)
		require.Equal(t, http.StatusNotFound, rec.Code, p)
		require.Contains(t, rec.Body.String(), "over TLS only")
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		req, _ := http.NewRequest(http.MethodGet, p, nil)
		rec := httptest.NewRecorder()
		plain.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, p)
	}

	now := time.Now()
	ca, err := pki.NewCA("test serving CA", now, time.Hour)
	require.NoError(t, err)
	leaf, err := pki.Issue(ca, pki.LeafRequest{CommonName: "etcdhook", DNSNames: hookcert.ServiceNames("etcdhook", "etcdhook-system"), Server: true, Lifetime: time.Hour}, now)
	require.NoError(t, err)
	cert, err := leaf.TLSCertificate()
	require.NoError(t, err)
	ts, err := srv.HTTPSServer("127.0.0.1:0", cert)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = ts.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = ts.Close() })

	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: "etcdhook.etcdhook-system.svc", // the name Metacontroller dials
	}}}
	resp, err := client.Post("https://"+l.Addr().String()+"/sync", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	untrusting := &http.Client{Timeout: 10 * time.Second}
	_, err = untrusting.Post("https://"+l.Addr().String()+"/sync", "application/json", bytes.NewReader(body))
	require.Error(t, err, "a client without the CA does not get through")

	m, err := client.Get("https://" + l.Addr().String() + "/metrics")
	require.NoError(t, err)
	defer m.Body.Close()
	text, _ := io.ReadAll(m.Body)
	require.True(t, strings.Contains(string(text), "etcdhook_hook_serving_certificate_expiry_timestamp_seconds"))
}
