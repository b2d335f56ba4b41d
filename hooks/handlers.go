package hooks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/etcdhook/etcdhook/api"
	etcdsync "github.com/etcdhook/etcdhook/sync"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// handleSync serves /sync and /finalize: the body says whether it is finalizing. Its shape is bounded
// before anything of it is decoded (wire.Shape), then it is decoded whole (wire.Decode).
func (s *Server) handleSync(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	defer putBuffer(body) // the Observed reads body only while this request is answered; what outlives it is copied
	// A body that is not JSON is counted up to where it fails.
	sh, bad := wire.Shape(body)
	if !s.withinBounds(w, sh.Objects, sh.Elements) {
		return
	}
	if bad != nil {
		writeError(w, http.StatusBadRequest, "malformed JSON: "+bad.Error())
		return
	}
	start := time.Now()
	obs, err := wire.Decode(body)
	if err != nil {
		var bad *wire.MalformedError
		if errors.As(err, &bad) {
			writeError(w, http.StatusBadRequest, "malformed JSON: "+bad.Msg)
			return
		}
		s.fail(w, r, err)
		return
	}
	// One computation per parent at a time (fairness.go): Metacontroller never sends two for one
	// parent at once, so a second one is a retry of a request it gave up on, or not Metacontroller.
	parent := obs.ParentKey()
	if !s.parents.acquire(parent) {
		s.limitMetrics.parentBusy.WithLabelValues(hookName(r)).Inc()
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
		writeError(w, http.StatusTooManyRequests, "a sync of "+parent+" is being computed: retry later")
		return
	}
	defer s.parents.release(parent)
	// The work stops when the client goes away or the deadline passes: Metacontroller has given up by
	// then, and the slot is someone else's (sync.Answer).
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ComputeTimeout)
	defer cancel()
	resp, err := etcdsync.Answer(ctx, obs, s.cfg.Now(), s.cfg.Options)
	if err != nil {
		if ctx.Err() != nil {
			s.limitMetrics.abandoned.WithLabelValues(hookName(r)).Inc()
			s.cfg.Logger.Warn("sync abandoned", "parent", parent, "after", time.Since(start).String(), "why", ctx.Err().Error())
			w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
			writeError(w, http.StatusServiceUnavailable, "the computation was abandoned: "+ctx.Err().Error())
			return
		}
		s.fail(w, r, err)
		return
	}
	out, err := resp.AppendJSON(getBuffer(0))
	children := len(resp.Children)
	defer putBuffer(out)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding response: "+err.Error())
		return
	}
	s.clusters.observe(resp)
	for _, d := range resp.Deleted {
		s.cfg.Logger.Info("child released for deletion", "parent", parent, "group", d.Key,
			"name", strings.Clone(d.Name), "reason", strings.Clone(d.Reason))
	}
	if len(resp.Changes) > 0 {
		ns, name, _ := strings.Cut(parent, "/")
		for _, c := range resp.Changes {
			// The audit trail: one line per step started or finished, per condition raised or cleared.
			s.cfg.Logger.Info("audit", "cluster", strings.Clone(name), "namespace", strings.Clone(ns), "step", c.Condition, "change", c.What,
				"reason", strings.Clone(c.Reason), "message", strings.Clone(c.Message))
		}
	}
	s.cfg.Logger.Info("sync",
		"parent", parent, "finalizing", resp.Finalizing, "phase", resp.Status.Phase,
		"message", resp.Status.Message, "children", children,
		"duration", time.Since(start).String())
	writeBody(w, http.StatusOK, append(out, '\n'))
}

func (s *Server) handleCustomize(w http.ResponseWriter, r *http.Request) {
	var req etcdsync.CustomizeRequest
	if !s.decode(w, r, &req) {
		return
	}
	resp, err := etcdsync.Customize(&req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// decode reads a JSON body into v, answering 4xx itself when it cannot.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, ok := s.readRequest(w, r)
	if !ok {
		return false
	}
	defer putBuffer(body) // decoding copies what it keeps
	if err := wire.Unmarshal(body, v); err != nil {
		writeError(w, http.StatusBadRequest, "malformed JSON: "+err.Error())
		return false
	}
	return true
}

// readRequest reads a body within the bounds (hooks/limits.go), answering 4xx itself when it cannot.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, ok := s.readBody(w, r)
	if !ok {
		return nil, false
	}
	// Before any decoding: many small objects, or long arrays of small elements, cost far more memory
	// typed than their bytes suggest.
	sh, _ := wire.Shape(body) // a body that is not JSON fails to decode afterwards
	if !s.withinBounds(w, sh.Objects, sh.Elements) {
		return nil, false
	}
	return body, true
}

// readBody checks the content type and reads the body, answering 4xx itself when it cannot.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("content type %q: hooks take application/json", ct))
			return nil, false
		}
	}
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", s.cfg.MaxBodyBytes))
			return nil, false
		}
		writeError(w, http.StatusBadRequest, "reading request body: "+err.Error())
		return nil, false
	}
	return body, true
}

// withinBounds answers 413 for a body listing more objects or array elements than the bounds allow.
func (s *Server) withinBounds(w http.ResponseWriter, objects, elements int) bool {
	if objects > s.cfg.MaxObjects {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"request lists %d child and related objects, over the %d a cluster of at most %d members can have", objects, s.cfg.MaxObjects, api.MaxSize))
		return false
	}
	if elements > s.cfg.MaxElements {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"request has %d array elements, over the %d bound (a 9-member cluster's request has about 150)", elements, s.cfg.MaxElements))
		return false
	}
	return true
}

// fail answers an error: 422 for input the hook refuses, 500 otherwise. Metacontroller changes nothing
// on a non-200 answer and retries with backoff, which is what both cases need.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var in *wire.InputError
	code := http.StatusInternalServerError
	if errors.As(err, &in) {
		code = http.StatusUnprocessableEntity
	}
	s.cfg.Logger.Warn("hook refused request", "path", r.URL.Path, "code", code, "error", err.Error())
	writeError(w, code, err.Error())
}

// readBody reads at most limit bytes of the body, into one buffer sized from Content-Length when the
// client sent one (io.ReadAll would grow and copy it several times), and none of a body whose
// Content-Length is already over the limit.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	if n := r.ContentLength; n > 0 {
		buf := getBuffer(int(n))[:n]
		if _, err := io.ReadFull(body, buf); err != nil {
			putBuffer(buf)
			return nil, err
		}
		return buf, nil
	}
	return io.ReadAll(body)
}

// buffers recycles request bodies and answers (88 KB and 26 KB for a 9-member cluster, more than half
// of what a sync allocates): the garbage collector then runs half as often.
var buffers sync.Pool // *[]byte

// getBuffer returns an empty buffer of at least n bytes' capacity.
func getBuffer(n int) []byte {
	if p, ok := buffers.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]byte, 0, max(n, 32<<10))
}

// putBuffer recycles b, which must no longer be used (nor anything pointing into it).
func putBuffer(b []byte) {
	if cap(b) > 0 && cap(b) <= MaxBodyBytes {
		buffers.Put(&b)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := wire.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding response: "+err.Error())
		return
	}
	writeBody(w, code, append(b, '\n'))
}

// writeBody writes a JSON answer, newline included.
func writeBody(w http.ResponseWriter, code int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeText(w http.ResponseWriter, code int, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, s)
}
