package membership

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
)

// ProbeHandler serves the member's probe port. While etcd runs it forwards to etcd's metrics listener
// (/livez, /readyz, /metrics); before etcd starts and while parked it answers itself: alive (so that a
// slow join or a parked member is not killed) but not ready.
func ProbeHandler(a *Agent, etcdMetrics string) (http.Handler, error) {
	target, err := url.Parse(etcdMetrics)
	if err != nil {
		return nil, err
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		http.Error(w, "etcd does not answer: "+err.Error(), http.StatusServiceUnavailable)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		state, running := a.State()
		if running {
			proxy.ServeHTTP(w, r)
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
