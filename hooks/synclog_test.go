package hooks

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The one "sync" line per request counts the children the answer carries (it once counted them after
// the response had given its buffer back, and said 0 for every answer).
func TestSyncLogCountsChildren(t *testing.T) {
	srv, logs := loggingServer()
	rec := post(t, srv, "/sync", "application/json", mustRead(t, "testdata/sync/metacontroller-last-applied.request.json"))
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var answer struct {
		Children []json.RawMessage `json:"children"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &answer))
	require.NotEmpty(t, answer.Children)
	var logged []float64
	for _, m := range logLines(t, logs, "sync") {
		logged = append(logged, m["children"].(float64))
	}
	require.Equal(t, []float64{float64(len(answer.Children))}, logged)
}
