package hooks

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcdhook_hook_requests_total",
			Help: "Hook requests by hook and HTTP status code.",
		}, []string{"hook", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "etcdhook_hook_request_duration_seconds",
			Help:    "Hook request latency by hook and HTTP status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"hook", "code"}),
	}
	reg.MustRegister(m.requests, m.latency,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// instrument counts and times one hook.
func (s *Server) instrument(hook string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			defer func() {
				code := strconv.Itoa(ww.Status())
				s.metrics.requests.WithLabelValues(hook, code).Inc()
				s.metrics.latency.WithLabelValues(hook, code).Observe(time.Since(start).Seconds())
			}()
			next.ServeHTTP(ww, r)
		})
	}
}

// recoverer turns a panic into a 500 JSON answer: Metacontroller then changes nothing and retries.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.cfg.Logger.Error("panic in hook", "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				writeError(w, http.StatusInternalServerError, fmt.Sprintf("internal error: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}
