package sync

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/facts"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// checkResponse asserts the invariants of docs/design/09-invariants.md §9 on one sync of the world.
func (w *world) checkResponse(req *Request, resp *Response) {
	w.t.Helper()
	first := mustJSON(resp)
	// 5. Same request and now: identical bytes.
	again, err := Compute(req, w.now, w.opts)
	if err != nil {
		w.t.Fatalf("second compute: %v", err)
	}
	if b := mustJSON(again); !bytes.Equal(first, b) {
		w.t.Errorf("same request and now gave different bytes")
	}
	children := map[string]map[string]any{}
	for _, c := range resp.Children {
		obj := c.(map[string]any)
		children[groupKey(obj)+"/"+obj["metadata"].(map[string]any)["name"].(string)] = obj
		if strings.Contains(string(mustJSON(obj)), "null") {
			w.t.Errorf("child %s contains null", obj["metadata"].(map[string]any)["name"])
		}
	}
	sts := children[wire.KeyStatefulSet+"/"+w.name]
	// 4. Never a partial child list: once the cluster exists, its core children are always answered.
	if w.sts() != nil {
		for _, k := range []string{wire.KeyStatefulSet + "/" + w.name, wire.KeyService + "/" + w.name, wire.KeyService + "/" + w.name + "-peer",
			wire.KeyPDB + "/" + w.name, wire.KeyConfigMap + "/" + w.name + "-config"} {
			if children[k] == nil {
				w.t.Fatalf("response omits existing child %s", k)
			}
		}
		for name, j := range w.jobs {
			if j.state == facts.JobActive && children[wire.KeyJob+"/"+name] == nil {
				w.t.Errorf("response drops active Job %s", name)
			}
		}
	}
	if sts == nil {
		return
	}
	w.checkChildren(children, req)
	// 5b. Applying the answer and syncing again changes nothing.
	saved := w.snapshot()
	w.apply(resp)
	req2 := w.request()
	resp2, err := Compute(req2, w.now, w.opts)
	w.restore(saved)
	if err != nil {
		w.t.Fatalf("resync: %v", err)
	}
	if a, b := mustJSON(resp.Children), mustJSON(resp2.Children); !bytes.Equal(a, b) {
		w.t.Errorf("resync after applying changed the children:\n%s", diffJSON(a, b))
	}
	// The status may refine its free-text messages once (a sync that acts describes the action, the
	// next one the wait), never anything else, and must then be still: no status loop.
	if a, b := mustJSON(withoutMessages(resp.Status)), mustJSON(withoutMessages(resp2.Status)); !bytes.Equal(a, b) {
		w.t.Errorf("resync after applying changed the status:\n%s\nfirst:  %s\nresync: %s", diffJSON(a, b), condSummary(resp.Status), condSummary(resp2.Status))
	}
	if !bytes.Equal(mustJSON(resp.Status), mustJSON(resp2.Status)) {
		saved := w.snapshot()
		w.apply(resp)
		w.apply(resp2)
		resp3, err := Compute(w.request(), w.now, w.opts)
		w.restore(saved)
		if err != nil {
			w.t.Fatalf("second resync: %v", err)
		}
		if a, b := mustJSON(resp2.Status), mustJSON(resp3.Status); !bytes.Equal(a, b) {
			w.t.Errorf("status keeps changing on resync:\n%s", diffJSON(a, b))
		}
	}
}

func withoutMessages(s *api.ClusterStatus) api.ClusterStatus {
	out := *s
	out.Message = ""
	out.Conditions = nil
	for _, c := range s.Conditions {
		// InputIgnored describes the input this answer corrects (a hand edit it re-derived): the resync
		// sees the corrected input and rightly no longer reports it.
		if c.Type == api.CondInputIgnored {
			continue
		}
		c.Message = ""
		out.Conditions = append(out.Conditions, c)
	}
	return out
}

// checkWorld checks the applied children against etcd's state.
func (w *world) checkWorld() {
	w.t.Helper()
	children := map[string]map[string]any{}
	for key, objs := range w.desired {
		for name, obj := range objs {
			children[key+"/"+name] = obj
		}
	}
	if children[wire.KeyStatefulSet+"/"+w.name] != nil {
		w.checkChildren(children, nil)
	}
}

// checkChildren asserts invariants 1, 2, 3 and 7 on a set of children; with the request of a new
// answer, its new remove Jobs must satisfy the quorum rule on what the hook was told.
func (w *world) checkChildren(children map[string]map[string]any, req *Request) {
	w.t.Helper()
	sts := children[wire.KeyStatefulSet+"/"+w.name]
	replicas := int(sts["spec"].(map[string]any)["replicas"].(float64))
	// 2. Replicas never below 1 + the highest ordinal that is a member (by etcd's own list), except while
	// an in-place restore stops every member on purpose (docs/design/16-backup-restore.md §16.8).
	restoring := false
	if cm := children[wire.KeyConfigMap+"/"+w.names().ConfigMap()]; cm != nil {
		if s, ok := cm["data"].(map[string]any)[api.ConfigKeyRestoreInPlace].(string); ok {
			var rec facts.InPlaceRecord
			restoring = json.Unmarshal([]byte(s), &rec) == nil && !rec.Done
		}
	}
	for _, m := range w.etcd.members {
		if restoring {
			break
		}
		if i := w.ordinalOf(m); i >= replicas {
			w.t.Errorf("replicas %d below member %s at ordinal %d", replicas, m.ID, i)
		}
	}
	// 1. At most one membership change in flight: the subjects of permits, leaves and remove Jobs.
	subjects := map[string]bool{}
	for name, obj := range children {
		if !strings.HasPrefix(name, wire.KeyLease+"/") {
			continue
		}
		i := w.names().LeaseOrdinal(strings.TrimPrefix(name, wire.KeyLease+"/"))
		if i < 0 {
			continue // the backup Lease
		}
		ann := obj["metadata"].(map[string]any)["annotations"].(map[string]any)
		m := w.etcd.byPeer(w.peerURL(i))
		deadline, _ := time.Parse(time.RFC3339, fmt.Sprint(ann[api.AnnJoinDeadline]))
		if ann[api.AnnJoinPermitted] != nil && w.now.Before(deadline) && (m == nil || m.Learner || w.data[i] != m.ID) {
			subjects[fmt.Sprint("ordinal ", i)] = true
		}
		if ann[api.AnnIntent] == api.IntentLeave && m != nil {
			subjects[fmt.Sprint("ordinal ", i)] = true
		}
	}
	for name, obj := range children {
		if !strings.HasPrefix(name, wire.KeyJob+"/"+w.name+"-rm-") {
			continue
		}
		jname := strings.TrimPrefix(name, wire.KeyJob+"/")
		if j := w.jobs[jname]; j != nil && j.state != facts.JobActive {
			continue
		}
		id := jobFlag(obj, "id")
		if m := w.etcd.byID(id); m != nil {
			subjects[fmt.Sprint("ordinal ", w.ordinalOf(*m))] = true
		}
		if req != nil && w.jobs[jname] == nil {
			w.checkQuorumRule(req, id)
		}
	}
	if len(subjects) > 1 {
		w.t.Errorf("%d membership changes in flight: %v", len(subjects), subjects)
	}
	// 7. Nothing is bootstrapped twice: once a cluster ID was reported, no Lease carries the seed mark.
	if w.status.ClusterID != "" {
		for name, obj := range children {
			if strings.HasPrefix(name, wire.KeyLease+"/") {
				if ann, _ := obj["metadata"].(map[string]any)["annotations"].(map[string]any); ann[api.AnnBootstrap] != nil {
					w.t.Errorf("%s carries the seed mark after bootstrap", name)
				}
			}
		}
	}
}

// checkQuorumRule verifies a new remove Job against the quorum rule of docs/design/08-safety-rules.md §8.2, judged on the
// facts the hook was given (the Job re-checks on etcd itself when it runs, as the world's does).
func (w *world) checkQuorumRule(req *Request, id string) {
	o, err := wire.DecodeRequest(req)
	if err != nil {
		w.t.Fatal(err)
	}
	f := facts.Read(o, w.now)
	m := f.Truth.Member(id)
	if m == nil || m.Learner {
		return
	}
	all, healthy := f.Truth.Voters()
	after := healthy
	if m.Healthy {
		after--
	}
	if healthy < api.Quorum(all) || after < api.Quorum(all-1) {
		w.t.Errorf("remove Job for %s breaks the quorum rule: %d of %d healthy, %d after", id, healthy, all, after)
	}
}

func jobFlag(job map[string]any, flag string) string {
	args := job["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["command"].([]any)
	for _, a := range args {
		if v, ok := strings.CutPrefix(a.(string), "--"+flag+"="); ok {
			return v
		}
	}
	return ""
}

type snapshot struct {
	desired  map[string]map[string]map[string]any
	created  map[string]time.Time
	jobs     map[string]*simJob
	leases   map[int]*simLease
	status   api.ClusterStatus
	stsGen   int64
	stsSpec  string
	lastResp *Response
}

func (w *world) snapshot() snapshot {
	s := snapshot{desired: w.desired, created: map[string]time.Time{}, jobs: map[string]*simJob{}, leases: map[int]*simLease{},
		status: w.status, stsGen: w.stsGen, stsSpec: w.stsSpec, lastResp: w.lastResp}
	for k, v := range w.created {
		s.created[k] = v
	}
	for k, v := range w.jobs {
		c := *v
		s.jobs[k] = &c
	}
	for k, v := range w.leases {
		s.leases[k] = v
	}
	return s
}

func (w *world) restore(s snapshot) {
	w.desired, w.created, w.jobs, w.leases, w.status = s.desired, s.created, s.jobs, s.leases, s.status
	w.stsGen, w.stsSpec, w.lastResp = s.stsGen, s.stsSpec, s.lastResp
}

// diffJSON shows the first differing line of two indented documents.
func diffJSON(a, b []byte) string {
	var x, y bytes.Buffer
	_ = json.Indent(&x, a, "", " ")
	_ = json.Indent(&y, b, "", " ")
	al, bl := strings.Split(x.String(), "\n"), strings.Split(y.String(), "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			lo := i - 3
			if lo < 0 {
				lo = 0
			}
			return fmt.Sprintf("line %d:\n- %s\n+ %s\ncontext:\n%s", i, al[i], bl[i], strings.Join(al[lo:i], "\n"))
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(al), len(bl))
}

// applyStale is a sync from a stale cache: the hook answers an old request and Metacontroller applies
// the answer as the API server lets it: updates of objects changed since are refused (409), objects the
// stale view did not see are not deleted, new objects are created, and the stale status is written.
// The world must still never hold two changes in flight.
func (w *world) applyStale(stale *Request) {
	w.t.Helper()
	resp, err := Compute(stale, w.now, w.opts)
	if err != nil {
		w.t.Fatalf("stale sync: %v", err)
	}
	current := w.request()
	unchanged := func(key, name string) bool {
		old, ok := findChild(stale.Children[key], name)
		now, ok2 := findChild(current.Children[key], name)
		return ok && ok2 && string(old) == string(now)
	}
	next := map[string]map[string]map[string]any{}
	for k, objs := range w.desired {
		next[k] = map[string]map[string]any{}
		for n, o := range objs {
			next[k][n] = o
		}
	}
	answered := map[string]bool{}
	for _, c := range resp.Children {
		obj := c.(map[string]any)
		key, name := groupKey(obj), obj["metadata"].(map[string]any)["name"].(string)
		answered[key+"/"+name] = true
		_, seen := findChild(stale.Children[key], name)
		switch {
		case !seen && w.desired[key][name] == nil:
			if next[key] == nil {
				next[key] = map[string]map[string]any{}
			}
			next[key][name] = deepCopyMap(obj)
			w.created[key+"/"+name] = w.now
			if key == wire.KeyJob {
				w.jobs[name] = &simJob{state: facts.JobActive}
			}
		case seen && unchanged(key, name):
			next[key][name] = deepCopyMap(obj)
		}
	}
	for key, objs := range stale.Children {
		for _, raw := range objs {
			var o struct {
				Metadata struct{ Name string } `json:"metadata"`
			}
			_ = json.Unmarshal(raw, &o)
			if !answered[key+"/"+o.Metadata.Name] && next[key] != nil {
				delete(next[key], o.Metadata.Name)
				if key == wire.KeyJob {
					delete(w.jobs, o.Metadata.Name)
				}
				if key == wire.KeyLease {
					delete(w.leases, w.names().LeaseOrdinal(o.Metadata.Name))
				}
			}
		}
	}
	w.desired = next
	if s := w.sts(); s != nil {
		if spec := string(mustJSON(s["spec"])); spec != w.stsSpec {
			w.stsSpec = spec
			w.stsGen++
		}
	}
	w.status = *resp.Status
	w.checkWorld()
}

func findChild(group map[string]jsontext.Value, name string) (jsontext.Value, bool) {
	for _, raw := range group {
		var o struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		_ = json.Unmarshal(raw, &o)
		if o.Metadata.Name == name {
			return raw, true
		}
	}
	return nil, false
}

func condSummary(s *api.ClusterStatus) string {
	var out []string
	for _, c := range s.Conditions {
		out = append(out, fmt.Sprintf("%s=%s/%s(%s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return s.Phase + " " + strings.Join(out, " ")
}
