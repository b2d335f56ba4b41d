package sync

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"time"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Children are written straight from their typed objects, in the form render.go describes (keys sorted,
// no nulls, no status, no empty spec), by walking the objects with reflection as encoding/json does
// (the same fields, names, omitempty and omitzero rules, Marshaler and TextMarshaler types) but
// writing each object's members in sorted order and leaving out nulls as it goes. A type this walk does
// not handle (a ",string" field) falls back to json.Marshal and the canonicalizer, which give the same
// bytes at more cost.

var errUnsupported = errors.New("not handled by the direct encoder")

// encodeTyped appends obj's answer; see encodeChild.
func (c *canonicalizer) encodeTyped(dst []byte, obj any, vct []byte) ([]byte, error) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, errUnsupported
	}
	c.vct = vct
	return c.typedValue(dst, v.Elem(), encoderFor(v.Elem().Type(), true), true, levelChild)
}

// encodedField is one member of a struct's JSON object, as encoding/json's typeFields finds it.
type encodedField struct {
	name      string
	index     []int
	typ       reflect.Type
	tag       bool
	omitEmpty bool
	omitZero  bool
	quoted    bool
}

// structFields are a struct type's members, sorted by name (the order of the answer's keys).
var structFields gosync.Map // reflect.Type -> []encodedField

func fieldsOf(t reflect.Type) []encodedField {
	if f, ok := structFields.Load(t); ok {
		return f.([]encodedField)
	}
	f := typeFields(t)
	structFields.Store(t, f)
	return f
}

// typeFields follows encoding/json's rules: exported fields, and the fields of embedded structs without
// a JSON name, by depth; of several fields of one name the shallowest wins, then the tagged one, and
// if that does not decide, none.
func typeFields(t reflect.Type) []encodedField {
	type queued struct {
		typ   reflect.Type
		index []int
	}
	var fields []encodedField
	next := []queued{{typ: t}}
	visited := map[reflect.Type]bool{}
	for len(next) > 0 {
		current := next
		next = nil
		count := map[reflect.Type]int{}
		for _, q := range current {
			count[q.typ]++
		}
		for _, q := range current {
			if visited[q.typ] {
				continue
			}
			visited[q.typ] = true
			for i := range q.typ.NumField() {
				sf := q.typ.Field(i)
				if sf.Anonymous {
					ft := sf.Type
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !validTag(name) {
					name = ""
				}
				index := append(slices.Clone(q.index), i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					f := encodedField{name: name, tag: name != "", index: index, typ: sf.Type,
						omitEmpty: hasOpt(opts, "omitempty"), omitZero: hasOpt(opts, "omitzero"), quoted: hasOpt(opts, "string")}
					if f.name == "" {
						f.name = sf.Name
					}
					fields = append(fields, f)
					if count[q.typ] > 1 {
						fields = append(fields, f) // the same field twice: annihilated below
					}
					continue
				}
				next = append(next, queued{typ: ft, index: index})
			}
		}
	}
	slices.SortStableFunc(fields, func(a, b encodedField) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := len(a.index) - len(b.index); c != 0 {
			return c
		}
		if a.tag != b.tag {
			if a.tag {
				return -1
			}
			return 1
		}
		return slices.Compare(a.index, b.index)
	})
	out := fields[:0]
	for i := 0; i < len(fields); {
		j := i + 1
		for j < len(fields) && fields[j].name == fields[i].name {
			j++
		}
		// Dominant: the first is shallowest (and tagged first); it wins unless another is as deep and
		// as tagged.
		if j == i+1 || len(fields[i+1].index) > len(fields[i].index) || fields[i].tag && !fields[i+1].tag {
			out = append(out, fields[i])
		}
		i = j
	}
	return out
}

func hasOpt(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}

// validTag is encoding/json's isValidTag.
func validTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

var (
	marshalerType       = reflect.TypeFor[json.Marshaler]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
	isZeroerType        = reflect.TypeFor[interface{ IsZero() bool }]()
	timeType            = reflect.TypeFor[metav1.Time]()
	stringType          = reflect.TypeFor[string]()
	mapStringStringType = reflect.TypeFor[map[string]string]()
)

// valueEncoder is how values of one type are written: decided once per type, as encoding/json's
// newTypeEncoder decides (a Marshaler first, through the value's address when it has one, then a
// TextMarshaler, then the kind).
type valueEncoder struct {
	how    encodeHow
	elem   *valueEncoder // pointer, slice, array and map elements
	fields []fieldEncoder
	// noAddr is the encoder for a value of this type that has no address (a map value, an interface's
	// dynamic value): its pointer methods are not used then.
	noAddr *valueEncoder
}

type fieldEncoder struct {
	encodedField
	enc *valueEncoder
}

type encodeHow uint8

const (
	howUnsupported encodeHow = iota
	howTime                  // metav1.Time by address: its MarshalJSON without boxing the value
	howAddrMarshaler
	howMarshaler
	howAddrText
	howText
	howBool
	howInt
	howUint
	howFloat32
	howFloat64
	howString
	howInterface
	howPointer
	howStruct
	howMapStringString
	howMap
	howBytes
	howSlice
	howArray
)

type encoderKey struct {
	t         reflect.Type
	allowAddr bool
}

var (
	encoderCache gosync.Map // encoderKey -> *valueEncoder, complete ones only
	encoderBuild struct {
		gosync.Mutex
		m map[encoderKey]*valueEncoder
	}
)

// encoderFor returns the encoder of t; allowAddr as in encoding/json (false only for noAddr).
func encoderFor(t reflect.Type, allowAddr bool) *valueEncoder {
	k := encoderKey{t, allowAddr}
	if e, ok := encoderCache.Load(k); ok {
		return e.(*valueEncoder)
	}
	encoderBuild.Lock()
	defer encoderBuild.Unlock()
	if encoderBuild.m == nil {
		encoderBuild.m = map[encoderKey]*valueEncoder{}
	}
	e := buildEncoder(k)
	// Published once the whole tree is built (a recursive type refers to encoders being built).
	for bk, be := range encoderBuild.m {
		encoderCache.Store(bk, be)
	}
	clear(encoderBuild.m)
	return e
}

func buildEncoder(k encoderKey) *valueEncoder {
	if e, ok := encoderCache.Load(k); ok {
		return e.(*valueEncoder)
	}
	if e, ok := encoderBuild.m[k]; ok {
		return e
	}
	e := &valueEncoder{}
	encoderBuild.m[k] = e
	t := k.t
	switch {
	case k.allowAddr && t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(marshalerType):
		e.how = howAddrMarshaler
		if t == timeType {
			e.how = howTime
		}
		e.noAddr = buildEncoder(encoderKey{t, false})
		return e
	case t.Implements(marshalerType):
		e.how = howMarshaler
		return e
	case k.allowAddr && t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(textMarshalerType):
		e.how = howAddrText
		e.noAddr = buildEncoder(encoderKey{t, false})
		return e
	case t.Implements(textMarshalerType):
		e.how = howText
		return e
	}
	switch t.Kind() {
	case reflect.Bool:
		e.how = howBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.how = howInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.how = howUint
	case reflect.Float32:
		e.how = howFloat32
	case reflect.Float64:
		e.how = howFloat64
	case reflect.String:
		e.how = howString
	case reflect.Interface:
		e.how = howInterface
	case reflect.Pointer:
		e.how = howPointer
		e.elem = buildEncoder(encoderKey{t.Elem(), true})
	case reflect.Struct:
		e.how = howStruct
		for _, f := range fieldsOf(t) {
			if f.quoted { // ",string": left to json.Marshal
				e.how, e.fields = howUnsupported, nil
				break
			}
			e.fields = append(e.fields, fieldEncoder{f, buildEncoder(encoderKey{f.typ, true})})
		}
	case reflect.Map:
		switch {
		case t.Key() == stringType && t.Elem() == stringType:
			e.how = howMapStringString
		case t.Key().Kind() == reflect.String:
			e.how = howMap
			e.elem = buildEncoder(encoderKey{t.Elem(), true})
		}
	case reflect.Slice:
		et := t.Elem()
		if et.Kind() == reflect.Uint8 && !reflect.PointerTo(et).Implements(marshalerType) && !reflect.PointerTo(et).Implements(textMarshalerType) {
			e.how = howBytes
			break
		}
		e.how = howSlice
		e.elem = buildEncoder(encoderKey{et, true})
	case reflect.Array:
		e.how = howArray
		e.elem = buildEncoder(encoderKey{t.Elem(), true})
	}
	return e
}

// structValue writes a struct as its object: members sorted, nulls left out when drop.
func (c *canonicalizer) structValue(dst []byte, v reflect.Value, e *valueEncoder, drop bool, level int) ([]byte, error) {
	dst = append(dst, '{')
	empty := len(dst)
	hasTemplates := false
fields:
	for i := range e.fields {
		f := &e.fields[i]
		fv := v
		for _, i := range f.index {
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue fields
				}
				fv = fv.Elem()
			}
			fv = fv.Field(i)
		}
		override := level == levelSpec && f.name == "volumeClaimTemplates" && c.vct != nil
		hasTemplates = hasTemplates || override
		if !override && (f.omitEmpty && emptyValue(fv) || f.omitZero && zeroValue(fv)) {
			continue
		}
		if level == levelChild && f.name == "status" {
			continue
		}
		mark := len(dst)
		if len(dst) > empty {
			dst = append(dst, ',')
		}
		dst = appendString(dst, f.name)
		dst = append(dst, ':')
		valueAt := len(dst)
		var err error
		switch {
		case override:
			// The observed templates, nulls kept (see claimTemplates).
			dst, err = c.value(dst, c.vct, false, levelDeeper)
		case level == levelChild && f.name == "spec":
			dst, err = c.typedValue(dst, fv, f.enc, drop, levelSpec)
			if err == nil && string(dst[valueAt:]) == "{}" {
				dst = dst[:mark]
				continue
			}
		default:
			dst, err = c.typedValue(dst, fv, f.enc, drop, levelDeeper)
		}
		if err != nil {
			return nil, err
		}
		if drop && string(dst[valueAt:]) == "null" {
			dst = dst[:mark]
		}
	}
	if level == levelSpec && c.vct != nil && !hasTemplates {
		return nil, errUnsupported // only a StatefulSet's spec has claim templates
	}
	return append(dst, '}'), nil
}

// emptyValue is encoding/json's isEmptyValue (omitempty).
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

// zeroValue is encoding/json's omitzero test: the type's IsZero method if it has one, else the zero value.
func zeroValue(v reflect.Value) bool {
	t := v.Type()
	switch {
	case t == timeType && v.CanAddr(): // creationTimestamp, on every object
		return v.Addr().Interface().(*metav1.Time).IsZero()
	case t.Kind() == reflect.Interface && t.Implements(isZeroerType):
		return v.IsNil() || v.Elem().Kind() == reflect.Pointer && v.Elem().IsNil() || v.Interface().(interface{ IsZero() bool }).IsZero()
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		return v.IsNil() || v.Interface().(interface{ IsZero() bool }).IsZero()
	case t.Implements(isZeroerType):
		return v.Interface().(interface{ IsZero() bool }).IsZero()
	case reflect.PointerTo(t).Implements(isZeroerType):
		if !v.CanAddr() {
			v2 := reflect.New(t).Elem()
			v2.Set(v)
			v = v2
		}
		return v.Addr().Interface().(interface{ IsZero() bool }).IsZero()
	}
	return v.IsZero()
}

// typedValue writes a value of e's type as encoding/json would, in the answer's form.
func (c *canonicalizer) typedValue(dst []byte, v reflect.Value, e *valueEncoder, drop bool, level int) ([]byte, error) {
	switch e.how {
	case howTime:
		if !v.CanAddr() {
			return c.typedValue(dst, v, e.noAddr, drop, level)
		}
		tm := v.Addr().Interface().(*metav1.Time)
		if tm.IsZero() {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '"')
		dst = tm.UTC().AppendFormat(dst, time.RFC3339)
		return append(dst, '"'), nil
	case howAddrMarshaler:
		if !v.CanAddr() {
			return c.typedValue(dst, v, e.noAddr, drop, level)
		}
		return c.marshaled(dst, v.Addr().Interface().(json.Marshaler), drop)
	case howMarshaler:
		if v.Kind() == reflect.Pointer && v.IsNil() {
			return append(dst, "null"...), nil
		}
		m, ok := v.Interface().(json.Marshaler)
		if !ok { // a nil interface
			return append(dst, "null"...), nil
		}
		return c.marshaled(dst, m, drop)
	case howAddrText, howText:
		if e.how == howAddrText {
			if !v.CanAddr() {
				return c.typedValue(dst, v, e.noAddr, drop, level)
			}
			v = v.Addr()
		}
		if v.Kind() == reflect.Pointer && v.IsNil() {
			return append(dst, "null"...), nil
		}
		m, ok := v.Interface().(encoding.TextMarshaler)
		if !ok {
			return append(dst, "null"...), nil
		}
		b, err := m.MarshalText()
		if err != nil {
			return nil, err
		}
		return appendString(dst, bytesString(b)), nil
	case howBool:
		return strconv.AppendBool(dst, v.Bool()), nil
	case howInt:
		var b [24]byte
		return appendNumber(dst, strconv.AppendInt(b[:0], v.Int(), 10))
	case howUint:
		var b [24]byte
		return appendNumber(dst, strconv.AppendUint(b[:0], v.Uint(), 10))
	case howFloat32, howFloat64:
		f := v.Float()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, errUnsupported
		}
		var b [32]byte
		bits := 64
		if e.how == howFloat32 {
			bits = 32
		}
		return appendNumber(dst, appendFloatBits(b[:0], f, bits))
	case howString:
		return appendString(dst, v.String()), nil
	case howInterface:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		ev := v.Elem()
		return c.typedValue(dst, ev, encoderFor(ev.Type(), true), drop, level)
	case howPointer:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		return c.typedValue(dst, v.Elem(), e.elem, drop, level)
	case howStruct:
		return c.structValue(dst, v, e, drop, level)
	case howMapStringString:
		return c.stringMap(dst, v)
	case howMap:
		return c.mapValue(dst, v, e, drop)
	case howBytes:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.Bytes())
		return append(dst, '"'), nil
	case howSlice, howArray:
		if e.how == howSlice && v.IsNil() {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i := range v.Len() {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = c.typedValue(dst, v.Index(i), e.elem, drop, levelDeeper); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	}
	return nil, errUnsupported
}

// marshaled writes what a Marshaler gives, in the answer's form.
func (c *canonicalizer) marshaled(dst []byte, m json.Marshaler, drop bool) ([]byte, error) {
	b, err := m.MarshalJSON()
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, errUnsupported
	}
	return c.value(dst, b, drop, levelDeeper)
}

// stringMap writes a map[string]string (labels, annotations, data) without reflection per entry.
func (c *canonicalizer) stringMap(dst []byte, v reflect.Value) ([]byte, error) {
	if v.IsNil() {
		return append(dst, "null"...), nil
	}
	if v.Type() != mapStringStringType {
		v = v.Convert(mapStringStringType)
	}
	m := v.Interface().(map[string]string)
	keys := c.keys[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = appendString(dst, m[k])
	}
	c.keys = keys[:0]
	return append(dst, '}'), nil
}

// mapValue writes a map with string keys as an object with its keys sorted; null values are left out
// when drop.
func (c *canonicalizer) mapValue(dst []byte, v reflect.Value, e *valueEncoder, drop bool) ([]byte, error) {
	if v.IsNil() {
		return append(dst, "null"...), nil
	}
	type entry struct {
		key string
		val reflect.Value
	}
	entries := make([]entry, 0, v.Len())
	for it := v.MapRange(); it.Next(); {
		entries = append(entries, entry{it.Key().String(), it.Value()})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	dst = append(dst, '{')
	empty := len(dst)
	for _, en := range entries {
		mark := len(dst)
		if len(dst) > empty {
			dst = append(dst, ',')
		}
		dst = appendString(dst, en.key)
		dst = append(dst, ':')
		valueAt := len(dst)
		var err error
		if dst, err = c.typedValue(dst, en.val, e.elem, drop, levelDeeper); err != nil {
			return nil, err
		}
		if drop && string(dst[valueAt:]) == "null" {
			dst = dst[:mark]
		}
	}
	return append(dst, '}'), nil
}

// appendFloatBits formats f as encoding/json does for a float of that size.
func appendFloatBits(dst []byte, f float64, bits int) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}
