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

// The one "sync" line per request counts the children the answer carries (it once counted them after
// the response had given its buffer back, and said 0 for every answer).
func TestSyncLogCountsChildren(t *testing.T) {
	var logs bytes.Buffer
	srv := New(Config{
		Options: etcdsync.Options{Image: fixtureImage},
		Now:     func() time.Time { return fixtureNow },
		Logger:  slog.New(slog.NewJSONHandler(&logs, nil)),
	})
	rec := post(t, srv, "/sync", "application/json", mustRead(t, "testdata/sync/metacontroller-last-applied.request.json"))
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var answer struct {
		Children []json.RawMessage `json:"children"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &answer))
	require.NotEmpty(t, answer.Children)
	var logged []float64
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["msg"] == "sync" {
			logged = append(logged, m["children"].(float64))
		}
	}
	require.Equal(t, []float64{float64(len(answer.Children))}, logged)
}
