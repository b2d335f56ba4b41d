// Package hooks is the HTTP face of etcdhook: Metacontroller's sync, customize and finalize hooks plus
// health and metrics endpoints. It decodes, calls the pure decision in package sync, and encodes.
package hooks

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	etcdsync "github.com/etcdhook/etcdhook/sync"
)

// MaxBodyBytes bounds a request body. A 9-member cluster's request is well under 1 MiB even with
// managedFields; anything near this limit is not a Metacontroller request.
const MaxBodyBytes = 8 << 20

// Config configures a Server.
type Config struct {
	Options etcdsync.Options
	// Now is the clock; tests and the fixture run freeze it.
	Now    func() time.Time
	Logger *slog.Logger
	// Registry receives the server's metrics; nil means a private registry.
	Registry *prometheus.Registry
}

// Server serves the hooks. It holds no state about clusters: every answer comes from the request.
type Server struct {
	cfg      Config
	metrics  *metrics
	router   chi.Router
	draining atomic.Bool
}

// New builds a Server with its routes.
func New(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	s := &Server{cfg: cfg, metrics: newMetrics(cfg.Registry)}
	r := chi.NewRouter()
	r.Use(s.recoverer)
	r.With(s.instrument("sync")).Post("/sync", s.handleSync)
	r.With(s.instrument("finalize")).Post("/finalize", s.handleSync)
	r.With(s.instrument("customize")).Post("/customize", s.handleCustomize)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok\n") })
	r.Get("/readyz", s.handleReady)
	r.Handle("/metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{}))
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: use POST /sync, /customize or /finalize")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "method not allowed: hooks take POST")
	})
	s.router = r
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// Drain makes /readyz fail so that the Service stops sending requests before shutdown.
func (s *Server) Drain() { s.draining.Store(true) }

func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	if s.draining.Load() {
		writeText(w, http.StatusServiceUnavailable, "shutting down\n")
		return
	}
	writeText(w, http.StatusOK, "ok\n")
}

// HTTPServer wraps the handler with the timeouts a hook server needs: Metacontroller's own client
// times out after the webhook timeout (10 s by default), so nothing should take longer.
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           s,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
}
