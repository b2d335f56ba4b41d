package hooks

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

// BenchmarkSync measures one /sync through the HTTP handler (decode, decide, render, encode) for a
// steady 3-member cluster, a 9-member one scaling and settled, and the worst request the input bounds
// allow. Results are in docs/performance.md (make bench).
func BenchmarkSync(b *testing.B) {
	for _, bc := range []struct{ name, file string }{
		{"members=3", "testdata/sync/metacontroller-last-applied.request.json"},
		{"members=9", "testdata/bench/nine-members-scaling.request.json"},
		{"members=9,idle", "testdata/bench/nine-members-idle.request.json"},
		// The costliest request the input bounds allow (fairness_test.go): the worst sync.
		{"members=9,worst-bounded", ""},
	} {
		var err error
		var body []byte
		if bc.file == "" {
			body = worstBoundedBody(b)
		} else if body, err = os.ReadFile(bc.file); err != nil {
			b.Fatal(err)
		}
		srv := fixtureServer()
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/sync", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				srv.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body.String())
				}
			}
		})
	}
}

// BenchmarkScan is the pass that counts objects and array elements before decoding (sync.Shape), on the largest
// real request: /customize bodies and bodies that are not JSON get it; a /sync body is counted by the
// pass that checks it as JSON (sync.CheckBody). Compare with BenchmarkSync/members=9.
func BenchmarkScan(b *testing.B) {
	body, err := os.ReadFile("testdata/bench/nine-members-scaling.request.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if sh := scan(body); sh.Objects != 39 || sh.Elements != 210 {
			b.Fatal("miscounted")
		}
	}
}
