package membership

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// BenchmarkLeaderStop measures what a planned stop of the leader costs a client that does not retry
// (issue 28): a TLS client reaches the three members of a real etcd (the newest version) through a
// proxy that spreads new connections over the members it lists, as a client Service does, and reads
// its certificates at every handshake with a delay (ETCDHOOK_BENCH_HANDSHAKE, default 20 ms: the API
// read of a client following its Secret); it writes every ETCDHOOK_BENCH_EVERY (default 50 ms, the e2e
// writer's pace). Each iteration takes the leader out of the proxy (its drain done), stops its agent
// as a pod deletion does and starts it again. The failed writes are counted apart for the stops of the
// member the writer's connection was on and of the others. A load run, not a test:
// `go test ./membership -run - -bench LeaderStop -benchtime 20x`.
func BenchmarkLeaderStop(b *testing.B) {
	every := benchEnv("ETCDHOOK_BENCH_EVERY", 50*time.Millisecond, time.Nanosecond)
	handshake := benchEnv("ETCDHOOK_BENCH_HANDSHAKE", 20*time.Millisecond, 0)
	c := bootstrapped(b, newestEtcd, 3)
	p := newServiceProxy(b)
	for i, s := range c.slots {
		p.set(i, hostOf(b, s.clientURL))
	}
	cfg := clientv3.Config{Endpoints: []string{"https://" + p.addr}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
	cfg.TLS = ReloadingClientTLS(func() (map[string][]byte, error) {
		time.Sleep(handshake)
		data, _, _, err := c.secrets.Get(context.Background(), c.identity())
		return data, err
	})
	cl, err := clientv3.New(cfg)
	require.NoError(b, err)
	defer cl.Close()
	w := startBenchWriter(cl, "ls/", every)
	defer w.Stop()
	ids := []string{c.memberID(0), c.memberID(1), c.memberID(2)}
	var own, others []string
	b.ResetTimer()
	for i := range b.N {
		leader := slices.Index(ids, c.leader())
		require.GreaterOrEqual(b, leader, 0, "the leader is one of the three")
		step := fmt.Sprintf("stop %d of member %d", i, leader)
		if p.current() == leader {
			own = append(own, step)
		} else {
			others = append(others, step)
		}
		w.Step(step)
		// The member's drain: no new connection reaches it; the ones it has stay until etcd closes them.
		p.drop(leader)
		require.NoError(b, c.stop(leader))
		c.start(leader, 0)
		c.waitFor("the member back as a voter", stepMax, func() bool { return c.voters(0, 1, 2) })
		p.set(leader, hostOf(b, c.slots[leader].clientURL))
		// Past the client's timeout for writes dropped without an answer.
		time.Sleep(2500 * time.Millisecond)
	}
	ownFailed, othersFailed := reportFailed(b, w, "stop", own, others)
	b.Logf("%d stops of the leader (%d of the member the writer was on, %d of another), a write every %s, handshakes %s: %d failed (%d, %d)\n%s",
		b.N, len(own), len(others), every, handshake, ownFailed+othersFailed, ownFailed, othersFailed, w.Table())
}

// serviceProxy spreads new TCP connections over the members it lists, at random, as kube-proxy does
// for a ClusterIP Service; a connection stays on its member until one side closes it.
type serviceProxy struct {
	addr string
	mu   sync.Mutex
	to   map[int]string
	last int // the member of the newest connection
}

func newServiceProxy(b testing.TB) *serviceProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	p := &serviceProxy{addr: l.Addr().String(), to: map[int]string{}, last: -1}
	b.Cleanup(func() { l.Close() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go p.serve(in)
		}
	}()
	return p
}

func (p *serviceProxy) serve(in net.Conn) {
	defer in.Close()
	p.mu.Lock()
	var keys []int
	for k := range p.to {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		p.mu.Unlock()
		return
	}
	k := keys[rand.IntN(len(keys))]
	addr := p.to[k]
	p.last = k
	p.mu.Unlock()
	out, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer out.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
}

func (p *serviceProxy) set(i int, addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.to[i] = addr
}

func (p *serviceProxy) drop(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.to, i)
}

func (p *serviceProxy) current() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func hostOf(b testing.TB, raw string) string {
	u, err := url.Parse(raw)
	require.NoError(b, err)
	return u.Host
}
