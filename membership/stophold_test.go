package membership

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdhook/etcdhook/api"
)

// A leader stopped on purpose (issue 28, drain.go's holdClients): its clients are told to go, reconnect
// through the Service to the other members and have their writes answered there while the stopping
// member still leads; only then does it hand over. Proof: a client on the leader, writing every 10 ms
// through a proxy that no longer lists the leader (its drain done), has many writes acknowledged by
// another member in the term of the stopping leader. Without the hold etcd hands over within
// milliseconds of closing its connections, before the client is back, and there are next to none.
// Both of etcd's client servers: gRPC's graceful stop (plaintext) and HTTP/2's graceful shutdown (TLS).
func TestMembershipLeaderStopHold(t *testing.T) {
	forEachVersionParallel(t, func(t *testing.T, v string) {
		for _, tls := range []bool{false, true} {
			name := "plaintext"
			if tls {
				name = "tls"
			}
			t.Run(name, func(t *testing.T) {
				c := newClusterTLS(t, v, 3, tls)
				c.clientsMoveWait = time.Second
				c.bootstrap(nil, 3)
				ids := []string{c.memberID(0), c.memberID(1), c.memberID(2)}
				leaderID := c.leader()
				leader := slices.Index(ids, leaderID)
				require.GreaterOrEqual(t, leader, 0)

				// The client's one connection goes to the leader: the proxy lists only it at first.
				p := newServiceProxy(t)
				p.set(leader, hostOf(t, c.slots[leader].clientURL))
				scheme := "http://"
				if tls {
					scheme = "https://"
				}
				cfg := clientv3.Config{Endpoints: []string{scheme + p.addr}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
				if tls {
					cfg.TLS = ReloadingClientTLS(func() (map[string][]byte, error) {
						data, _, _, err := c.secrets.Get(context.Background(), c.identity())
						return data, err
					})
				}
				cl, err := clientv3.New(cfg)
				require.NoError(t, err)
				defer cl.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				first, err := cl.Put(ctx, "hold/first", "x")
				cancel()
				require.NoError(t, err)
				require.Equal(t, leaderID, api.FormatID(first.Header.MemberId), "the client is on the leader")
				oldTerm := first.Header.RaftTerm
				// The drain: new connections go to the others.
				p.drop(leader)
				for i := range c.slots {
					if i != leader {
						p.set(i, hostOf(t, c.slots[i].clientURL))
					}
				}

				var mu sync.Mutex
				movedInOldTerm, failed := 0, 0
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					for n := 0; n < 2000; n++ {
						select {
						case <-stop:
							return
						case <-time.After(10 * time.Millisecond):
						}
						ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
						resp, err := cl.Put(ctx, "hold/k", "v")
						cancel()
						mu.Lock()
						if err != nil {
							failed++
						} else if api.FormatID(resp.Header.MemberId) != leaderID && resp.Header.RaftTerm == oldTerm {
							movedInOldTerm++
						}
						mu.Unlock()
					}
				}()
				time.Sleep(200 * time.Millisecond)
				began := time.Now()
				require.NoError(t, c.stop(leader))
				took := time.Since(began)
				time.Sleep(500 * time.Millisecond)
				close(stop)
				<-done
				mu.Lock()
				defer mu.Unlock()
				t.Logf("the leader's stop took %s; writes answered by another member in its term: %d; failed: %d", took.Round(time.Millisecond), movedInOldTerm, failed)
				require.GreaterOrEqual(t, movedInOldTerm, 10,
					"the client moved to another member and was answered there while the stopping member still led")
				require.NotEqual(t, leaderID, c.leader(), "leadership moved")
			})
		}
	})
}
