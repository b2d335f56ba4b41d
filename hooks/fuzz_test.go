package hooks

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// FuzzSync throws arbitrary bodies at /sync. Whatever comes in: no panic (the recoverer would turn one
// into a 500, which the fuzzer reports), an answer that is 200 or 4xx, and a 200 never drops an
// observed StatefulSet: a partial child list would make Metacontroller delete the cluster.
func FuzzSync(f *testing.F) {
	files, _ := filepath.Glob("testdata/sync/*.request.json")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	srv := fixtureServer()
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := post(t, srv, "/sync", "application/json", body)
		switch {
		case rec.Code == http.StatusOK:
		case rec.Code >= 400 && rec.Code < 500:
			return
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
		var req struct {
			Children map[string]map[string]json.RawMessage `json:"children"`
		}
		var resp struct {
			Children []struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			} `json:"children"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("200 with undecodable body: %v", err)
		}
		if resp.Children == nil {
			t.Fatal("200 without a children list")
		}
		if json.Unmarshal(body, &req) != nil {
			return
		}
		for _, raw := range req.Children["StatefulSet.apps/v1"] {
			var sts struct {
				Metadata struct{ Name string } `json:"metadata"`
			}
			if json.Unmarshal(raw, &sts) != nil {
				continue
			}
			found := false
			for _, c := range resp.Children {
				found = found || (c.Kind == "StatefulSet" && c.Metadata.Name == sts.Metadata.Name)
			}
			if !found {
				t.Fatalf("200 drops observed StatefulSet %q", sts.Metadata.Name)
			}
		}
	})
}
