package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
	etcdsync "github.com/etcdhook/etcdhook/sync"
)

// worstBoundedBody is the costliest request the input bounds allow for a 9-member cluster: every Lease
// carries the longest member list the bound lets through (api.MaxReportedMembers members, 27 of them
// orphans of no ordinal), an agent error and alarms at their bounds. Before the bounds a hand-edited
// list was unbounded: this body is what the bounds promise the worst sync costs.
func worstBoundedBody(t testing.TB) []byte {
	t.Helper()
	body := mustRead(t, "testdata/bench/nine-members-scaling.request.json")
	var req map[string]any
	require.NoError(t, json.Unmarshal(body, &req))
	names := api.Names{Cluster: "demo", Namespace: "prod"}
	var ms []api.Member
	for i := range api.MaxReportedMembers {
		ms = append(ms, api.Member{ID: api.FormatID(0x8e9e05c521640000 + uint64(i)), Name: fmt.Sprintf("x%d", i),
			PeerURL: names.PeerURL(i) + strings.Repeat("/", 200), ClientURL: names.ClientURL(i), Started: true})
	}
	list, err := json.Marshal(ms)
	require.NoError(t, err)
	require.NoError(t, api.BoundMembers.Check(string(list)), "the list must be within its bound to be the worst case")
	var alarms []string
	for len(strings.Join(alarms, ",")) < api.AnnotationBound(api.AnnAlarms).Bytes-40 {
		alarms = append(alarms, fmt.Sprintf("NOSPACE@%016x", len(alarms)))
	}
	leases := req["children"].(map[string]any)["Lease.coordination.k8s.io/v1"].(map[string]any)
	for _, l := range leases {
		md := l.(map[string]any)["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
			md["annotations"] = ann
		}
		ann[api.AnnMembers] = string(list)
		ann[api.AnnError] = "WaitingForJoin: " + strings.Repeat("e", api.BoundText.Bytes-20)
		ann[api.AnnAlarms] = strings.Join(alarms, ",")
	}
	out, err := json.Marshal(req)
	require.NoError(t, err)
	return out
}

// leaseMembers is the 9-member request with one Lease's member list set to list.
func leaseMembers(t *testing.T, list string) []byte {
	t.Helper()
	var req map[string]any
	require.NoError(t, json.Unmarshal(mustRead(t, "testdata/bench/nine-members-scaling.request.json"), &req))
	l := req["children"].(map[string]any)["Lease.coordination.k8s.io/v1"].(map[string]any)["demo-0-member"]
	md := l.(map[string]any)["metadata"].(map[string]any)
	if md["annotations"] == nil {
		md["annotations"] = map[string]any{}
	}
	md["annotations"].(map[string]any)[api.AnnMembers] = list
	out, err := json.Marshal(req)
	require.NoError(t, err)
	return out
}

func postCtx(srv http.Handler, ctx context.Context, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/sync", bytes.NewReader(body)).WithContext(ctx)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	return rec
}

// The worst bounded request is answered, with its lists ignored and named, in about the size of the
// normal answer.
func TestWorstBoundedRequestIsAnswered(t *testing.T) {
	srv := fixtureServer()
	normal := postCtx(srv, context.Background(), mustRead(t, "testdata/bench/nine-members-scaling.request.json"))
	require.Equal(t, http.StatusOK, normal.Code)
	rec := postCtx(srv, context.Background(), worstBoundedBody(t))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Less(t, rec.Body.Len(), 2*normal.Body.Len())
}

// A request whose client has gone is not computed, and one past its deadline is abandoned: no answer
// (Metacontroller changes nothing on a 5xx) and the abandoned counter says so.
func TestAbandonedRequestIsNotComputed(t *testing.T) {
	body := mustRead(t, "testdata/bench/nine-members-scaling.request.json")
	srv := fixtureServer()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := postCtx(srv, ctx, body)
	require.NotEqual(t, http.StatusOK, rec.Code)
	require.NotContains(t, rec.Body.String(), `"children"`)
	require.Equal(t, 1.0, testutil.ToFloat64(srv.limitMetrics.abandoned.WithLabelValues("sync")))

	srv = New(Config{Options: etcdsync.Options{Image: fixtureImage}, Now: func() time.Time { return fixtureNow },
		Logger: discardLogger(), ComputeTimeout: time.Nanosecond})
	rec = postCtx(srv, context.Background(), body)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
	require.Equal(t, 1.0, testutil.ToFloat64(srv.limitMetrics.abandoned.WithLabelValues("sync")))
}

// A second computation of a parent while one runs is answered 429 at once, and the parent's turn is
// given back after each answer.
func TestOneComputationPerParent(t *testing.T) {
	srv := fixtureServer()
	require.True(t, srv.parents.acquire("prod/demo"))
	rec := postCtx(srv, context.Background(), mustRead(t, "testdata/bench/nine-members-scaling.request.json"))
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Contains(t, rec.Body.String(), "prod/demo")
	srv.parents.release("prod/demo")
	require.Equal(t, http.StatusOK, postCtx(srv, context.Background(), mustRead(t, "testdata/bench/nine-members-scaling.request.json")).Code)
	require.True(t, srv.parents.acquire("prod/demo"), "the turn was given back")
}

// elsewhere is body with every object moved to namespace ns: another parent, as far as fairness goes.
func elsewhere(t testing.TB, body []byte, ns string) []byte {
	t.Helper()
	var compact bytes.Buffer
	require.NoError(t, json.Compact(&compact, body))
	body = compact.Bytes()
	out := bytes.ReplaceAll(body, []byte(`"namespace":"prod"`), []byte(`"namespace":"`+ns+`"`))
	require.NotEqual(t, body, out)
	return out
}

// One parent sending the worst bounded requests, two at a time without pause (what a retrying client
// does), beside other parents' normal syncs: the others are never shed and their latency is reported.
// Before the bounds each of the pathological requests computed for seconds: the others waited out the
// queue and were shed. The queue wait here is long (2 s) so that only a computation that holds its
// slot for that long can shed anyone: the test does not depend on this machine's speed. Three clients
// need three places; the queue has four because a request that has just taken a slot still counts in
// the queue until it leaves it (limiter.acquire), for an instant.
func TestOneParentCannotStarveTheOthers(t *testing.T) {
	srv := New(Config{Options: etcdsync.Options{Image: fixtureImage}, Now: func() time.Time { return fixtureNow },
		Logger: discardLogger(), MaxInFlight: 2, MaxQueue: 4, QueueWait: 2 * time.Second})
	// The pathological parent alternates the worst bounded request with the attack the bounds stop: a
	// member list of 87k empty entries in a Lease (under the API server's 256 KiB per object).
	bad := [][]byte{worstBoundedBody(t), leaseMembers(t, "["+strings.TrimSuffix(strings.Repeat("{},", 87000), ",")+"]")}
	normal := mustRead(t, "testdata/bench/nine-members-scaling.request.json")
	const rounds = 150
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg gosync.WaitGroup
	var mu gosync.Mutex
	badCodes := map[int]int{}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				if ctx.Err() != nil {
					return
				}
				code := postCtx(srv, ctx, bad[i%2]).Code
				mu.Lock()
				badCodes[code]++
				mu.Unlock()
			}
		}()
	}
	var lat []time.Duration
	codes := map[int]int{}
	for i := range rounds {
		body := elsewhere(t, normal, fmt.Sprintf("other-%d", i%10))
		start := time.Now()
		rec := postCtx(srv, ctx, body)
		lat = append(lat, time.Since(start))
		codes[rec.Code]++
		if rec.Code != http.StatusOK {
			t.Logf("other parent's sync %d: %d %s", i, rec.Code, rec.Body.String())
		}
	}
	wg.Wait()
	require.NoError(t, ctx.Err(), "the run did not finish in its time bound")
	require.Equal(t, map[int]int{http.StatusOK: rounds}, codes, "other parents' syncs were shed or failed")
	slices.Sort(lat)
	t.Logf("other parents: %d syncs, latency p50 %s p99 %s max %s; the pathological parent's answers by code: %v",
		rounds, lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1], badCodes)
}
