package wire

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// encodeOptions write as encoding/json does (the Kubernetes and api types carry v1 tags), maps in key
// order: the same answer is the same bytes.
var encodeOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.Deterministic(true),
	jsonv2.WithMarshalers(jsonv2.MarshalToFunc(writeStringMap)))

// writeStringMap writes a map[string]string (labels, annotations, data) in key order as encoding/json
// does (nil is null), without the library's reflection on each entry: every child carries several,
// and they cost a 9-member answer a tenth of its CPU (docs/performance.md, the library wire).
func writeStringMap(enc *jsontext.Encoder, m map[string]string) error {
	if m == nil {
		return enc.WriteToken(jsontext.Null)
	}
	if err := enc.WriteToken(jsontext.BeginObject); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := enc.WriteToken(jsontext.String(k)); err != nil {
			return err
		}
		if err := enc.WriteToken(jsontext.String(m[k])); err != nil {
			return err
		}
	}
	return enc.WriteToken(jsontext.EndObject)
}

// Marshal encodes v as the answers are encoded.
func Marshal(v any) ([]byte, error) { return jsonv2.Marshal(v, encodeOptions) }

// Child is a rendered child as the answer sends it: its JSON without status (the hook never writes one)
// and without an empty spec (Leases are metadata only). vct, when not nil, replaces
// spec.volumeClaimTemplates with the observed bytes (ClaimTemplates). No renderer writes a null (a null
// is a field removal, or a perpetual diff, under Metacontroller's merge): every answer of the test world
// is checked for one (sync's checkResponse), the observed claim templates aside.
func Child(obj any, vct jsontext.Value) (jsontext.Value, error) {
	if vct != nil {
		// As Metacontroller decodes the answer: numbers as float64, so one a float64 cannot hold is refused.
		if err := Unmarshal(vct, new(any)); err != nil {
			return nil, fmt.Errorf("observed volumeClaimTemplates: %w", err)
		}
	}
	b, err := Marshal(obj)
	if err != nil {
		return nil, err
	}
	return rewrite(b, func(name string, v jsontext.Value) (jsontext.Value, error) {
		switch {
		case name == "status", name == "spec" && string(v) == "{}":
			return nil, nil
		case name == "spec" && vct != nil:
			return rewrite(v, func(name string, v jsontext.Value) (jsontext.Value, error) {
				if name == "volumeClaimTemplates" {
					return nil, nil
				}
				return v, nil
			}, "volumeClaimTemplates", vct)
		}
		return v, nil
	}, "", nil)
}

// copyOptions let the observed claim templates through as the API server sent them (they are copied,
// never judged).
var copyOptions = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// rewrite copies the object obj member by member, each value as keep returns it (nil leaves the member
// out), then adds the member add (unless add is "").
func rewrite(obj jsontext.Value, keep func(string, jsontext.Value) (jsontext.Value, error), add string, value jsontext.Value) (jsontext.Value, error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(obj), copyOptions)
	var out bytes.Buffer
	out.Grow(len(obj))
	enc := jsontext.NewEncoder(&out, copyOptions)
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	if err := enc.WriteToken(jsontext.BeginObject); err != nil {
		return nil, err
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String() // before the next read voids the token
		v, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		if v, err = keep(name, v); err != nil || v == nil {
			if err != nil {
				return nil, err
			}
			continue
		}
		if err := enc.WriteToken(jsontext.String(name)); err != nil {
			return nil, err
		}
		if err := enc.WriteValue(v); err != nil {
			return nil, err
		}
	}
	if add != "" {
		if err := enc.WriteToken(jsontext.String(add)); err != nil {
			return nil, err
		}
		if err := enc.WriteValue(value); err != nil {
			return nil, err
		}
	}
	if err := enc.WriteToken(jsontext.EndObject); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}
