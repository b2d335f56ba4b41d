package hooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/internal/fixture"
	etcdsync "github.com/etcdhook/etcdhook/sync"
)

// Frozen clock and image of the fixture server; e2e/fixtures.sh starts `etcdhook serve` with the same.
var (
	fixtureNow   = fixture.Now
	fixtureImage = fixture.Image
)

func fixtureServer() *Server {
	return New(Config{
		Options: etcdsync.Options{Image: fixtureImage},
		Now:     func() time.Time { return fixtureNow },
		Logger:  discardLogger(),
	})
}

// TestFixtures posts every request in testdata/<hook>/ to the handler and compares the answer with the
// expected file exactly (after the canonical form jq -S gives), or the status code with the .code file.
func TestFixtures(t *testing.T) {
	srv := fixtureServer()
	files, err := filepath.Glob("testdata/*/*.request.json")
	require.NoError(t, err)
	// Every hook and the benchmark inputs have fixtures here (sync's TestFixturesUpToDate keeps the set
	// equal to its list).
	hooks := map[string]bool{}
	for _, f := range files {
		hooks[filepath.Base(filepath.Dir(f))] = true
	}
	require.Equal(t, map[string]bool{"sync": true, "customize": true, "finalize": true, "bench": true}, hooks)
	for _, f := range files {
		base := strings.TrimSuffix(f, ".request.json")
		hook := filepath.Base(filepath.Dir(f))
		t.Run(hook+"/"+filepath.Base(base), func(t *testing.T) {
			body := mustRead(t, f)
			path := "/" + hook
			if hook == "bench" { // benchmark inputs are sync requests
				path = "/sync"
			}
			req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if code, err := os.ReadFile(base + ".code"); err == nil {
				want, _ := strconv.Atoi(strings.TrimSpace(string(code)))
				require.Equal(t, want, rec.Code, rec.Body.String())
				var e map[string]string
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
				require.NotEmpty(t, e["error"])
				return
			}
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			want := mustRead(t, base+".response.json")
			require.Equal(t, string(want), string(canonical(t, rec.Body.Bytes())))
		})
	}
}

func canonical(t testing.TB, b []byte) []byte {
	var v any
	require.NoError(t, json.Unmarshal(b, &v))
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return out.Bytes()
}

// Requests answered at the same time get their own answers: bodies, answers and the children's
// buffers are pooled and reused across requests (handlers.go).
func TestConcurrentSyncsKeepTheirAnswers(t *testing.T) {
	srv := New(Config{
		Options:     etcdsync.Options{Image: fixtureImage},
		Now:         func() time.Time { return fixtureNow },
		Logger:      discardLogger(),
		MaxInFlight: 8,
		// The same parents, computed at once on purpose: what is tested is that answers share no buffer.
		MaxInFlightPerParent: 8,
	})
	var bodies, wants [][]byte
	for _, name := range []string{"bench/nine-members-idle", "bench/nine-members-scaling", "sync/metacontroller-last-applied"} {
		body := mustRead(t, "testdata/"+name+".request.json")
		want := mustRead(t, "testdata/"+name+".response.json")
		bodies, wants = append(bodies, body), append(wants, want)
	}
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for n := range 15 {
				k := (g + n) % len(bodies)
				req := httptest.NewRequest(http.MethodPost, "/sync", bytes.NewReader(bodies[k]))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				srv.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					errs <- fmt.Errorf("status %d: %s", rec.Code, rec.Body.String())
					return
				}
				var v any
				if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
					errs <- err
					return
				}
				var got bytes.Buffer
				enc := json.NewEncoder(&got)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false)
				if err := enc.Encode(v); err != nil || !bytes.Equal(got.Bytes(), wants[k]) {
					errs <- fmt.Errorf("answer %d differs from its fixture", k)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		require.NoError(t, <-errs)
	}
}

// mustRead is a test file's content; a file that cannot be read fails the test.
func mustRead(t testing.TB, f string) []byte {
	t.Helper()
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	return b
}

// eachRequestFixture calls check with the path and body of every request fixture (all hooks and the
// benchmark inputs): the scan's counts are checked against a slow count of each.
func eachRequestFixture(t *testing.T, check func(f string, body []byte)) {
	t.Helper()
	files, err := filepath.Glob("testdata/*/*.request.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		check(f, mustRead(t, f))
	}
}
