package hooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	etcdsync "github.com/etcdhook/etcdhook/sync"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// blocked serves /block within the same limiter as the hooks, and holds each request until release is
// closed: the slots it holds are what a slow computation would hold.
type blocked struct {
	entered chan struct{}
	release chan struct{}
}

func blockingServer(t *testing.T, cfg Config) (*Server, *blocked) {
	t.Helper()
	cfg.Options = etcdsync.Options{Image: fixtureImage}
	cfg.Now = func() time.Time { return fixtureNow }
	cfg.Logger = discardLogger()
	srv := New(cfg)
	b := &blocked{entered: make(chan struct{}, 16), release: make(chan struct{})}
	srv.router.With(srv.instrument("block"), srv.limit("block")).Post("/block", func(w http.ResponseWriter, _ *http.Request) {
		b.entered <- struct{}{}
		<-b.release
		writeJSON(w, http.StatusOK, map[string]string{})
	})
	return srv, b
}

// fill starts n requests to /block and waits until each holds a slot; the returned channel yields their
// status codes once release is closed.
func (b *blocked) fill(t *testing.T, srv http.Handler, n int) <-chan int {
	t.Helper()
	codes := make(chan int, n)
	for range n {
		go func() {
			req := httptest.NewRequest(http.MethodPost, "/block", strings.NewReader(`{}`))
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			codes <- rec.Code
		}()
	}
	for range n {
		<-b.entered
	}
	return codes
}

func TestShedWith429WhenEverySlotIsTaken(t *testing.T) {
	srv, b := blockingServer(t, Config{MaxInFlight: 2, MaxQueue: -1})
	valid := mustRead(t, "testdata/sync/new-cluster.request.json")
	codes := b.fill(t, srv, 2)

	for _, path := range []string{"/sync", "/finalize", "/customize"} {
		rec := post(t, srv, path, "application/json", valid)
		require.Equal(t, http.StatusTooManyRequests, rec.Code, path)
		require.Equal(t, "1", rec.Header().Get("Retry-After"), "Metacontroller requeues after Retry-After seconds; 0 would be at once")
		var e map[string]string
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
		require.Contains(t, e["error"], "too many requests")
	}

	close(b.release)
	require.Equal(t, 200, <-codes)
	require.Equal(t, 200, <-codes)
	require.Equal(t, 200, post(t, srv, "/sync", "application/json", valid).Code, "slots are given back")

	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	require.Contains(t, body, `etcdhook_hook_requests_total{code="429",hook="sync"} 1`)
	require.Contains(t, body, `etcdhook_hook_shed_total{hook="finalize"} 1`)
	require.Contains(t, body, `etcdhook_hook_max_in_flight 2`)
	require.Contains(t, body, `etcdhook_hook_in_flight 0`)
}

func TestQueueWaitsForASlotThenSheds(t *testing.T) {
	srv, b := blockingServer(t, Config{MaxInFlight: 1, MaxQueue: 1, QueueWait: time.Hour})
	valid := mustRead(t, "testdata/sync/new-cluster.request.json")
	codes := b.fill(t, srv, 1)

	// The next request waits in the queue (its one place)...
	queued := make(chan *httptest.ResponseRecorder, 1)
	go func() { queued <- post(t, srv, "/sync", "application/json", valid) }()
	require.Eventually(t, func() bool { return len(srv.limiter.queue) == 1 }, 10*time.Second, time.Millisecond)
	// ...so the one after it is shed at once, although the queue wait is an hour.
	rec := post(t, srv, "/sync", "application/json", valid)
	require.Equal(t, http.StatusTooManyRequests, rec.Code)

	close(b.release)
	require.Equal(t, 200, <-codes)
	require.Equal(t, 200, (<-queued).Code, "the queued request gets the slot given back")
	require.Empty(t, srv.limiter.queue)
}

func TestQueueWaitRunsOut(t *testing.T) {
	srv, b := blockingServer(t, Config{MaxInFlight: 1, MaxQueue: 4, QueueWait: time.Millisecond})
	codes := b.fill(t, srv, 1)
	// The slot is held until release: the wait runs out whatever the scheduling.
	rec := post(t, srv, "/customize", "application/json", []byte(`{}`))
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
	close(b.release)
	require.Equal(t, 200, <-codes)
}

// manyObjects builds a sync request with n Pods (each an empty object) as its related objects, under
// relatedKey, besides the children of a real request.
func manyObjects(t *testing.T, n int, relatedKey string) []byte {
	t.Helper()
	valid := mustRead(t, "testdata/sync/new-cluster.request.json")
	var req map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(valid, &req))
	pods := map[string]json.RawMessage{}
	for i := range n {
		pods[fmt.Sprintf("p%d", i)] = json.RawMessage(`{}`)
	}
	b, err := json.Marshal(map[string]map[string]json.RawMessage{wire.KeyPod: pods, wire.KeyPVC: {}})
	require.NoError(t, err)
	delete(req, "related")
	req[relatedKey] = b
	out, err := json.Marshal(req)
	require.NoError(t, err)
	return out
}

func TestTooManyObjectsGets413BeforeDecoding(t *testing.T) {
	srv := fixtureServer()
	// Exactly at the bound: decoded and answered (422 or 200, not 413).
	rec := post(t, srv, "/sync", "application/json", manyObjects(t, MaxObjects-countObjectsOf(t, "testdata/sync/new-cluster.request.json"), "related"))
	require.NotEqual(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
	// encoding/json matches keys case-insensitively and after unescaping: every spelling is counted.
	for _, key := range []string{"related", "Related", `rel\u0061ted`} {
		t.Run(key, func(t *testing.T) {
			body := manyObjects(t, MaxObjects+1, key)
			body = bytes.Replace(body, []byte(`"`+strings.ReplaceAll(key, `\`, `\\`)+`"`), []byte(`"`+key+`"`), 1)
			rec := post(t, srv, "/sync", "application/json", body)
			require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
			var e map[string]string
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
			require.Contains(t, e["error"], "child and related objects, over the 1000")
		})
	}
	// Refused before decoding: a handful of allocations (the body, the answer), not thousands.
	body := manyObjects(t, MaxObjects+1, "related")
	allocs := testing.AllocsPerRun(5, func() {
		if post(t, srv, "/sync", "application/json", body).Code != http.StatusRequestEntityTooLarge {
			t.Fatal("not refused")
		}
	})
	require.Less(t, allocs, 200.0)
	// The bound is configurable.
	small := New(Config{Options: etcdsync.Options{Image: fixtureImage}, Now: func() time.Time { return fixtureNow },
		Logger: discardLogger(), MaxObjects: 10})
	valid := mustRead(t, "testdata/bench/nine-members-scaling.request.json")
	require.Equal(t, http.StatusRequestEntityTooLarge, post(t, small, "/sync", "application/json", valid).Code)
	require.Equal(t, http.StatusOK, post(t, srv, "/sync", "application/json", valid).Code)
}

func TestBodyBoundIsConfigurable(t *testing.T) {
	valid := mustRead(t, "testdata/bench/nine-members-scaling.request.json")
	srv := New(Config{Options: etcdsync.Options{Image: fixtureImage}, Now: func() time.Time { return fixtureNow },
		Logger: discardLogger(), MaxBodyBytes: int64(len(valid) - 1)})
	rec := post(t, srv, "/sync", "application/json", valid)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	require.Contains(t, rec.Body.String(), "over")
	require.Less(t, len(valid)*4, MaxBodyBytes, "the default leaves room for managedFields tripling the largest request")

	// Without a Content-Length (chunked), the bound holds while reading.
	req := httptest.NewRequest(http.MethodPost, "/sync", io.MultiReader(bytes.NewReader(valid)))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	rec = httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	// And a body under the bound is read whole either way.
	req = httptest.NewRequest(http.MethodPost, "/sync", io.MultiReader(bytes.NewReader(valid)))
	req.ContentLength = -1
	rec = httptest.NewRecorder()
	fixtureServer().ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}

func countObjectsOf(t *testing.T, file string) int {
	t.Helper()
	b := mustRead(t, file)
	return scan(b).Objects
}

// decodedObjects is what decoding sees: the objects of every child and related group.
func decodedObjects(body []byte) (int, bool) {
	var req etcdsync.Request
	if json.Unmarshal(body, &req) != nil {
		return 0, false
	}
	n := 0
	for _, g := range req.Children {
		n += len(g)
	}
	for _, g := range req.Related {
		n += len(g)
	}
	return n, true
}

// Every fixture's count is exact; the bench request is the largest cluster there is.
func TestCountObjectsOnFixtures(t *testing.T) {
	eachRequestFixture(t, func(f string, b []byte) {
		if want, ok := decodedObjects(b); ok {
			require.Equal(t, want, scan(b).Objects, f)
		}
	})
	require.Equal(t, 39, countObjectsOf(t, "testdata/bench/nine-members-scaling.request.json"))
	for _, tc := range []struct {
		body string
		want int
	}{
		{``, 0},
		{`[]`, 0},
		{`{"children":{"a":{"x":{},"y":1}},"related":{"b":{"z":"}"}}}`, 3},
		{`{"parent":{"a":{"b":{}}},"controller":{"a":{"b":{}}},"finalizing":true}`, 0},
		{`{"PARENT":{"a":{"b":{}}}}`, 1},
		{`{"children":{"a":{"x\"y":{"s":"\\"}, "w" : [ {"}":"{"} ] }}}`, 2},
		{`{"children":{"a":{"x":{}`, 1},
	} {
		require.Equal(t, tc.want, scan([]byte(tc.body)).Objects, tc.body)
	}
}

// genericElements counts the array elements of a JSON value the slow way.
func genericElements(v any) int {
	n := 0
	switch v := v.(type) {
	case []any:
		n += len(v)
		for _, e := range v {
			n += genericElements(e)
		}
	case map[string]any:
		for _, e := range v {
			n += genericElements(e)
		}
	}
	return n
}

func TestScanCountsArrayElements(t *testing.T) {
	eachRequestFixture(t, func(f string, b []byte) {
		var v map[string]any
		if json.Unmarshal(b, &v) == nil {
			require.Equal(t, genericElements(v), scan(b).Elements, f)
		}
	})
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"parent":[]}`, 0},
		{`{"parent":[ ]}`, 0},
		{`{"parent":[1]}`, 1},
		{`{"parent":[1, [], [ {} , "]," ], {"a":[1,2],"b":3}], "c":{"d":{"e":{"f":[true,false]}}}}`, 10},
		{`{"parent":` + strings.Repeat(`[`, 300) + `1,2` + strings.Repeat(`]`, 300) + `}`, 301},
	} {
		require.Equal(t, tc.want, scan([]byte(tc.body)).Elements, tc.body)
	}
}

// The dense-array request: under the body bound and with one object, but 330k empty containers that
// typed decoding turned into 730 MB of allocations. Refused before decoding.
func TestManyArrayElementsGet413(t *testing.T) {
	srv := fixtureServer()
	pod := `{"spec":{"containers":[` + strings.Repeat(`{},`, 330000) + `{}]}}`
	body := manyObjects(t, 0, "related")
	body = bytes.Replace(body, []byte(`"Pod.v1":{}`), []byte(`"Pod.v1":{"p":`+pod+`}`), 1)
	require.Less(t, len(body), MaxBodyBytes)
	require.Equal(t, 1, scan(body).Objects)
	rec := post(t, srv, "/sync", "application/json", body)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "330001 array elements, over the 10000")
	// The largest real request is far below the bound.
	require.Less(t, 40*scan(mustRead(t, "testdata/bench/nine-members-scaling.request.json")).Elements, MaxElements+1000)
}

// scan is the server's count of a body (sync.Shape; a body that is not JSON is counted up to where it
// fails).
func scan(b []byte) wire.BodyShape {
	sh, _ := wire.Shape(b)
	return sh
}

// FuzzScan: whatever the body, the counts are never below what decoding would see: objects in the
// request's groups, and array elements in any valid JSON.
func FuzzScan(f *testing.F) {
	files, _ := filepath.Glob("testdata/sync/*.request.json")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil && len(b) < 2000 {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"Children":{"a":{"x":{}}},"rel\u0061ted":{"b":{"y":{}}}}`))
	f.Add([]byte(`{"parent":[1,[[],{"a":[2,"]"]}]]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		sh := scan(body)
		if want, ok := decodedObjects(body); ok && sh.Objects < want {
			t.Fatalf("counted %d objects, decoding sees %d", sh.Objects, want)
		}
		var v any
		if json.Unmarshal(body, &v) == nil {
			if want := genericElements(v); sh.Elements < want {
				t.Fatalf("counted %d array elements, decoding sees %d", sh.Elements, want)
			}
		}
	})
}
