package sync

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/api"
)

// Every fixture says what it proves: a one-line claim and an assertion on the fields the claim is
// about, beside the golden comparison of TestFixturesUpToDate (which says that nothing changed, not
// what matters). The claims live in the fixture_claims_*_test.go files, one table each.

// fixtureClaim is what one fixture proves. code is the HTTP code the fixture answers with (0: 200).
type fixtureClaim struct {
	claim string
	check func(t *testing.T, a *fxAnswer)
}

// fixtureClaims collects the tables (each file adds its own in an init).
var fixtureClaims = map[string]fixtureClaim{}

func addClaims(m map[string]fixtureClaim) {
	for k, v := range m {
		if _, dup := fixtureClaims[k]; dup {
			panic("two claims for fixture " + k)
		}
		fixtureClaims[k] = v
	}
}

func TestEveryFixtureProvesItsClaim(t *testing.T) {
	names := map[string]bool{}
	var missing []string
	for _, fx := range fixtures() {
		key := fx.name
		if fx.hook != "" && fx.hook != "sync" {
			key = fx.hook + "/" + fx.name
		}
		names[key] = true
		c, ok := fixtureClaims[key]
		if !ok || strings.TrimSpace(c.claim) == "" || c.check == nil {
			missing = append(missing, key)
			continue
		}
		t.Run(key, func(t *testing.T) {
			req := fx.request(t)
			code, body := fx.expected(t, req)
			a := &fxAnswer{code: code}
			if code == 200 {
				require.NoError(t, json.Unmarshal(body, &a.resp))
			}
			c.check(t, a)
		})
	}
	for k := range fixtureClaims {
		require.True(t, names[k], "a claim for fixture %q, which does not exist", k)
	}
	sort.Strings(missing)
	require.Empty(t, missing, "fixtures without a claim and a check")
}

// syncFixtureRequest is the request of the sync fixture name, rendered again.
func syncFixtureRequest(t *testing.T, name string) []byte {
	t.Helper()
	for _, fx := range fixtures() {
		if fx.name == name && (fx.hook == "" || fx.hook == "sync") {
			return fx.request(t)
		}
	}
	t.Fatalf("no fixture %s", name)
	return nil
}

// fxAnswer is a fixture's answer, with accessors for what claims are about.
type fxAnswer struct {
	code int
	resp map[string]any
}

func (a *fxAnswer) status() map[string]any { m, _ := a.resp["status"].(map[string]any); return m }

// phase is status.phase.
func (a *fxAnswer) phase() string { s, _ := a.status()["phase"].(string); return s }

// message is status.message.
func (a *fxAnswer) message() string { s, _ := a.status()["message"].(string); return s }

// condition is the status condition of type typ (nil when absent).
func (a *fxAnswer) condition(typ string) map[string]any {
	cs, _ := a.status()["conditions"].([]any)
	for _, c := range cs {
		if m, _ := c.(map[string]any); m["type"] == typ {
			return m
		}
	}
	return nil
}

// conditionIs asserts condition typ has status ("True"/"False") and, when reason is set, that reason.
func (a *fxAnswer) conditionIs(t *testing.T, typ, status, reason string) {
	t.Helper()
	c := a.condition(typ)
	require.NotNil(t, c, "condition %s", typ)
	require.Equal(t, status, c["status"], "condition %s: %v", typ, c)
	if reason != "" {
		require.Equal(t, reason, c["reason"], "condition %s: %v", typ, c)
	}
}

// children of a kind, by name.
func (a *fxAnswer) children(kind string) map[string]map[string]any {
	out := map[string]map[string]any{}
	cs, _ := a.resp["children"].([]any)
	for _, c := range cs {
		m, _ := c.(map[string]any)
		if m["kind"] == kind {
			md, _ := m["metadata"].(map[string]any)
			name, _ := md["name"].(string)
			out[name] = m
		}
	}
	return out
}

// child is the one child of kind whose name ends with suffix (fails when not exactly one).
func (a *fxAnswer) child(t *testing.T, kind, suffix string) map[string]any {
	t.Helper()
	var found []map[string]any
	for name, c := range a.children(kind) {
		if strings.HasSuffix(name, suffix) {
			found = append(found, c)
		}
	}
	require.Len(t, found, 1, "one %s named *%s", kind, suffix)
	return found[0]
}

// dig reads a path of object keys and, for numbers in the path, list indexes.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// replicas and partition of the StatefulSet (-1 when absent).
func (a *fxAnswer) replicas(t *testing.T) int {
	t.Helper()
	return num(dig(a.child(t, "StatefulSet", ""), "spec", "replicas"))
}

func (a *fxAnswer) partition(t *testing.T) int {
	t.Helper()
	return num(dig(a.child(t, "StatefulSet", ""), "spec", "updateStrategy", "rollingUpdate", "partition"))
}

func num(v any) int {
	if f, ok := v.(float64); ok {
		return int(f)
	}
	return -1
}

// intent is member i's intent as its Lease's hook half says (ok false when no Lease is answered).
func (a *fxAnswer) intent(i int) (in api.Intent, ok bool) {
	for name, l := range a.children("Lease") {
		if !strings.HasSuffix(name, fmt.Sprintf("-%d-member", i)) {
			continue
		}
		ann := map[string]string{}
		md, _ := l["metadata"].(map[string]any)
		am, _ := md["annotations"].(map[string]any)
		for k, v := range am {
			ann[k], _ = v.(string)
		}
		in, _ := api.ParseIntent(ann)
		return in, true
	}
	return api.Intent{}, false
}

// jobs are the names of the Jobs answered whose name contains part.
func (a *fxAnswer) jobs(part string) []string {
	var out []string
	for name := range a.children("Job") {
		if strings.Contains(name, part) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// configData is the hook's ConfigMap's data.
func (a *fxAnswer) configData(t *testing.T) map[string]any {
	t.Helper()
	d, _ := a.child(t, "ConfigMap", "")["data"].(map[string]any)
	return d
}

// messageHas asserts status.message (and the Progressing condition's message) mentions every part.
func (a *fxAnswer) messageHas(t *testing.T, parts ...string) {
	t.Helper()
	for _, p := range parts {
		require.Contains(t, a.message(), p)
	}
}

// etcdContainer is the StatefulSet's container named etcd.
func (a *fxAnswer) etcdContainer(t *testing.T) map[string]any {
	t.Helper()
	cs, _ := dig(a.child(t, "StatefulSet", ""), "spec", "template", "spec", "containers").([]any)
	for _, c := range cs {
		if m, _ := c.(map[string]any); m["name"] == "etcd" {
			return m
		}
	}
	require.Fail(t, "no etcd container")
	return nil
}

// etcdCommand is the etcd container's command line (command, then args).
func (a *fxAnswer) etcdCommand(t *testing.T) []string {
	t.Helper()
	c := a.etcdContainer(t)
	return append(strs(c["command"]), strs(c["args"])...)
}

// strs converts a JSON list of strings.
func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, s := range l {
		str, _ := s.(string)
		out = append(out, str)
	}
	return out
}
