package hooks

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	etcdsync "github.com/etcdhook/etcdhook/sync"
)

// The audit trail: a sync whose answer changes the parent's conditions logs one JSON line per step
// started or finished and per condition raised or cleared, naming cluster, namespace, step and why;
// the next sync, whose parent carries the status that answer wrote, logs none.
func TestAuditTrail(t *testing.T) {
	srv, logs := loggingServer()
	audit := func() []map[string]any {
		out := logLines(t, logs, "audit")
		logs.Reset()
		return out
	}
	body := mustRead(t, "testdata/sync/scale-down-leave-intent.request.json")
	var req map[string]any
	require.NoError(t, json.Unmarshal(body, &req))
	parent := req["parent"].(map[string]any)
	meta := parent["metadata"].(map[string]any)
	delete(parent, "status") // a parent whose status says nothing yet

	b, err := json.Marshal(req)
	require.NoError(t, err)
	rec := post(t, srv, "/sync", "application/json", b)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	lines := audit()
	require.NotEmpty(t, lines)
	var steps []string
	for _, l := range lines {
		require.Equal(t, meta["name"], l["cluster"])
		require.Equal(t, meta["namespace"], l["namespace"])
		require.NotEmpty(t, l["reason"])
		steps = append(steps, l["step"].(string)+" "+l["change"].(string)+": "+l["message"].(string))
	}
	require.Contains(t, steps, "Progressing started: demo-4 to leave the cluster", "%v", steps)

	// The status the answer wrote is the parent's next: nothing changed, nothing is audited.
	var resp map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &resp))
	parent["status"] = resp["status"]
	b, err = json.Marshal(req)
	require.NoError(t, err)
	rec = post(t, srv, "/sync", "application/json", b)
	require.Equal(t, 200, rec.Code, rec.Body.String())
	require.Empty(t, audit())
}

// loggingServer is the fixture server with its log kept as JSON lines.
func loggingServer() (*Server, *bytes.Buffer) {
	logs := &bytes.Buffer{}
	return New(Config{
		Options: etcdsync.Options{Image: fixtureImage},
		Now:     func() time.Time { return fixtureNow },
		Logger:  slog.New(slog.NewJSONHandler(logs, nil)),
	}), logs
}

// logLines are the logged lines whose msg is msg, decoded.
func logLines(t *testing.T, logs *bytes.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}
