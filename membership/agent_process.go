package membership

import (
	"sync"
	"syscall"
)

// process is the etcd this agent runs, as the probe port (another goroutine) and Kill see it: what the
// agent is doing, whether etcd answers, its process group, and whether it is being drained (drain.go).
// The zero value is ready: the probe server reads it before the agent runs.
type process struct {
	mu      sync.Mutex
	state   string // for probes and logs: waiting, starting, running, parked, refused
	running bool
	pid     int
	killed  bool
	// draining: why this member answers not ready while etcd still runs (drain.go), "" when it does not.
	draining string
}

// State is what the probe server reports while etcd is not running.
func (p *process) State() (state string, running bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state, p.running
}

// kill is a node crash: etcd gets SIGKILL, and the agent stops at its next look.
func (p *process) kill() {
	p.mu.Lock()
	p.killed = true
	pid := p.pid
	p.mu.Unlock()
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

func (p *process) isKilled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killed
}

func (p *process) setState(s string, running bool) {
	p.mu.Lock()
	p.state, p.running = s, running
	if s == "starting" {
		p.draining = "" // a new etcd: ready again once it says so
	}
	p.mu.Unlock()
}

// started records etcd's process group, and says whether the agent was killed meanwhile (then etcd is
// killed at once: Kill read no pid).
func (p *process) started(pid int) (killed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pid = pid
	return p.killed
}
