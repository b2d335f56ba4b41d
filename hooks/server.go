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

// Config configures a Server.
type Config struct {
	Options etcdsync.Options
	// Now is the clock; tests and the fixture run freeze it.
	Now    func() time.Time
	Logger *slog.Logger
	// LogLevel is Logger's level, adjustable at run time through /debug/log-level; nil: fixed.
	LogLevel *slog.LevelVar
	// Registry receives the server's metrics; nil means a private registry.
	Registry *prometheus.Registry

	// MaxInFlight bounds the /sync, /finalize and /customize requests computed at once; 0 means
	// DefaultMaxInFlight().
	MaxInFlight int
	// MaxQueue bounds the requests waiting for one of those slots, each for at most QueueWait; past
	// that the hook answers 429 with Retry-After at once. 0 means MaxInFlight waiters; negative means no
	// queue (shed as soon as every slot is taken). QueueWait 0 means DefaultQueueWait.
	MaxQueue  int
	QueueWait time.Duration
	// MaxBodyBytes bounds a request body (413 beyond); 0 means MaxBodyBytes.
	MaxBodyBytes int64
	// MaxObjects bounds the child and related objects of one request (413 beyond), checked before
	// any object is decoded; 0 means MaxObjects.
	MaxObjects int
	// MaxElements bounds the array elements of one request (413 beyond), checked before decoding; 0
	// means MaxElements.
	MaxElements int
	// MaxInFlightPerParent bounds the computations of one parent at once (429 beyond, fairness.go); 0
	// means 1, what one Metacontroller sends (its work queue never hands one parent to two workers).
	MaxInFlightPerParent int
	// ComputeTimeout bounds one sync's computation (503 with Retry-After beyond, no answer); 0 means
	// DefaultComputeTimeout.
	ComputeTimeout time.Duration
	// ClusterMetricsTTL is how long a cluster's gauges outlive this replica's last sync of it; 0 means
	// ClusterMetricsTTL (hooks/clustermetrics.go).
	ClusterMetricsTTL time.Duration
}

// Server serves the hooks. Every answer comes from the request alone; the only state it keeps about
// clusters is what its last answers said, for the per-cluster gauges (clustermetrics.go).
type Server struct {
	cfg          Config
	metrics      *metrics
	clusters     *clusterMetrics
	limiter      *limiter
	limitMetrics limitMetrics
	parents      *parentGate
	router       chi.Router
	draining     atomic.Bool
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
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight()
	}
	if cfg.MaxQueue == 0 {
		cfg.MaxQueue = cfg.MaxInFlight
	}
	if cfg.QueueWait == 0 {
		cfg.QueueWait = DefaultQueueWait
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = MaxBodyBytes
	}
	if cfg.MaxObjects <= 0 {
		cfg.MaxObjects = MaxObjects
	}
	if cfg.MaxElements <= 0 {
		cfg.MaxElements = MaxElements
	}
	if cfg.MaxInFlightPerParent <= 0 {
		cfg.MaxInFlightPerParent = 1
	}
	if cfg.ComputeTimeout <= 0 {
		cfg.ComputeTimeout = DefaultComputeTimeout
	}
	if cfg.ClusterMetricsTTL <= 0 {
		cfg.ClusterMetricsTTL = ClusterMetricsTTL
	}
	s := &Server{cfg: cfg, metrics: newMetrics(cfg.Registry), limiter: newLimiter(cfg.MaxInFlight, cfg.MaxQueue, cfg.QueueWait), parents: newParentGate(cfg.MaxInFlightPerParent)}
	s.limitMetrics = newLimitMetrics(cfg.Registry, s.limiter)
	s.clusters = newClusterMetrics(cfg.Registry, cfg.Now, cfg.ClusterMetricsTTL)
	r := chi.NewRouter()
	r.Use(s.recoverer)
	// Counted and timed first, so that shed requests (429) show in the request metrics too.
	r.With(s.instrument("sync"), s.limit("sync")).Post("/sync", s.handleSync)
	r.With(s.instrument("finalize"), s.limit("finalize")).Post("/finalize", s.handleSync)
	r.With(s.instrument("customize"), s.limit("customize")).Post("/customize", s.handleCustomize)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok\n") })
	r.Get("/readyz", s.handleReady)
	r.Get("/debug/log-level", s.handleLogLevel)
	r.Put("/debug/log-level", s.handleLogLevel)
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
