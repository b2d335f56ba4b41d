package hooks

import (
	"net/http"
	"strings"
	gosync "sync"
	"time"
)

// DefaultComputeTimeout bounds one sync's computation: below Metacontroller's hook timeout (10 s in
// metacontroller/compositecontroller.yaml), after which nobody reads the answer. With the input bounds
// (api/bounds.go) the worst sync takes a few milliseconds (docs/performance.md); the deadline is what
// stops a computation that still runs away, rather than a figure any request is expected to reach.
const DefaultComputeTimeout = 8 * time.Second

// parentGate lets at most max computations per parent run at once (one by default). The slots (limits.go) bound the work of
// all parents together; this bounds one parent's share of them, so a parent whose requests are
// pathological (a hand-edited Lease, a client that retries without waiting) holds at most one slot
// while it computes, and every other parent keeps the rest.
type parentGate struct {
	mu   gosync.Mutex
	max  int
	busy map[string]int
}

func newParentGate(max int) *parentGate { return &parentGate{max: max, busy: map[string]int{}} }

// acquire takes one of key's turns; false when max computations of key already run.
func (g *parentGate) acquire(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.busy[key] >= g.max {
		return false
	}
	g.busy[key]++
	return true
}

func (g *parentGate) release(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.busy[key]--; g.busy[key] <= 0 {
		delete(g.busy, key)
	}
}

// hookName is the hook a request is for, as the metrics label it.
func hookName(r *http.Request) string { return strings.TrimPrefix(r.URL.Path, "/") }
