package hooks

import (
	"bytes"
	"encoding/json"
	"io"
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

// BenchmarkFloor is what the least JSON hook must spend on the 9-member request, through the same
// httptest path as BenchmarkSync: read the body, decode it into map[string]any with encoding/json,
// encode a small answer (cmd/loadtest's floor server). The CPU budget of a sync is a multiple of it.
func BenchmarkFloor(b *testing.B) {
	body, err := os.ReadFile("testdata/bench/nine-members-scaling.request.json")
	if err != nil {
		b.Fatal(err)
	}
	floor := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req map[string]any
		if err := json.Unmarshal(in, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, _ := json.Marshal(map[string]any{"status": map[string]any{"phase": "Running"}, "children": []any{},
			"resyncAfterSeconds": 30, "finalized": false, "groups": len(req)})
		_, _ = w.Write(out)
	})
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/sync", bytes.NewReader(body))
		rec := httptest.NewRecorder()
		floor.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
}
