package hooks

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
)

// The hook's log level can change without a restart (docs/operations.md §4.2): GET /debug/log-level
// says it, PUT with a body of debug, info, warn or error sets it, on this replica only. Only from the
// pod's own loopback (kubectl port-forward arrives there): Metacontroller and Prometheus reach the same
// port, and neither has any business changing what the hook logs.
func (s *Server) handleLogLevel(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		writeError(w, http.StatusForbidden, "the log level is set from the pod itself: kubectl port-forward, then localhost")
		return
	}
	if s.cfg.LogLevel == nil {
		writeError(w, http.StatusNotImplemented, "this server was started without an adjustable level")
		return
	}
	if r.Method == http.MethodPut {
		b, err := io.ReadAll(io.LimitReader(r.Body, 64))
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		var l slog.Level
		if err := l.UnmarshalText([]byte(strings.TrimSpace(string(b)))); err != nil {
			writeError(w, http.StatusBadRequest, "want debug, info, warn or error: "+err.Error())
			return
		}
		old := s.cfg.LogLevel.Level()
		// Logged before the change, at a level the old setting shows: the change itself is always seen.
		s.cfg.Logger.Log(r.Context(), max(old, slog.LevelInfo), "log level changed", "from", old.String(), "to", l.String(), "by", r.RemoteAddr)
		s.cfg.LogLevel.Set(l)
	}
	writeText(w, http.StatusOK, strings.ToLower(s.cfg.LogLevel.Level().String())+"\n")
}
