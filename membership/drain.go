package membership

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Draining (issue 28, docs/design/07-steps.md §7.14): a member stopped on purpose leaves the client
// Service before its etcd stops. A restart in place (a CA rotation's, a peer URL's move) keeps its pod,
// so the pod stays a ready endpoint unless the agent says otherwise; a leaving member serves until it is
// removed. In both, clients that reconnect while etcd restarts or stops land on this pod, and requests
// fail (0.8 s windows of failed writes through the client Service in a CA rotation; "raft: stopped" in
// each shrink step). So: /readyz answers 503 from here on (probe.go), the kubelet counts the failures
// (readiness every second, 5 failures) and the endpoints drop the pod, and only then does etcd stop; its
// graceful stop finishes the requests in flight and closes its connections, the clients reconnect
// through the Service to the other members, and (held for that: holdClients) a leader hands over. A pod being deleted is dropped from
// the endpoints at once (terminating); only the propagation to the nodes is waited for.

// drain makes this member answer not ready for why, and waits d (not on a context: on SIGTERM the
// agent's context is already done, and the point is to wait before etcd stops).
func (a *Agent) drain(why string, d time.Duration) {
	a.mu.Lock()
	a.draining = why
	a.mu.Unlock()
	if d <= 0 {
		return
	}
	a.Log.Info("draining before etcd stops: not ready for the client Service", "why", why, "wait", d)
	time.Sleep(d)
}

// drainingFor is why this member answers not ready while etcd runs, "" when it does not.
func (a *Agent) drainingFor() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.draining
}

// holdKey is the key the hold watches: nothing writes it, the watch only keeps a stream open.
const holdKey = "\x00etcdhook/stop-hold"

// holdClients opens a watch on this member's etcd, to be ended by the returned func, or returns nil
// (no hold) when it cannot within a second. Why (issue 28, docs/design/07-steps.md §7.14): etcd's
// graceful stop closes its client connections and, a few milliseconds later, a leader hands over. Its
// clients reconnect through the Service to the other members in those milliseconds, and the writes
// they send first are forwarded to a leader in the middle of its transfer, which drops them without an
// answer: the client times out. etcd waits, before it goes on, for the streams open on its client
// server to end (a gRPC graceful stop, an HTTP/2 graceful shutdown under TLS, bounded by its request
// timeout); this watch is such a stream, so while it is open the clients move away and their writes
// are answered by the leader that is still leading, and only when it ends does the transfer begin.
func (a *Agent) holdClients() (release func()) {
	cl, err := a.Etcd.client([]string{a.Cfg.ClientURL})
	if err != nil {
		a.Log.Info("no hold before etcd stops", "error", err)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	wch := cl.Watch(ctx, holdKey, clientv3.WithCreatedNotify())
	select {
	case resp, ok := <-wch:
		if ok && resp.Created {
			return func() { cancel(); _ = cl.Close() }
		}
		err = fmt.Errorf("watch not created: %v", resp.Err())
	case <-time.After(time.Second):
		err = errors.New("watch not created within 1s")
	}
	cancel()
	_ = cl.Close()
	a.Log.Info("no hold before etcd stops", "error", err)
	return nil
}
