//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	etcdsync "github.com/etcdhook/etcdhook/sync"
)

func runtimeFromUnstructured(u *unstructured.Unstructured, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}

// clientEndpoint is the client Service, resolved by cluster DNS (the suite runs where it answers).
func (s *scenario) clientEndpoint() string { return s.names().ClientEndpoint() }

// podEndpoints are the client URLs of the member pods by IP.
func (s *scenario) podEndpoints() []string {
	var eps []string
	for _, p := range s.pods() {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			eps = append(eps, fmt.Sprintf("http://%s:%d", p.Status.PodIP, etcdsync.ClientPort))
		}
	}
	return eps
}

func newClient(eps []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
}

// writer writes through the client Service during a scenario: bounded in count and time, per-step
// failed writes and latency percentiles, every acknowledged key checked at the end.
type writer struct {
	s     *scenario
	cl    *clientv3.Client
	mu    sync.Mutex
	step  string
	order []string
	stats map[string]*wstats
	acked map[string]string
	stop  chan struct{}
	done  chan struct{}
}

type wstats struct {
	ok, failed int
	lat        []time.Duration
	began      time.Time
	took       time.Duration
}

const (
	writerMax      = 60000
	writerDuration = 30 * time.Minute
	writerEvery    = 50 * time.Millisecond
)

func (s *scenario) startWriter(first string) *writer {
	cl, err := newClient([]string{s.clientEndpoint()})
	require.NoError(s.t, err)
	w := &writer{s: s, cl: cl, stats: map[string]*wstats{}, acked: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	w.Step(first)
	go w.loop()
	s.t.Cleanup(w.Stop)
	return w
}

func (w *writer) loop() {
	defer close(w.done)
	end := time.Now().Add(writerDuration)
	for n := 0; n < writerMax && time.Now().Before(end); n++ {
		select {
		case <-w.stop:
			return
		case <-time.After(writerEvery):
		}
		key, val := fmt.Sprintf("e2e/%06d", n), fmt.Sprintf("v%d", n)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		t0 := time.Now()
		_, err := w.cl.Put(ctx, key, val)
		lat := time.Since(t0)
		cancel()
		w.mu.Lock()
		st := w.stats[w.step]
		if err != nil {
			st.failed++
		} else {
			st.ok++
			st.lat = append(st.lat, lat)
			w.acked[key] = val
		}
		w.mu.Unlock()
	}
}

func (w *writer) Step(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev := w.stats[w.step]; prev != nil && prev.took == 0 {
		prev.took = time.Since(prev.began)
	}
	w.step = name
	w.order = append(w.order, name)
	w.stats[name] = &wstats{began: time.Now()}
}

func (w *writer) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.mu.Lock()
	if st := w.stats[w.step]; st != nil && st.took == 0 {
		st.took = time.Since(st.began)
	}
	w.mu.Unlock()
	_ = w.cl.Close()
}

// Finish stops the writer, checks every acknowledged key through the client Service and that every
// member's hashkv agrees at one revision, and records the figures.
func (w *writer) Finish(extra string) {
	t := w.s.t
	w.Stop()
	cl, err := newClient([]string{w.s.clientEndpoint()})
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cl.Get(ctx, "e2e/", clientv3.WithPrefix())
	require.NoError(t, err)
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	lost := 0
	for k, v := range w.acked {
		if got[k] != v {
			lost++
		}
	}
	require.Zero(t, lost, "%d of %d acknowledged writes are not readable", lost, len(w.acked))
	w.s.checkHashKV(resp.Header.Revision)
	results.add(t.Name(), extra+w.table())
	t.Logf("\n%s%s", extra, w.table())
}

func (w *writer) table() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "| step | took | writes ok | failed | p50 | p99 |\n|---|---|---|---|---|---|\n")
	for _, name := range w.order {
		st := w.stats[name]
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s |\n", name, st.took.Round(100*time.Millisecond), st.ok, st.failed,
			pct(st.lat, 0.5).Round(100*time.Microsecond), pct(st.lat, 0.99).Round(100*time.Microsecond))
	}
	return b.String()
}

func pct(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*p)]
}

// checkHashKV asks every member for its KV hash at rev: all must agree.
func (s *scenario) checkHashKV(rev int64) {
	eps := s.podEndpoints()
	require.NotEmpty(s.t, eps)
	hashes := map[string]uint32{}
	for _, ep := range eps {
		cl, err := newClient([]string{ep})
		require.NoError(s.t, err)
		var h *clientv3.HashKVResponse
		for try := 0; try < 20; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			h, err = cl.HashKV(ctx, ep, rev)
			cancel()
			if err == nil {
				break
			}
			time.Sleep(500 * time.Millisecond) // a member may not have applied rev yet
		}
		cl.Close()
		require.NoError(s.t, err, "hashkv at %s", ep)
		hashes[ep] = h.Hash
	}
	var first uint32
	i := 0
	for _, h := range hashes {
		if i == 0 {
			first = h
		}
		require.Equal(s.t, first, h, "hashkv differs between members at revision %d: %v", rev, hashes)
		i++
	}
}

// memberList reads etcd's own member list through the client Service.
func (s *scenario) memberList() []etcdsync.Member {
	cl, err := newClient([]string{s.clientEndpoint()})
	require.NoError(s.t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.MemberList(ctx)
	require.NoError(s.t, err)
	var out []etcdsync.Member
	for _, m := range resp.Members {
		em := etcdsync.Member{ID: etcdsync.FormatID(m.ID), Name: m.Name, Learner: m.IsLearner}
		if len(m.PeerURLs) > 0 {
			em.PeerURL = m.PeerURLs[0]
		}
		out = append(out, em)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PeerURL < out[j].PeerURL })
	return out
}

func (s *scenario) memberIDs() map[int]string {
	out := map[int]string{}
	for _, m := range s.memberList() {
		out[s.names().PeerURLOrdinal(m.PeerURL)] = m.ID
	}
	return out
}


