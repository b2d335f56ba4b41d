package membership

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/etcdhook/etcdhook/api"
)

// Why events.k8s.io/v1 (client-go's tools/events) and not core/v1 (tools/record): it is the current
// Events API, its objects are the same resource as core/v1 Events (so `kubectl describe etcdcluster`
// lists them: regarding becomes involvedObject), and its broadcaster writes with only create (a new
// event) and patch (a repeat folded into a series), the verbs the member and ops Roles grant on
// "events" in the group "events.k8s.io" (render.EventsRule). Unlike tools/record it has no spam filter of its own:
// KubeRecorder bounds it with a token bucket.

// Event budget of one process: a burst for a start that does many things at once (CA, certificates,
// join, promote), then one event a minute. The agent posts only on transitions, so the bucket matters
// only for a member whose state flaps (a crash loop, a Secret that comes and goes).
const (
	eventBurst = 20
	eventQPS   = 1.0 / 60
)

// KubeRecorder posts events on one EtcdCluster through client-go's events.k8s.io/v1 recorder.
type KubeRecorder struct {
	regarding   *corev1.ObjectReference
	recorder    events.EventRecorder
	broadcaster events.EventBroadcaster
	limiter     flowcontrol.RateLimiter
	stop        context.CancelFunc
	log         *slog.Logger

	mu      sync.Mutex
	posted  int // events handed to the recorder
	written int // sink calls made (create or patch, successful or not)
	wrote   chan struct{}
}

// NewKubeRecorder records as controller (the reporting controller, e.g. etcdhook-agent) on the
// EtcdCluster cluster in namespace. uid is the EtcdCluster's UID; `kubectl describe` selects events by
// UID when the object has one, so an event without it is listed by `kubectl get events` but not by
// describe. The recorder sends in the background until Close.
func NewKubeRecorder(client kubernetes.Interface, namespace, cluster, uid, controller string, log *slog.Logger) *KubeRecorder {
	return newKubeRecorder(&events.EventSinkImpl{Interface: client.EventsV1()}, namespace, cluster, uid, controller, log)
}

func newKubeRecorder(sink events.EventSink, namespace, cluster, uid, controller string, log *slog.Logger) *KubeRecorder {
	if log == nil {
		log = slog.Default()
	}
	k := &KubeRecorder{
		regarding: &corev1.ObjectReference{APIVersion: api.APIVersion, Kind: api.Kind, Namespace: namespace, Name: cluster, UID: types.UID(uid)},
		limiter:   flowcontrol.NewTokenBucketRateLimiter(eventQPS, eventBurst),
		log:       log,
		wrote:     make(chan struct{}, 1),
	}
	k.broadcaster = events.NewBroadcaster(&notifySink{EventSink: sink, k: k})
	ctx, cancel := context.WithCancel(context.Background())
	k.stop = cancel
	_ = k.broadcaster.StartRecordingToSinkWithContext(ctx) // fails only on a shut-down broadcaster
	k.recorder = k.broadcaster.NewRecorder(runtime.NewScheme(), controller)
	return k
}

// Event posts one event, unless the budget is spent (then it is only logged).
func (k *KubeRecorder) Event(reason, action, note string, warning bool) {
	if !k.limiter.TryAccept() {
		k.log.Warn("event dropped: too many events", "reason", reason, "note", note)
		return
	}
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	// events.k8s.io/v1 limits the note to 1 kB.
	if len(note) > 1000 {
		note = note[:1000]
	}
	k.mu.Lock()
	k.posted++
	k.mu.Unlock()
	k.recorder.Eventf(k.regarding, nil, typ, reason, action, "%s", note)
}

// Flush waits until every event posted so far has been sent to the API server once (or failed to be),
// at most timeout: a Job exits right after its work, and client-go sends in the background. A repeat
// that only raised an existing series' count is written later by client-go and not waited for.
func (k *KubeRecorder) Flush(timeout time.Duration) {
	deadline := time.After(timeout)
	for {
		k.mu.Lock()
		done := k.written >= k.posted
		k.mu.Unlock()
		if done {
			return
		}
		select {
		case <-k.wrote:
		case <-deadline:
			k.log.Warn("events not sent before exit", "timeout", timeout.String())
			return
		}
	}
}

// Close stops sending; events not sent yet are dropped.
func (k *KubeRecorder) Close() {
	k.stop()
	k.broadcaster.Shutdown()
}

// notifySink counts the writes, for Flush.
type notifySink struct {
	events.EventSink
	k *KubeRecorder
}

func (s *notifySink) done() {
	s.k.mu.Lock()
	s.k.written++
	s.k.mu.Unlock()
	select {
	case s.k.wrote <- struct{}{}:
	default:
	}
}

func (s *notifySink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	defer s.done()
	return s.EventSink.Create(ctx, e)
}

func (s *notifySink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	defer s.done()
	return s.EventSink.Patch(ctx, e, data)
}
