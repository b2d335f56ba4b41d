package sync

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (p *plan) meta(name, component string) metav1.ObjectMeta {
	n := p.f.names
	return metav1.ObjectMeta{Name: name, Namespace: n.Namespace, Labels: n.ObjectLabels(component)}
}

// toChild turns a typed object into the JSON map Metacontroller receives: no nulls (a null becomes a
// field removal or a perpetual diff), no status, no empty spec (Leases are metadata only).
func toChild(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	dropNulls(m)
	delete(m, "status")
	if s, ok := m["spec"].(map[string]any); ok && len(s) == 0 {
		delete(m, "spec")
	}
	return m, nil
}

func dropNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if x == nil {
				delete(t, k)
				continue
			}
			dropNulls(x)
		}
	case []any:
		for _, x := range t {
			dropNulls(x)
		}
	}
}
