package sync

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"

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
	opts      json.Options
	// vctAt: where the observed claim templates were written in the child ([start, end), from the
	// child's first byte; zero when not written).
	vctAt [2]int
	// vct: the observed claim templates that replace the rendered ones (claimTemplates), nil for none.
	vct []byte
}

// writers recycles childWriters and their buffers (about 32 KB of children for 9 members).
var writers = gosync.Pool{New: func() any {
	w := &childWriter{}
	// The writer's own options (made once: the library caches its encoders per set of options): the
	// claim templates are written from the observed bytes while a StatefulSet with them is written.
	w.opts = json.JoinOptions(childOptions, json.WithMarshalers(json.JoinMarshalers(stringMaps, json.MarshalToFunc(
		func(enc *jsontext.Encoder, _ []corev1.PersistentVolumeClaim) error {
			if w.vct == nil {
				return errors.ErrUnsupported // the rendered ones
			}
			// Where they are in the child (the encoder was reset at its first byte), for the null check,
			// which must pass over them.
			w.vctAt[0] = int(enc.OutputOffset())
			err := enc.WriteValue(w.vct)
			w.vctAt[1] = int(enc.OutputOffset())
			return err
		}))))
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
	// The fast way, for the kinds the hook renders: the top level written field by field, each field by
	// the library. It is the answer unless the library wrote a null member somewhere below (outside the
	// observed claim templates, copied as they are) or an empty spec (none of today's children has
	// either), or the observed templates are an empty list (the rendered empty list is omitted before
	// they could replace it).
	if fastKinds[reflect.TypeOf(obj)] && !emptyList(vct) {
		if b, err := w.writeTop(obj, vct); err == nil {
			child := b[start:len(b):len(b)]
			vs, ve := w.vctAt[0], w.vctAt[1]
			if ve <= vs || ve > len(child) {
				vs, ve = len(child), len(child)
			}
			if !hasNullMember(child[:vs]) && !hasNullMember(child[ve:]) && !bytes.Contains(child, []byte(`"spec":{}`)) {
				return child, nil
			}
		}
	}
	w.out.Truncate(start)
	slowChildren.Add(1)
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

// writeTop writes obj, a pointer to a Kubernetes object, without its status, a spec that is empty, and
// a member that is nil (null); the observed claim templates, when given, replace the rendered ones.
func (w *childWriter) writeTop(obj any, vct []byte) ([]byte, error) {
	w.vct, w.vctAt = vct, [2]int{}
	defer func() { w.vct = nil }()
	w.enc.Reset(&w.out, copyOptions, w.opts)
	if err := w.enc.WriteToken(jsontext.BeginObject); err != nil {
		return nil, err
	}
	if err := w.writeFields(reflect.ValueOf(obj).Elem()); err != nil {
		return nil, err
	}
	if err := w.enc.WriteToken(jsontext.EndObject); err != nil {
		return nil, err
	}
	b := w.out.Bytes()
	// The encoder ends a top-level value with a newline: not part of the child.
	if n := len(b); n > 0 && b[n-1] == '\n' {
		w.out.Truncate(n - 1)
		b = b[:n-1]
	}
	return b, nil
}

// writeFields writes the members of the struct v as encoding/json names and omits them (tags, inline
// embedded structs, omitempty, omitzero), leaving out status, an empty spec and nil members.
func (w *childWriter) writeFields(v reflect.Value) error {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fv := v.Field(i)
		if name == "" && (f.Anonymous || hasTagOption(opts, "inline")) && fv.Kind() == reflect.Struct {
			if err := w.writeFields(fv); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		switch {
		case name == "status",
			hasTagOption(opts, "omitempty") && emptyValue(fv),
			hasTagOption(opts, "omitzero") && fv.IsZero(),
			nilValue(fv):
			continue
		case name == "spec" && fv.IsZero():
			w.raw.Reset()
			if err := json.MarshalWrite(&w.raw, fv.Addr().Interface(), w.enc.Options()); err != nil {
				return err
			}
			if w.raw.String() == "{}" {
				continue // Leases are metadata only
			}
		}
		if err := w.enc.WriteToken(jsontext.String(name)); err != nil {
			return err
		}
		if err := json.MarshalEncode(w.enc, fv.Addr().Interface()); err != nil {
			return err
		}
	}
	return nil
}

// slowChildren counts the children written the slow way (a test checks no fixture's child is).
var slowChildren atomic.Int64

// fastKinds are the kinds writeFields writes as the library would (their top-level fields use none of
// the rules it does not follow: embedded pointers, promoted fields of unexported embedded structs, a
// type's own IsZero, a top-level MarshalJSON); anything else takes the library's whole marshal.
var fastKinds = map[reflect.Type]bool{}

func init() {
	for _, o := range []any{&appsv1.StatefulSet{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}, &corev1.ConfigMap{},
		&coordv1.Lease{}, &batchv1.Job{}, &batchv1.CronJob{}, &corev1.ServiceAccount{}, &rbacv1.Role{},
		&rbacv1.RoleBinding{}, &networkingv1.NetworkPolicy{}} {
		fastKinds[reflect.TypeOf(o)] = true
	}
}

// emptyList: v is a JSON array with no element.
func emptyList(v []byte) bool {
	v = bytes.TrimSpace(v)
	return len(v) >= 2 && v[0] == '[' && len(bytes.TrimSpace(v[1:len(v)-1])) == 0 && v[len(v)-1] == ']'
}

// hasNullMember: b, compact JSON, may have a member whose value is null: a `":null` whose quote is not
// escaped (inside a string value, such as a ConfigMap's JSON, it is written \":null).
func hasNullMember(b []byte) bool {
	for {
		i := bytes.Index(b, []byte(`":null`))
		if i < 0 {
			return false
		}
		n := 0
		for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return true
		}
		b = b[i+1:]
	}
}

func hasTagOption(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}

// emptyValue is encoding/json's omitempty test.
func emptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// nilValue: the member would be written as null.
func nilValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Map, reflect.Slice, reflect.Pointer, reflect.Interface:
		return v.IsNil()
	}
	return false
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
