package membership

import (
	"log/slog"
	"time"
)

// Draining (issue 28, docs/design/07-steps.md §7.14): a member stopped on purpose leaves the client
// Service before its etcd stops. A restart in place (a CA rotation's, a peer URL's move) keeps its pod,
// so the pod stays a ready endpoint unless the agent says otherwise; a leaving member serves until it is
// removed. In both, clients that reconnect while etcd restarts or stops land on this pod, and requests
// fail (0.8 s windows of failed writes through the client Service in a CA rotation; "raft: stopped" in
// each shrink step). So: /readyz answers 503 from here on (probe.go), the kubelet counts the failures
// (readiness every second, 5 failures) and the endpoints drop the pod, and only then does etcd stop; its
// graceful stop finishes the requests in flight, hands leadership over and closes its connections, and
// the clients reconnect through the Service to the other members. A pod being deleted is dropped from
// the endpoints at once (terminating); only the propagation to the nodes is waited for.

// drain makes this member answer not ready for why, and waits d (not on a context: on SIGTERM the
// agent's context is already done, and the point is to wait before etcd stops).
func (p *process) drain(log *slog.Logger, why string, d time.Duration) {
	p.mu.Lock()
	p.draining = why
	p.mu.Unlock()
	if d <= 0 {
		return
	}
	log.Info("draining before etcd stops: not ready for the client Service", "why", why, "wait", d)
	time.Sleep(d)
}

// drainingFor is why this member answers not ready while etcd runs, "" when it does not.
func (p *process) drainingFor() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.draining
}
