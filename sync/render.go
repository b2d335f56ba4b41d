package sync

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (p *plan) meta(name, component string) metav1.ObjectMeta {
	n := p.f.names
	return metav1.ObjectMeta{Name: name, Namespace: n.Namespace, Labels: n.ObjectLabels(component)}
}

// A child is answered as the JSON of its typed object with no nulls (a null becomes a field removal
// or a perpetual diff), no status and no empty spec (Leases are metadata only), keys sorted at every
// level. That is byte for byte what encoding/json makes of the object after a round trip through
// map[string]any, which is how the hook answered before; it is now written straight from
// json.Marshal's output in one pass (canonicalizer), without building the maps.

// encodeChild appends obj's answer to dst. vct, when not nil, replaces spec.volumeClaimTemplates with
// the observed bytes (see claimTemplates), as the API server sent them: sorted and re-encoded, nulls
// kept.
func (c *canonicalizer) encodeChild(dst []byte, obj any, vct []byte) ([]byte, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	c.vct = vct
	return c.object(dst, b, true, levelChild)
}

// canonicalizer re-encodes checked JSON with sorted keys, as json.Marshal does a map[string]any decoded
// from it: a later duplicate key wins, strings are decoded and encoded again (HTML characters escaped,
// invalid UTF-8 made U+FFFD), numbers become float64s. Its scratch space is reused across calls.
type canonicalizer struct {
	members []member
	buf     []byte
	keys    []string
	vct     []byte
	// out holds the children's JSON (plan.children).
	out []byte
}

// canvases recycles canonicalizers and the buffer children are written into (32 KB for 9 members).
var canvases = gosync.Pool{New: func() any { return &canonicalizer{out: make([]byte, 0, 32<<10)} }}

// Release gives back the buffer the children are written in, for the next answer. The response and
// its children must not be used afterwards; a response that is never released is simply collected.
func (r *Response) Release() {
	if r.canon != nil {
		c := r.canon
		r.canon, r.Children = nil, nil
		c.vct = nil
		canvases.Put(c)
	}
}

type member struct {
	key string
	val []byte
	// keep: the value's nulls are kept (the observed claim templates).
	keep bool
}

// Where an object is in a child: the child itself, its spec, or deeper.
const (
	levelChild = iota
	levelSpec
	levelDeeper
)

// object appends the canonical form of the object b; drop removes null members.
func (c *canonicalizer) object(dst, b []byte, drop bool, level int) ([]byte, error) {
	start := len(c.members)
	r := &reader{b: b}
	r.object()
	for k, ok := r.nextKey(); ok; k, ok = r.nextKey() {
		c.members = append(c.members, member{key: c.keyString(k), val: r.span()})
	}
	if level == levelSpec && c.vct != nil {
		c.members = append(c.members, member{key: "volumeClaimTemplates", val: c.vct, keep: true})
	}
	ms := c.members[start:]
	slices.SortStableFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	dst = append(dst, '{')
	first := true
	for i := start; i < len(c.members); i++ {
		m := c.members[i]
		if i+1 < len(c.members) && c.members[i+1].key == m.key {
			continue // a later value of the same key wins
		}
		if drop && m.val[0] == 'n' {
			continue
		}
		next := levelDeeper
		if level == levelChild {
			switch m.key {
			case "status":
				continue
			case "spec":
				if m.val[0] == '{' && c.emptyAfterDrop(m.val) {
					continue
				}
				next = levelSpec
			}
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendString(dst, m.key)
		dst = append(dst, ':')
		var err error
		if dst, err = c.value(dst, m.val, drop && !m.keep, next); err != nil {
			return nil, err
		}
	}
	c.members = c.members[:start]
	return append(dst, '}'), nil
}

// emptyAfterDrop says whether an object has no member left once nulls are removed.
func (c *canonicalizer) emptyAfterDrop(b []byte) bool {
	r := &reader{b: b}
	r.object()
	for _, ok := r.nextKey(); ok; _, ok = r.nextKey() {
		if !r.null() {
			return false
		}
	}
	return true
}

func (c *canonicalizer) value(dst, v []byte, drop bool, level int) ([]byte, error) {
	switch v[0] {
	case '{':
		return c.object(dst, v, drop, level)
	case '[':
		r := &reader{b: v}
		r.array()
		dst = append(dst, '[')
		for n := 0; r.nextElem(n == 0); n++ {
			if n > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = c.value(dst, r.span(), drop, levelDeeper); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case '"':
		return c.appendStringValue(dst, v), nil
	case 't', 'f', 'n':
		return append(dst, v...), nil
	default:
		return appendNumber(dst, v)
	}
}

// keyString is an object key as a map holds it (decoded).
func (c *canonicalizer) keyString(k key) string {
	if k.plain && htmlSafe(k.raw) {
		return bytesString(k.raw)
	}
	return string(unquote(nil, k.raw))
}

// appendStringValue re-encodes a JSON string: copied when encoding it again changes nothing.
func (c *canonicalizer) appendStringValue(dst, v []byte) []byte {
	raw := v[1 : len(v)-1]
	if htmlSafe(raw) {
		return append(dst, v...)
	}
	c.buf = unquote(c.buf[:0], raw)
	return appendString(dst, bytesString(c.buf))
}

// htmlSafe: ASCII that encoding/json writes as it is (no quote, backslash, control or HTML character).
func htmlSafe(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// appendNumber writes a JSON number as encoding/json writes the float64 it decodes to.
func appendNumber(dst, lit []byte) ([]byte, error) {
	// An integer of at most 15 digits is exact as a float64 and printed the same.
	digits := lit
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) <= 15 {
		integer := true
		for _, c := range digits {
			integer = integer && '0' <= c && c <= '9'
		}
		if integer {
			return append(dst, lit...), nil
		}
	}
	f, err := strconv.ParseFloat(bytesString(lit), 64)
	if err != nil {
		return nil, &json.UnmarshalTypeError{Value: "number " + string(lit), Type: reflect.TypeFor[float64]()}
	}
	return appendFloat(dst, f), nil
}

// appendFloat formats f as encoding/json does (ES6 number to string).
func appendFloat(dst []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendString quotes s as encoding/json quotes the string it decodes from its own encoding of s (HTML
// characters escaped, its default; an invalid byte becomes U+FFFD).
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			// encoding/json writes \ufffd, which decodes to U+FFFD, which it then writes as it is.
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendJSON appends the response as json.Marshal writes it, encoded children copied as they are.
func (r *Response) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"status":`...)
	st, err := json.Marshal(r.Status)
	if err != nil {
		return nil, err
	}
	dst = append(dst, st...)
	dst = append(dst, `,"children":`...)
	if r.Children == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, c := range r.Children {
			if i > 0 {
				dst = append(dst, ',')
			}
			if raw, ok := c.(*json.RawMessage); ok {
				dst = append(dst, *raw...)
				continue
			}
			b, err := json.Marshal(c)
			if err != nil {
				return nil, err
			}
			dst = append(dst, b...)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"resyncAfterSeconds":`...)
	dst = appendFloat(dst, r.ResyncAfterSeconds)
	dst = append(dst, `,"finalized":`...)
	dst = strconv.AppendBool(dst, r.Finalized)
	return append(dst, '}'), nil
}
