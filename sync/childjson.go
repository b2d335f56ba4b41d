package sync

import (
	"bytes"
	stdjson "encoding/json"
	"io"
	"reflect"
	"slices"
	"strconv"
	gosync "sync"

	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// A child is answered as the JSON of its typed object with no nulls (a null becomes a field removal or
// a perpetual diff under Metacontroller's merge), no status and no empty spec (Leases are metadata
// only). The typed object is marshalled by go-json-experiment with encoding/json's semantics (the
// Kubernetes types carry v1 tags: omitempty, inline, MarshalJSON), then copied token by token through
// jsontext, leaving those members out. Keys keep the order the types declare them in; Metacontroller
// compares objects, not bytes, and the fixtures are compared in a canonical form.

// childOptions marshal as encoding/json does; maps in key order, so that an answer is byte for byte
// the same for the same arguments.
var childOptions = json.JoinOptions(jsonv1.DefaultOptionsV1(), json.Deterministic(true),
	json.WithMarshalers(stringMaps))

// stringMaps writes the string maps (options join only one set of marshalers: every set includes it).
var stringMaps = json.MarshalToFunc(marshalStringMap)

// marshalStringMap writes a map[string]string (labels, annotations, ConfigMap data) in key order as
// encoding/json does (nil is null), without the reflection the library spends on each entry (two
// allocations an entry, a third of the answer's).
func marshalStringMap(enc *jsontext.Encoder, m map[string]string) error {
	if m == nil {
		return enc.WriteToken(jsontext.Null)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if err := enc.WriteToken(jsontext.BeginObject); err != nil {
		return err
	}
	for _, k := range keys {
		if err := enc.WriteToken(jsontext.String(k)); err != nil {
			return err
		}
		if err := enc.WriteToken(jsontext.String(m[k])); err != nil {
			return err
		}
	}
	return enc.WriteToken(jsontext.EndObject)
}

// copyOptions let the observed claim templates through as the API server sent them (they are copied,
// never judged: an invalid byte or a repeated key there is the server's).
var copyOptions = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// Where an object is in a child: the child itself, its spec, or deeper.
const (
	levelChild = iota
	levelSpec
	levelDeeper
)

// childWriter writes children into one buffer; its decoders and encoder are reused across answers.
type childWriter struct {
	out       bytes.Buffer // every child's JSON, one after the other (plan.children)
	raw, spec bytes.Buffer // a child's marshalled JSON; a copy of its spec
	specs     bytes.Reader // reads spec
	vcts      bytes.Reader // reads vct
	vdec      *jsontext.Decoder
	dec, sub  *jsontext.Decoder
	enc       *jsontext.Encoder
	name      []byte
	// vct: the observed claim templates that replace the rendered ones (claimTemplates), nil for none.
	vct []byte
}

// writers recycles childWriters and their buffers (about 32 KB of children for 9 members).
var writers = gosync.Pool{New: func() any {
	w := &childWriter{}
	w.dec, w.sub, w.vdec = jsontext.NewDecoder(&w.raw), jsontext.NewDecoder(&w.specs), jsontext.NewDecoder(&w.vcts)
	w.enc = jsontext.NewEncoder(&w.out)
	w.out.Grow(32 << 10)
	return w
}}

// appendChild writes obj's answer after the children already written and returns it (a slice of the
// shared buffer, valid until the writer is released). vct, when not nil, replaces
// spec.volumeClaimTemplates with the observed bytes.
func (w *childWriter) appendChild(obj any, vct []byte) ([]byte, error) {
	if err := w.checkNumbers(vct); err != nil {
		return nil, err
	}
	start := w.out.Len()
	w.raw.Reset()
	if err := json.MarshalWrite(&w.raw, obj, childOptions); err != nil {
		return nil, err
	}
	w.vct = vct
	// The library's own output: no name is repeated, so none is tracked.
	w.dec.Reset(&w.raw, copyOptions)
	w.enc.Reset(&w.out, copyOptions)
	if err := w.copyValue(w.dec, levelChild); err != nil {
		return nil, err
	}
	b := w.out.Bytes()
	// The encoder ends a top-level value with a newline: not part of the child.
	end := len(b)
	if end > start && b[end-1] == '\n' {
		end--
		w.out.Truncate(end)
	}
	return b[start:end:end], nil
}

// copyValue copies the next value of dec to the encoder, without null members (and, at the child's
// level, without status and an empty spec).
func (w *childWriter) copyValue(dec *jsontext.Decoder, level int) error {
	switch dec.PeekKind() {
	case '{':
		return w.copyObject(dec, level)
	case '[':
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		if err := w.enc.WriteToken(jsontext.BeginArray); err != nil {
			return err
		}
		for dec.PeekKind() != ']' {
			if err := w.copyValue(dec, levelDeeper); err != nil {
				return err
			}
		}
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		return w.enc.WriteToken(jsontext.EndArray)
	}
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	return w.enc.WriteValue(v)
}

func (w *childWriter) copyObject(dec *jsontext.Decoder, level int) error {
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	if err := w.enc.WriteToken(jsontext.BeginObject); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil {
			return err
		}
		// The name is only valid until the next read.
		w.name = append(w.name[:0], name...)
		skip := dec.PeekKind() == 'n'
		next := levelDeeper
		switch {
		case level == levelChild && string(w.name) == `"status"`:
			skip = true
		case level == levelChild && string(w.name) == `"spec"` && !skip:
			if err := w.copySpec(dec); err != nil {
				return err
			}
			continue
		case level == levelSpec && w.vct != nil && string(w.name) == `"volumeClaimTemplates"`:
			skip = true // written from the observed bytes below
		}
		if skip {
			if err := dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		if err := w.enc.WriteValue(w.name); err != nil {
			return err
		}
		if err := w.copyValue(dec, next); err != nil {
			return err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	if level == levelSpec && w.vct != nil {
		if err := w.enc.WriteToken(jsontext.String("volumeClaimTemplates")); err != nil {
			return err
		}
		if err := w.enc.WriteValue(w.vct); err != nil {
			return err
		}
	}
	return w.enc.WriteToken(jsontext.EndObject)
}

// copySpec copies a child's spec unless it is an object with no member left once nulls are dropped.
func (w *childWriter) copySpec(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	w.spec.Reset()
	w.spec.Write(v)
	if v.Kind() == '{' {
		empty, err := w.emptyAfterDrop()
		if err != nil || empty {
			return err
		}
	}
	if err := w.enc.WriteToken(jsontext.String("spec")); err != nil {
		return err
	}
	w.specs.Reset(w.spec.Bytes())
	w.sub.Reset(&w.specs, copyOptions)
	return w.copyValue(w.sub, levelSpec)
}

// emptyAfterDrop: the spec (in w.spec) has no member that is not null.
func (w *childWriter) emptyAfterDrop() (bool, error) {
	w.specs.Reset(w.spec.Bytes())
	w.sub.Reset(&w.specs, copyOptions)
	if _, err := w.sub.ReadToken(); err != nil {
		return false, err
	}
	for w.sub.PeekKind() != '}' {
		if _, err := w.sub.ReadValue(); err != nil {
			return false, err
		}
		if w.sub.PeekKind() != 'n' {
			return false, nil
		}
		if err := w.sub.SkipValue(); err != nil {
			return false, err
		}
	}
	return true, nil
}

// checkNumbers refuses observed claim templates holding a number a float64 cannot hold: Metacontroller
// decodes the answer into maps, where it could not either.
func (w *childWriter) checkNumbers(v []byte) error {
	if v == nil {
		return nil
	}
	w.vcts.Reset(v)
	w.vdec.Reset(&w.vcts, copyOptions)
	for {
		tok, err := w.vdec.ReadToken()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if tok.Kind() == '0' {
			if _, err := strconv.ParseFloat(tok.String(), 64); err != nil {
				return &stdjson.UnmarshalTypeError{Value: "number " + tok.String(), Type: reflect.TypeFor[float64]()}
			}
		}
	}
}
