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
	var tmpl []byte
	if vct != nil {
		// As Metacontroller decodes the answer: numbers as float64, so one a float64 cannot hold is refused.
		if err := Unmarshal(vct, new(any)); err != nil {
			return nil, fmt.Errorf("observed volumeClaimTemplates: %w", err)
		}
		// Copied, never judged, in the form the answer's encoder writes any value in.
		var err error
		if tmpl, err = jsontext.AppendFormat(nil, vct, copyOptions); err != nil {
			return nil, err
		}
	}
	b, err := Marshal(obj)
	if err != nil {
		return nil, err
	}
	return splice(make([]byte, 0, len(b)+len(tmpl)+len(`,"volumeClaimTemplates":`)), b, func(name string, v []byte) ([]byte, error) {
		switch {
		case name == `"status"`, name == `"spec"` && string(v) == "{}":
			return nil, nil
		case name == `"spec"` && vct != nil:
			return splice(nil, v, func(name string, v []byte) ([]byte, error) {
				if name == `"volumeClaimTemplates"` {
					return nil, nil
				}
				return v, nil
			}, `"volumeClaimTemplates"`, tmpl)
		}
		return v, nil
	}, "", nil)
}

// copyOptions let the observed claim templates through as the API server sent them (they are copied,
// never judged).
var copyOptions = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// splice appends to dst the object obj, as Marshal wrote it, member by member, each value as keep returns
// it (nil leaves the member out; names are passed quoted, as written), then the member add (unless add
// is ""; quoted) with value. The members' bytes are copied, not encoded again: Marshal's output is
// already what the answer's encoder writes, and re-encoding every child cost a 9-member sync 6 % of its
// CPU (docs/performance.md, the library wire).
func splice(dst, obj []byte, keep func(string, []byte) ([]byte, error), add string, value []byte) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(obj), copyOptions)
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	dst = append(dst, '{')
	first := true
	member := func(name string, v []byte) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(append(append(dst, name...), ':'), v...)
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue() // an object name read as a value is its quoted bytes
		if err != nil {
			return nil, err
		}
		n := string(name) // before the next read voids it
		v, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		kept, err := keep(n, v)
		if err != nil {
			return nil, err
		}
		if kept != nil {
			member(n, kept)
		}
	}
	if add != "" {
		member(add, value)
	}
	return append(dst, '}'), nil
}
