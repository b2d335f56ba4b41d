package hooks

import (
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Bounds on the work one request, and all requests together, can cause. Measured in docs/performance.md (Load).
const (
	// MaxBodyBytes is the default bound on a request body. A 9-member cluster's sync request, the
	// largest there is, is 88 KB (testdata/bench/nine-members-scaling.request.json); managedFields can
	// triple that. 1 MiB is four times that worst case and still caps what one request costs to decode
	// (about 12 times the body in allocations).
	MaxBodyBytes = 1 << 20
	// MaxObjects is the default bound on the child and related objects one request lists. A 9-member
	// cluster has 39 (one StatefulSet, two Services, a PDB, a NetworkPolicy, a ConfigMap, nine Leases, two
	// each of ServiceAccount, Role and RoleBinding, nine Pods, nine claims), a few more while Jobs run or old
	// claims wait for deletion. 1000 is far above any real cluster, and such a request costs about
	// 25 ms and 5 MB; before this bound 45k small objects in 8 MB took 0.8 s of CPU and 300 MB each.
	MaxObjects = 1000
	// MaxElements is the default bound on the array elements of one request, anywhere in it. The
	// 9-member request has 151 (containers, ports, volumes, conditions, owner references...);
	// managedFields add a few per object. Typed decoding turns each "{}" into a struct of up to a few
	// hundred bytes, plus the slices' regrowth: a 1 MiB body of 330k empty containers allocated 730 MB.
	// 10000 elements is 40 times a real request and bounds that to about 20 MB.
	MaxElements = 10000
	// RetryAfterSeconds is what a shed request is told. Metacontroller reads Retry-After on a 429 and
	// requeues the parent after that many whole seconds (no error event, no exponential backoff); 0 or
	// no header would requeue it at once, so 1 is the least that relieves the hook.
	RetryAfterSeconds = 1
)

// DefaultMaxInFlight is the default number of hook computations at once: two per usable CPU, so that a
// request whose body is still arriving (a slot is taken before the body is read) does not idle a core,
// and few enough that their memory is bounded.
func DefaultMaxInFlight() int { return 2 * runtime.GOMAXPROCS(0) }

// Default wait queue in front of the computations: as many waiters as slots, each waiting at most
// DefaultQueueWait (about four 9-member syncs) before being shed. Measured in docs/performance.md (Load): the
// queue gives more 200s and a lower p99 under overload than shedding as soon as the slots are full.
const DefaultQueueWait = 20 * time.Millisecond

// limiter bounds the requests being computed (slots) and those waiting for a slot (queue, each for at
// most wait). Past both it sheds at once: Metacontroller retries after Retry-After, so holding a
// request longer only adds its memory and latency to everyone else's.
type limiter struct {
	slots chan struct{}
	queue chan struct{}
	wait  time.Duration
}

func newLimiter(inFlight, queue int, wait time.Duration) *limiter {
	if queue < 0 || wait <= 0 {
		queue = 0
	}
	return &limiter{slots: make(chan struct{}, inFlight), queue: make(chan struct{}, queue), wait: wait}
}

// acquire takes a slot, waiting in the queue if there is room there; false means shed.
func (l *limiter) acquire(r *http.Request) bool {
	select {
	case l.slots <- struct{}{}:
		return true
	default:
	}
	select {
	case l.queue <- struct{}{}:
	default:
		return false
	}
	defer func() { <-l.queue }()
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-r.Context().Done():
		return false
	}
}

func (l *limiter) release() { <-l.slots }

// limit runs a hook within the limiter and answers 429 Too Many Requests with Retry-After when it
// sheds. It comes before the body is read, so a shed request costs no body buffer.
func (s *Server) limit(hook string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !s.limiter.acquire(r) {
				s.limitMetrics.shed.WithLabelValues(hook).Inc()
				w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
				writeError(w, http.StatusTooManyRequests, "too many requests in flight: retry later")
				return
			}
			defer s.limiter.release()
			s.limitMetrics.inFlight.Inc()
			defer s.limitMetrics.inFlight.Dec()
			next.ServeHTTP(w, r)
		})
	}
}

type limitMetrics struct {
	shed     *prometheus.CounterVec
	inFlight prometheus.Gauge
	// parentBusy: answered 429 because a computation of the same parent ran (fairness.go); abandoned:
	// computations stopped because the client went away or the deadline passed.
	parentBusy *prometheus.CounterVec
	abandoned  *prometheus.CounterVec
}

func newLimitMetrics(reg *prometheus.Registry, l *limiter) limitMetrics {
	m := limitMetrics{
		shed: hookCounter("etcdhook_hook_shed_total",
			"Hook requests answered 429 because the computations and their wait queue were full."),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "etcdhook_hook_in_flight",
			Help: "Hook requests being computed.",
		}),
		parentBusy: hookCounter("etcdhook_hook_parent_busy_total",
			"Hook requests answered 429 because a computation of the same parent was running."),
		abandoned: hookCounter("etcdhook_hook_abandoned_total",
			"Hook computations stopped because the client went away or the compute deadline passed."),
	}
	reg.MustRegister(m.shed, m.inFlight, m.parentBusy, m.abandoned,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "etcdhook_hook_max_in_flight", Help: "The bound on hook requests computed at once.",
		}, func() float64 { return float64(cap(l.slots)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "etcdhook_hook_queued", Help: "Hook requests waiting for a computation slot.",
		}, func() float64 { return float64(len(l.queue)) }))
	return m
}

// hookCounter is a counter of hook requests labelled by hook (sync, finalize, customize): the
// limiter's three counters are all of that one kind.
func hookCounter(name, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"hook"})
}
