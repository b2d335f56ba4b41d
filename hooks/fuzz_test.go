package hooks

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	etcdsync "github.com/etcdhook/etcdhook/sync"
)

// FuzzSync throws arbitrary bodies at /sync. Whatever comes in: no panic (the recoverer would turn one
// into a 500, which the fuzzer reports), an answer that is 200 or 4xx, and a 200 never drops an
// observed child of any kind unless the plan deletes it on purpose: a partial child list would make
// Metacontroller delete what it leaves out.
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
		var resp struct {
			Children []struct {
				Kind       string `json:"kind"`
				APIVersion string `json:"apiVersion"`
				Metadata   struct {
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
		// Every observed child of every kind is in the answer, or is one the plan deletes on purpose
		// (Response.Deleted, which the handler logs): a partial list would make Metacontroller delete it.
		var req etcdsync.Request
		if json.Unmarshal(body, &req) != nil {
			t.Fatal("200 for a body that does not decode as a request")
		}
		answered := map[string]bool{}
		for _, c := range resp.Children {
			answered[c.Kind+"."+c.APIVersion+"/"+c.Metadata.Name] = true
		}
		planned := false // the plan's deletions are computed only when something is left out
		for key, objs := range req.Children {
			for _, raw := range objs {
				var obj struct {
					Metadata struct{ Name string } `json:"metadata"`
				}
				if json.Unmarshal(raw, &obj) == nil && !answered[key+"/"+obj.Metadata.Name] && !planned {
					planned = true
					again, err := etcdsync.Compute(&req, fixtureNow, etcdsync.Options{Image: fixtureImage})
					if err != nil {
						t.Fatalf("200 from the server, error from Compute: %v", err)
					}
					for _, d := range again.Deleted {
						answered[d.Key+"/"+d.Name] = true
					}
				}
			}
		}
		for key, objs := range req.Children {
			for _, raw := range objs {
				var obj struct {
					Metadata struct{ Name string } `json:"metadata"`
				}
				if json.Unmarshal(raw, &obj) != nil {
					continue
				}
				if !answered[key+"/"+obj.Metadata.Name] {
					t.Fatalf("200 drops observed %s %q without the plan deleting it", key, obj.Metadata.Name)
				}
			}
		}
	})
}
