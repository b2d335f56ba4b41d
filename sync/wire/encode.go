package wire

import (
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// encodeOptions write as encoding/json does (the Kubernetes and api types carry v1 tags), maps in key
// order: the same answer is the same bytes.
var encodeOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.Deterministic(true))

// Marshal encodes v as the answers are encoded.
func Marshal(v any) ([]byte, error) { return jsonv2.Marshal(v, encodeOptions) }

// Child is a rendered child as the answer sends it: its JSON as a map, without nulls (a null becomes a
// field removal or a perpetual diff under Metacontroller's merge), without status, and without an empty
// spec (Leases are metadata only). vct, when not nil, replaces spec.volumeClaimTemplates with the
// observed bytes (ClaimTemplates).
func Child(obj any, vct jsontext.Value) (map[string]any, error) {
	b, err := Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := Unmarshal(b, &m); err != nil {
		return nil, err
	}
	dropNulls(m)
	delete(m, "status")
	spec, _ := m["spec"].(map[string]any)
	if spec != nil && len(spec) == 0 {
		delete(m, "spec")
	}
	if vct != nil && spec != nil {
		// As Metacontroller decodes it: numbers as float64, so one a float64 cannot hold is refused.
		var v any
		if err := Unmarshal(vct, &v); err != nil {
			return nil, fmt.Errorf("observed volumeClaimTemplates: %w", err)
		}
		spec["volumeClaimTemplates"] = v
	}
	return m, nil
}

// dropNulls removes every null member, at any depth.
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
