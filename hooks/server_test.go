package hooks

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func post(t *testing.T, srv http.Handler, path, contentType string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	return rec
}

func TestBadInputGets4xxAndAClearMessage(t *testing.T) {
	srv := fixtureServer()
	valid := mustRead(t, "testdata/sync/scale-down-leave-intent.request.json")
	for _, tc := range []struct {
		name, path, ctype string
		body              []byte
		code              int
		msg               string
	}{
		{"malformed", "/sync", "application/json", []byte(`{"parent":`), 400, "malformed JSON"},
		{"trailing data", "/sync", "application/json", append(append([]byte{}, valid...), []byte(`{}`)...), 400, "data after"},
		{"form content type", "/sync", "application/x-www-form-urlencoded", valid, 415, "application/json"},
		{"too large", "/sync", "application/json", bytes.Repeat([]byte(" "), MaxBodyBytes+1), 413, "over"},
		{"no parent", "/sync", "application/json", []byte(`{"children":{}}`), 422, "no parent"},
		{"wrong kind", "/sync", "", []byte(`{"parent":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"b","uid":"c"}}}`), 422, "want etcd.io/v1alpha1 EtcdCluster"},
		{"customize wrong kind", "/customize", "application/json", []byte(`{"parent":{"apiVersion":"v1","kind":"Pod"}}`), 422, "EtcdCluster"},
		{"unknown path", "/reconcile", "application/json", valid, 404, "no such endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := post(t, srv, tc.path, tc.ctype, tc.body)
			require.Equal(t, tc.code, rec.Code)
			var e map[string]string
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
			require.Contains(t, e["error"], tc.msg)
			require.NotContains(t, rec.Body.String(), `"children"`)
		})
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/sync", nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

func TestHealthReadinessAndDrain(t *testing.T) {
	srv := fixtureServer()
	get := func(path string) int {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	require.Equal(t, 200, get("/healthz"))
	require.Equal(t, 200, get("/readyz"))
	srv.Drain()
	require.Equal(t, 503, get("/readyz"), "draining fails readiness so the Service stops routing here")
	require.Equal(t, 200, get("/healthz"))
}

func TestMetricsCountRequestsByHookAndCode(t *testing.T) {
	srv := fixtureServer()
	valid := mustRead(t, "testdata/sync/new-cluster.request.json")
	require.Equal(t, 200, post(t, srv, "/sync", "application/json", valid).Code)
	require.Equal(t, 400, post(t, srv, "/sync", "application/json", []byte("{")).Code)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	require.Contains(t, body, `etcdhook_hook_requests_total{code="200",hook="sync"} 1`)
	require.Contains(t, body, `etcdhook_hook_requests_total{code="400",hook="sync"} 1`)
	require.Contains(t, body, `etcdhook_hook_request_duration_seconds_count{code="200",hook="sync"} 1`)
}

func TestPanicBecomes500(t *testing.T) {
	srv := fixtureServer()
	srv.router.Post("/boom", func(http.ResponseWriter, *http.Request) { panic("boom") })
	rec := post(t, srv, "/boom", "application/json", []byte(`{}`))
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.True(t, strings.Contains(rec.Body.String(), "boom"))
}

func TestSyncResponseShape(t *testing.T) {
	srv := fixtureServer()
	valid := mustRead(t, "testdata/sync/scale-down-leave-intent.request.json")
	rec := post(t, srv, "/sync", "application/json", valid)
	require.Equal(t, 200, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var resp map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
	for _, k := range []string{"status", "children", "resyncAfterSeconds", "finalized"} {
		require.Contains(t, resp, k)
	}
	require.NotContains(t, rec.Body.String(), "null", "Metacontroller turns null into field removals")
}
