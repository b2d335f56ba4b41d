package membership

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// probePaths are all the probe port serves: the kubelet's probes and a metrics scrape. etcd's metrics
// listener also serves /health, /version and (with --enable-pprof) /debug/pprof; none of that is the
// probe port's business, and a port reachable from the pod network must not widen what etcd exposes.
var probePaths = map[string]bool{"/livez": true, "/readyz": true, "/metrics": true}

// probeUpstreamTimeout bounds one forwarded request, body included. It is below the probes'
// timeoutSeconds (5, sync/render/statefulset.go) so that a hung etcd is answered with a 503 the kubelet
// counts, instead of a kubelet-side timeout that leaves a goroutine and a connection behind.
const probeUpstreamTimeout = 4 * time.Second

// ProbeHandler serves the member's probe port. While etcd runs it forwards GET /livez, /readyz and
// /metrics to etcd's metrics listener; before etcd starts and while parked it answers itself: alive (so
// that a slow join or a parked member is not killed) but not ready. Anything else is 404.
func ProbeHandler(a *Agent, etcdMetrics string) (http.Handler, error) {
	return probeHandler(a, etcdMetrics, probeUpstreamTimeout)
}

func probeHandler(a *Agent, etcdMetrics string, timeout time.Duration) (http.Handler, error) {
	target, err := url.Parse(etcdMetrics)
	if err != nil {
		return nil, err
	}
	if target.Scheme == "" || target.Host == "" {
		return nil, fmt.Errorf("etcd metrics URL %q needs a scheme and a host", etcdMetrics)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// Only the checked path goes upstream, never a client-chosen escaping of it.
			pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
			pr.Out.URL.Path, pr.Out.URL.RawPath = pr.In.URL.Path, ""
			pr.Out.Host = ""
		},
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: timeout}).DialContext,
			ResponseHeaderTimeout: timeout,
			MaxIdleConns:          4,
			IdleConnTimeout:       30 * time.Second,
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "etcd does not answer: "+err.Error(), http.StatusServiceUnavailable)
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !probePaths[r.URL.Path] {
			http.NotFound(w, r)
			return
		}
		state, running := a.State()
		if why := a.proc.drainingFor(); why != "" && r.URL.Path == "/readyz" {
			// Out of the client Service before etcd stops on purpose (drain.go).
			http.Error(w, "draining: "+why, http.StatusServiceUnavailable)
			return
		}
		if running {
			// The deadline covers the body too (a /metrics scrape), which ResponseHeaderTimeout does not.
			ctx, cancel := context.WithTimeout(r.Context(), timeout)
			defer cancel()
			proxy.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		switch r.URL.Path {
		case "/livez":
			fmt.Fprintf(w, "ok (agent %s)\n", state)
		default:
			http.Error(w, "etcd is not running (agent "+state+")", http.StatusServiceUnavailable)
		}
	}), nil
}

// NewProbeServer is the probe port's server. Its clients are the kubelet and a metrics scraper: small
// requests, answered within probeUpstreamTimeout, so every phase of a connection is bounded and a slow or
// idle client cannot hold connections open.
func NewProbeServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      probeUpstreamTimeout + 5*time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
}
