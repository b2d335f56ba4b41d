package membership

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// upstream stands in for etcd's metrics listener: it records what reached it. (The probe port's own
// behaviour is under test here; the real /livez and /readyz answers are covered by the scenarios.)
type upstream struct {
	mu    sync.Mutex
	paths []string
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.paths = append(u.paths, r.Method+" "+r.URL.RequestURI())
	u.mu.Unlock()
	if r.URL.Path == "/hang" || r.Header.Get("X-Hang") != "" {
		<-r.Context().Done() // etcd that accepted the connection and never answers
		return
	}
	io.WriteString(w, "upstream "+r.URL.Path)
}

func (u *upstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.paths...)
}

func probeGet(t *testing.T, srv *httptest.Server, method, path string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	// The client's own limit only keeps a broken handler from hanging the test; no assertion is on time.
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// probeServer serves the agent's probe handler, in the given agent state, in front of a recording
// stand-in for etcd's metrics listener; both close with the test.
func probeServer(t *testing.T, state string, running bool, upstreamTimeout time.Duration) (*upstream, *httptest.Server) {
	t.Helper()
	up := &upstream{}
	etcd := httptest.NewServer(up)
	t.Cleanup(etcd.Close)
	a := &Agent{}
	a.proc.setState(state, running)
	h, err := probeHandler(a, etcd.URL, upstreamTimeout)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return up, srv
}

func TestProbeForwardsOnlyProbePaths(t *testing.T) {
	up, srv := probeServer(t, "running", true, time.Second)

	for _, tc := range []struct {
		method, path string
		code         int
		forwarded    string
	}{
		{"GET", "/livez", 200, "GET /livez"},
		{"GET", "/readyz", 200, "GET /readyz"},
		{"GET", "/readyz?verbose", 200, "GET /readyz?verbose"},
		{"GET", "/metrics", 200, "GET /metrics"},
		{"GET", "/health", 404, ""},
		{"GET", "/version", 404, ""},
		{"GET", "/debug/pprof/", 404, ""},
		{"GET", "/v3/kv/range", 404, ""},
		{"GET", "/", 404, ""},
		{"GET", "/livez/", 404, ""},
		{"GET", "/metrics/../debug/pprof/heap", 404, ""},
		{"GET", "/%6Civez/../debug/pprof/", 404, ""},
		{"POST", "/livez", 404, ""},
		{"PUT", "/metrics", 404, ""},
		{"DELETE", "/readyz", 404, ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			before := len(up.seen())
			code, body := probeGet(t, srv, tc.method, tc.path)
			require.Equal(t, tc.code, code, body)
			seen := up.seen()[before:]
			if tc.forwarded == "" {
				require.Empty(t, seen, "nothing but the probe paths may reach etcd")
			} else {
				require.Equal(t, []string{tc.forwarded}, seen)
			}
		})
	}
}

func TestProbeAnswersItselfWhileEtcdIsNotRunning(t *testing.T) {
	up, srv := probeServer(t, "parked", false, time.Second)
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/livez", 200},
		{"GET", "/readyz", 503},
		{"GET", "/metrics", 503},
		{"GET", "/health", 404},
		{"POST", "/livez", 404},
	} {
		code, body := probeGet(t, srv, tc.method, tc.path)
		require.Equal(t, tc.code, code, "%s %s: %s", tc.method, tc.path, body)
	}
	require.Empty(t, up.seen())
}

// An etcd that accepts the connection and never answers gets a 503 from the probe port within the
// upstream timeout, not a request that hangs until the kubelet gives up.
func TestProbeUpstreamTimeout(t *testing.T) {
	_, srv := probeServer(t, "running", true, 200*time.Millisecond)
	code, body := probeGet(t, srv, "GET", "/readyz", "X-Hang", "1")
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.True(t, strings.HasPrefix(body, "etcd does not answer"), body)
}

func TestProbeServerTimeouts(t *testing.T) {
	s := NewProbeServer(http.NotFoundHandler())
	require.NotZero(t, s.ReadHeaderTimeout)
	require.NotZero(t, s.ReadTimeout)
	require.NotZero(t, s.IdleTimeout)
	require.NotZero(t, s.MaxHeaderBytes)
	require.Greater(t, s.WriteTimeout, probeUpstreamTimeout, "a forwarded answer must fit in the write timeout")
}

// A member drained before a planned stop answers /readyz 503 while etcd still runs (the client Service
// drops it), without asking etcd; /livez and /metrics still reach etcd (it is alive, and scraped). A new
// etcd start is ready again when etcd says so.
func TestProbeWhileDraining(t *testing.T) {
	up := &upstream{}
	etcd := httptest.NewServer(up)
	t.Cleanup(etcd.Close)
	a := &Agent{Log: slog.New(slog.DiscardHandler)}
	a.proc.setState("running", true)
	h, err := probeHandler(a, etcd.URL, time.Second)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	a.proc.drain(a.Log, "restarting to trust the CAs of the CA Secret", 0)
	code, body := probeGet(t, srv, "GET", "/readyz")
	require.Equal(t, 503, code)
	require.Contains(t, body, "draining: restarting to trust the CAs")
	for _, p := range []string{"/livez", "/metrics"} {
		code, _ := probeGet(t, srv, "GET", p)
		require.Equal(t, 200, code, p)
	}
	require.Equal(t, []string{"GET /livez", "GET /metrics"}, up.seen(), "/readyz is answered by the agent while draining")

	a.proc.setState("starting", false)
	a.proc.setState("running", true)
	code, _ = probeGet(t, srv, "GET", "/readyz")
	require.Equal(t, 200, code, "a new etcd is not draining")
}
