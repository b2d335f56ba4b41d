// Package writer is the continuous client the membership and e2e tests run through every step: it
// writes sequential keys (bounded in count and time), records per step the acknowledged and failed
// writes and the latency of acknowledged ones, and checks at the end that every acknowledged key reads
// back with its value.
package writer

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/etcdhook/etcdhook/internal/percentile"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Limits bound a writer.
type Limits struct {
	Prefix  string
	Max     int
	For     time.Duration
	Every   time.Duration
	Timeout time.Duration
}

// Writer writes until stopped or its limits are reached.
type Writer struct {
	cl    *clientv3.Client
	lim   Limits
	mu    sync.Mutex
	step  string
	order []string
	stats map[string]*stats
	acked map[string]string
	stop  chan struct{}
	done  chan struct{}
	// term and member: the raft term of the last acknowledged write and the member that answered it.
	term, member uint64
}

type stats struct {
	ok, failed int
	lat        []time.Duration
	began      time.Time
	took       time.Duration
	// firstErr and firstAt: the first failed write of the step and when, into the step: a count alone
	// does not say whether a write timed out on a replaced pod, was refused, or found no leader.
	firstErr string
	firstAt  time.Duration
	// termBefore and termAfter: the raft term of the last write acknowledged before the first failed one
	// and of the first acknowledged after it (0 unknown). A change says leadership moved while that
	// write was in flight: a leader drops the proposals forwarded to it during a transfer without an
	// answer, and the client waits out its timeout (issue 28).
	termBefore, termAfter uint64
	// memberBefore and memberAfter: the member that answered those writes (0 unknown). A change says
	// the client's connection moved (the member it was on stopped, and it reconnected elsewhere).
	memberBefore, memberAfter uint64
	// elections: how far the raft term moved between the acknowledged writes of the step (each leader
	// change, planned or not, moves it by one): a leader change can drop the writes in flight, so a
	// step's failures read against the leader changes it caused.
	elections uint64
}

// Start begins writing through cl in the step named first.
func Start(cl *clientv3.Client, lim Limits, first string) *Writer {
	w := &Writer{cl: cl, lim: lim, stats: map[string]*stats{}, acked: map[string]string{},
		stop: make(chan struct{}), done: make(chan struct{})}
	w.Step(first)
	go w.loop()
	return w
}

func (w *Writer) loop() {
	defer close(w.done)
	end := time.Now().Add(w.lim.For)
	for n := 0; n < w.lim.Max && time.Now().Before(end); n++ {
		select {
		case <-w.stop:
			return
		case <-time.After(w.lim.Every):
		}
		key, val := fmt.Sprintf("%s%06d", w.lim.Prefix, n), fmt.Sprintf("v%d", n)
		// A write counts in the step it started in: one that began before a Step and ended after belongs
		// to what was going on when it was sent.
		w.mu.Lock()
		st := w.stats[w.step]
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), w.lim.Timeout)
		t0 := time.Now()
		resp, err := w.cl.Put(ctx, key, val)
		lat := time.Since(t0)
		cancel()
		w.mu.Lock()
		if err != nil {
			if st.failed == 0 {
				st.firstErr, st.firstAt, st.termBefore, st.memberBefore = err.Error(), t0.Sub(st.began), w.term, w.member
			}
			st.failed++
		} else {
			if w.term != 0 && resp.Header.RaftTerm > w.term {
				st.elections += resp.Header.RaftTerm - w.term
			}
			w.term, w.member = resp.Header.RaftTerm, resp.Header.MemberId
			if st.failed > 0 && st.termAfter == 0 {
				st.termAfter, st.memberAfter = w.term, w.member
			}
			st.ok++
			st.lat = append(st.lat, lat)
			w.acked[key] = val
		}
		w.mu.Unlock()
	}
}

// Step closes the current step and starts the next.
func (w *Writer) Step(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev := w.stats[w.step]; prev != nil && prev.took == 0 {
		prev.took = time.Since(prev.began)
	}
	w.step = name
	w.order = append(w.order, name)
	w.stats[name] = &stats{began: time.Now()}
}

// AckedInStep is the number of writes acknowledged in the current step.
func (w *Writer) AckedInStep() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats[w.step].ok
}

// Failed is the number of writes that failed in the named steps.
func (w *Writer) Failed(steps ...string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, name := range steps {
		if st := w.stats[name]; st != nil {
			n += st.failed
		}
	}
	return n
}

// Stop ends the writes (idempotent).
func (w *Writer) Stop() {
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
}

// Verify stops the writer and reads every acknowledged key back through cl (linearizably). It returns
// the revision of the read, the number of acknowledged writes and how many of them were not readable.
func (w *Writer) Verify(ctx context.Context, cl *clientv3.Client) (rev int64, acked, lost int, err error) {
	w.Stop()
	resp, err := cl.Get(ctx, w.lim.Prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, 0, 0, err
	}
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, v := range w.acked {
		if got[k] != v {
			lost++
		}
	}
	return resp.Header.Revision, len(w.acked), lost, nil
}

// Kept stops the writer and reads every acknowledged key back through cl: present counts those there,
// missing those not. Without a quorum's loss every one is there; after a recovery from a survivor
// (docs/design/19-recovery.md) the missing ones must be the newest, the writes it had not applied: an
// error says so when a key is there although one written before it is not.
func (w *Writer) Kept(ctx context.Context, cl *clientv3.Client) (present, missing int, err error) {
	w.Stop()
	first := ""
	for _, k := range w.AckedKeys() {
		resp, err := cl.Get(ctx, k)
		if err != nil {
			return present, missing, err
		}
		if len(resp.Kvs) == 0 {
			missing++
			if first == "" {
				first = k
			}
			continue
		}
		if first != "" {
			return present, missing, fmt.Errorf("acknowledged %s is there although %s, written before it, is not: the missing writes are not the newest", k, first)
		}
		present++
	}
	return present, missing, nil
}

// AckedKeys are the acknowledged keys in the order written (keys are numbered).
func (w *Writer) AckedKeys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]string, 0, len(w.acked))
	for k := range w.acked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// terms says whether leadership moved around the first failed write (raft terms of the acknowledged
// writes around it) and whether the client's connection did (the member that answered them), ""
// when a side is unknown.
func (st *stats) terms() string {
	if st.termBefore == 0 || st.termAfter == 0 {
		return ""
	}
	conn := fmt.Sprintf("; answered by member %x before and after it", st.memberBefore)
	if st.memberBefore != st.memberAfter {
		conn = fmt.Sprintf("; answered by member %x before it, %x after: the connection moved", st.memberBefore, st.memberAfter)
	}
	if st.termBefore == st.termAfter {
		return fmt.Sprintf(" (raft term %d before and after it: no election%s)", st.termBefore, conn)
	}
	return fmt.Sprintf(" (raft term %d before it, %d after: leadership moved%s)", st.termBefore, st.termAfter, conn)
}

// Table is a Markdown table of the steps.
func (w *Writer) Table() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "| step | took | writes ok | failed | elections | p50 | p99 |\n|---|---|---|---|---|---|---|\n")
	for _, name := range w.order {
		st := w.stats[name]
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %s | %s |\n", name, st.took.Round(10*time.Millisecond), st.ok, st.failed, st.elections,
			percentile.Of(st.lat, 50).Round(100*time.Microsecond), percentile.Of(st.lat, 99).Round(100*time.Microsecond))
	}
	for _, name := range w.order {
		if st := w.stats[name]; st.failed > 0 {
			msg := st.firstErr
			if len(msg) > 200 {
				msg = msg[:200] + "…"
			}
			// The wall clock (UTC) too: the members' logs and the Events are read against it.
			fmt.Fprintf(&b, "\nfirst failed write in %s, %s into the step (sent %s UTC): `%s`%s\n", name, st.firstAt.Round(10*time.Millisecond),
				st.began.Add(st.firstAt).UTC().Format("15:04:05.000"), strings.ReplaceAll(msg, "`", "'"), st.terms())
		}
	}
	return b.String()
}
