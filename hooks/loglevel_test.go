package hooks

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The level changes at run time from the pod's loopback only, and the change is logged.
func TestLogLevelAtRunTime(t *testing.T) {
	var out bytes.Buffer
	var lv slog.LevelVar
	log := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: &lv}))
	srv := New(Config{Now: time.Now, Logger: log, LogLevel: &lv})
	call := func(method, remote, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "/debug/log-level", strings.NewReader(body))
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	rec := call(http.MethodGet, "127.0.0.1:40000", "")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "info\n", rec.Body.String())

	rec = call(http.MethodPut, "10.244.0.7:40000", "debug")
	require.Equal(t, http.StatusForbidden, rec.Code, "Metacontroller's or Prometheus' address")
	require.Equal(t, slog.LevelInfo, lv.Level())

	rec = call(http.MethodPut, "[::1]:40000", "shout")
	require.Equal(t, http.StatusBadRequest, rec.Code)
	require.Equal(t, slog.LevelInfo, lv.Level())

	rec = call(http.MethodPut, "127.0.0.1:40000", "debug\n")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "debug\n", rec.Body.String())
	require.Equal(t, slog.LevelDebug, lv.Level())
	require.Contains(t, out.String(), `"msg":"log level changed","from":"INFO","to":"DEBUG"`)

	// Raising the level to error still logs the change, at the level it was made under.
	out.Reset()
	rec = call(http.MethodPut, "127.0.0.1:40000", "ERROR")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, slog.LevelError, lv.Level())
	require.Contains(t, out.String(), `"to":"ERROR"`)
	out.Reset()
	log.Info("hidden")
	require.Empty(t, out.String(), "info is no longer logged")

	fixed := New(Config{Now: time.Now, Logger: log})
	rec = httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/debug/log-level", nil)
	req.RemoteAddr = "127.0.0.1:1"
	fixed.ServeHTTP(rec, req)
	require.Equal(t, http.StatusNotImplemented, rec.Code)
}
