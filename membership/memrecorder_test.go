package membership

import "sync"

// RecordedEvent is one event a MemRecorder kept.
type RecordedEvent struct {
	Reason, Action, Note string
	Warning              bool
}

// MemRecorder keeps events in memory, for tests (and for anyone who wants to look at what would be
// posted).
type MemRecorder struct {
	mu     sync.Mutex
	events []RecordedEvent
}

// Event keeps the event.
func (m *MemRecorder) Event(reason, action, note string, warning bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, RecordedEvent{Reason: reason, Action: action, Note: note, Warning: warning})
}

// Events returns a copy of what was recorded, in order.
func (m *MemRecorder) Events() []RecordedEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]RecordedEvent(nil), m.events...)
}

// Reasons returns the reasons recorded, in order.
func (m *MemRecorder) Reasons() []string {
	var r []string
	for _, e := range m.Events() {
		r = append(r, e.Reason)
	}
	return r
}

// Count returns how many events with reason were recorded.
func (m *MemRecorder) Count(reason string) int {
	n := 0
	for _, e := range m.Events() {
		if e.Reason == reason {
			n++
		}
	}
	return n
}
