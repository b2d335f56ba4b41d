package sync

import (
	"bytes"
	"errors"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// This file reads JSON the way encoding/json decodes it into typed Go values, without reflection and
// without copying: the request body is checked once (checkJSON, the same grammar and nesting bound as
// encoding/json's scanner), then a reader walks it and fills only the fields the decision reads. The
// rules a reader follows are encoding/json's, because the answer must not change: keys match a field
// exactly or case-insensitively (bytes.EqualFold on the unescaped key), a later duplicate key
// overwrites (and an object decodes into what an earlier one left), null leaves a string or number as
// it was and clears a pointer, map or slice, and a value of the wrong JSON type is an error.

// maxDepth is encoding/json's nesting bound: deeper input is a syntax error.
const maxDepth = 10000

var errDepth = errors.New("exceeded max depth")

// syntaxError is where and why a body is not JSON.
type syntaxError struct {
	msg string
	off int
}

func (e *syntaxError) Error() string { return e.msg + " at offset " + strconv.Itoa(e.off) }

// checkJSON checks that b holds one JSON value, followed by nothing a json.Decoder would read as another
// value: only whitespace, or a stray ']' or '}' (Decoder.More stops there, so the hook accepted it).
// With sh it also counts, in the same pass, what hooks bounds before decoding (see BodyShape).
func checkJSON(b []byte, sh *BodyShape) error {
	i := skipWS(b, 0)
	if i == len(b) {
		return &syntaxError{"unexpected end of JSON input", i}
	}
	end, err := checkValue(b, i, sh)
	if err != nil {
		return err
	}
	if j := skipWS(b, end); j < len(b) && b[j] != ']' && b[j] != '}' {
		return &syntaxError{"data after the request object", j}
	}
	return nil
}

// BodyShape is what the hook bounds before it decodes anything (hooks/limits.go): the members of every
// object two levels below a top-level key other than "parent", "controller" and "finalizing" (keys as
// written: the child and related objects), and the array elements anywhere. Exact is false when the
// body nests too deep for these counts to match the hook's own scan, which then counts instead.
type BodyShape struct {
	Objects, Elements int
	Exact             bool
}

// shapeDepth is the depth past which BodyShape leaves the counting to the hook's scan (which counts
// differently beyond 256 levels).
const shapeDepth = 200

// checkValue checks the value at b[i] and returns the offset after it. Containers are tracked on a
// small stack so that depth costs no recursion. With sh, array elements are counted as they pass, and
// the members of objects at depth 3 under a depth-2 object whose top-level key is not excluded.
func checkValue(b []byte, i int, sh *BodyShape) (int, error) {
	var small [64]byte
	stack := small[:0] // '{' or '[' per open container
	var err error
	// The counted path: a top-level object, the object under a counted key (depth 2), an object under
	// one of its members (depth 3), whose members are counted.
	counting := sh != nil && b[i] == '{'
	if sh != nil {
		*sh = BodyShape{Exact: true}
	}
	var excludedKey, countedV, countedG bool
	key := func(k int) (int, error) {
		start := k
		k, err := checkKey(b, k)
		if err != nil || !counting {
			return k, err
		}
		switch len(stack) {
		case 1:
			switch string(b[start:skipStringChecked(b, start)]) {
			case `"parent"`, `"controller"`, `"finalizing"`:
				excludedKey = true
			default:
				excludedKey = false
			}
		case 3:
			if countedG {
				sh.Objects++
			}
		}
		return k, nil
	}
	for {
		// A value starts at i.
		i = skipWS(b, i)
		if i >= len(b) {
			return i, &syntaxError{"unexpected end of JSON input", i}
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) >= maxDepth {
				return i, &syntaxError{errDepth.Error(), i}
			}
			if counting {
				switch len(stack) {
				case 1:
					countedV = c == '{' && !excludedKey
				case 2:
					countedG = c == '{' && countedV
				case shapeDepth:
					sh.Exact = false
				}
			}
			stack = append(stack, c)
			i = skipWS(b, i+1)
			if i < len(b) && (c == '{' && b[i] == '}' || c == '[' && b[i] == ']') {
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				if i, err = key(i); err != nil {
					return i, err
				}
			} else if counting {
				sh.Elements++
			}
			continue
		case c == '"':
			if i, err = checkString(b, i); err != nil {
				return i, err
			}
		case c == '-' || '0' <= c && c <= '9':
			if i, err = checkNumber(b, i); err != nil {
				return i, err
			}
		case c == 't':
			if i, err = checkLiteral(b, i, "true"); err != nil {
				return i, err
			}
		case c == 'f':
			if i, err = checkLiteral(b, i, "false"); err != nil {
				return i, err
			}
		case c == 'n':
			if i, err = checkLiteral(b, i, "null"); err != nil {
				return i, err
			}
		default:
			return i, &syntaxError{"invalid character " + strconv.QuoteRune(rune(c)) + " looking for beginning of value", i}
		}
		// A value ended at i: close containers until one continues.
		for {
			if len(stack) == 0 {
				return i, nil
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return i, &syntaxError{"unexpected end of JSON input", i}
			}
			top := stack[len(stack)-1]
			if b[i] == ',' {
				i++
				if top == '{' {
					if i, err = key(skipWS(b, i)); err != nil {
						return i, err
					}
				} else if counting {
					sh.Elements++
				}
				break
			}
			if top == '{' && b[i] == '}' || top == '[' && b[i] == ']' {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			return i, &syntaxError{"invalid character " + strconv.QuoteRune(rune(b[i])) + " after a value", i}
		}
	}
}

// checkKey checks `"key" :` at b[i] and returns the offset of the value.
func checkKey(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return i, &syntaxError{"looking for beginning of object key string", i}
	}
	i, err := checkString(b, i)
	if err != nil {
		return i, err
	}
	i = skipWS(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, &syntaxError{"after object key", i}
	}
	return i + 1, nil
}

func checkString(b []byte, i int) (int, error) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			i++
			if i >= len(b) {
				break
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for k := 1; k <= 4; k++ {
					if i+k >= len(b) || !isHex(b[i+k]) {
						return i, &syntaxError{"invalid character in \\u hexadecimal character escape", i}
					}
				}
				i += 4
			default:
				return i, &syntaxError{"invalid character in string escape code", i}
			}
		case c < 0x20:
			return i, &syntaxError{"invalid character in string literal", i}
		}
	}
	return i, &syntaxError{"unexpected end of JSON input", i}
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func checkNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return i, &syntaxError{"invalid number", start}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return i, &syntaxError{"invalid number", start}
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return i, &syntaxError{"invalid number", start}
		}
	}
	return i, nil
}

func checkLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, &syntaxError{"invalid literal", i}
	}
	return i + len(lit), nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipChecked returns the offset after the value at b[i], which checkJSON has already checked.
func skipChecked(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipStringChecked(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipStringChecked(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default: // number or literal: up to the next delimiter
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

func skipStringChecked(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// ---- decoding checked JSON ----

// errWrongType is a value of the wrong JSON type for the field it fills (encoding/json's
// UnmarshalTypeError). Decoding goes on, as encoding/json's does; the caller words the error.
var errWrongType = errors.New("value of the wrong JSON type")

// reader decodes JSON checked by checkJSON. err is the first decoding error (a wrong type, a time that
// does not parse); the walk goes on past it, so the caller sees the whole input either way.
type reader struct {
	b   []byte
	i   int
	err error
	// objs backs the object lists of a request's groups (groupsInto).
	objs []rawObject
	// pairs is scratch space for stringMapInto.
	pairs [][2]string
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// next returns the first byte of the value at the cursor.
func (r *reader) next() byte {
	r.i = skipWS(r.b, r.i)
	return r.b[r.i]
}

// skip passes over the value at the cursor.
func (r *reader) skip() { r.next(); r.i = skipChecked(r.b, r.i) }

// span returns the bytes of the value at the cursor and passes over it.
func (r *reader) span() []byte {
	r.next()
	start := r.i
	r.i = skipChecked(r.b, r.i)
	return r.b[start:r.i]
}

// null passes over a null at the cursor and says whether there was one.
func (r *reader) null() bool {
	if r.next() == 'n' {
		r.i += len("null")
		return true
	}
	return false
}

// object enters the object at the cursor. For null it passes over it and returns false (a struct is
// left as it was); any other value is a type error, passed over.
func (r *reader) object() bool {
	switch r.next() {
	case '{':
		r.i++
		return true
	case 'n':
		r.i += len("null")
		return false
	}
	r.fail(errWrongType)
	r.skip()
	return false
}

// array enters the array at the cursor, like object.
func (r *reader) array() bool {
	switch r.next() {
	case '[':
		r.i++
		return true
	case 'n':
		r.i += len("null")
		return false
	}
	r.fail(errWrongType)
	r.skip()
	return false
}

// key is an object key as written (between the quotes, escapes not undone).
type key struct {
	raw []byte
	// plain: ASCII without escapes, so that the key is raw itself.
	plain bool
}

// is says whether the key names the field name: exactly or case-insensitively, as encoding/json
// matches struct fields.
func (k key) is(name string) bool {
	if k.plain {
		if len(k.raw) != len(name) {
			return false
		}
		if string(k.raw) == name {
			return true
		}
		for i := range len(name) {
			a, b := k.raw[i], name[i]
			if 'A' <= a && a <= 'Z' {
				a += 'a' - 'A'
			}
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			if a != b {
				return false
			}
		}
		return true
	}
	var buf [64]byte
	return bytes.EqualFold(unquote(buf[:0], k.raw), []byte(name))
}

// string returns the key unescaped (a map key).
func (k key) string() string {
	if k.plain {
		return bytesString(k.raw)
	}
	return stringFrom(k.raw)
}

// nextKey moves to the next member of the object being read and returns its key, the cursor on its
// value; false at the end of the object (passed over).
func (r *reader) nextKey() (key, bool) {
	i := skipWS(r.b, r.i)
	if r.b[i] == ',' {
		i = skipWS(r.b, i+1)
	}
	if r.b[i] == '}' {
		r.i = i + 1
		return key{}, false
	}
	end := skipStringChecked(r.b, i)
	raw := r.b[i+1 : end-1]
	plain := true
	for _, c := range raw {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	r.i = skipWS(r.b, end) + 1 // past ':'
	return key{raw, plain}, true
}

// nextElem moves to the next element of the array being read; false at its end (passed over).
func (r *reader) nextElem(first bool) bool {
	i := skipWS(r.b, r.i)
	if !first && r.b[i] == ',' {
		i = skipWS(r.b, i+1)
	}
	if r.b[i] == ']' {
		r.i = i + 1
		return false
	}
	r.i = i
	return true
}

// str reads a string value; ok is false for null (nothing to store) and for a type error (recorded).
func (r *reader) str() (s string, ok bool) {
	switch r.next() {
	case '"':
		start := r.i
		r.i = skipStringChecked(r.b, r.i)
		return stringFrom(r.b[start+1 : r.i-1]), true
	case 'n':
		r.i += len("null")
		return "", false
	}
	r.fail(errWrongType)
	r.skip()
	return "", false
}

// stringInto stores a string field: null leaves it as it was.
func (r *reader) stringInto(dst *string) {
	if s, ok := r.str(); ok {
		*dst = s
	}
}

// stringPtrInto stores a *string field: null clears it, a string is written through it.
func (r *reader) stringPtrInto(dst **string) {
	if r.null() {
		*dst = nil
		return
	}
	if s, ok := r.str(); ok {
		if *dst == nil {
			*dst = new(string)
		}
		**dst = s
	}
}

// integer reads a number that must be an integer within bits; ok is false for null and for an error.
func (r *reader) integer(bits int) (int64, bool) {
	c := r.next()
	if c == 'n' {
		r.i += len("null")
		return 0, false
	}
	span := r.span()
	if c != '-' && (c < '0' || c > '9') {
		r.fail(errWrongType)
		return 0, false
	}
	n, err := strconv.ParseInt(bytesString(span), 10, 64)
	if err != nil || n != n<<(64-bits)>>(64-bits) {
		r.fail(errWrongType)
		return 0, false
	}
	return n, true
}

func (r *reader) int64Into(dst *int64) {
	if n, ok := r.integer(64); ok {
		*dst = n
	}
}

func (r *reader) int32Into(dst *int32) {
	if n, ok := r.integer(32); ok {
		*dst = int32(n)
	}
}

func (r *reader) int32PtrInto(dst **int32) {
	if r.null() {
		*dst = nil
		return
	}
	if *dst == nil {
		*dst = new(int32) // encoding/json allocates before it reads the number
	}
	r.int32Into(*dst)
}

func (r *reader) boolInto(dst *bool) {
	switch r.next() {
	case 't':
		r.i += len("true")
		*dst = true
	case 'f':
		r.i += len("false")
		*dst = false
	case 'n':
		r.i += len("null")
	default:
		r.fail(errWrongType)
		r.skip()
	}
}

// stringMapInto decodes an object of strings into *dst: null clears the map, members are added to the
// map already there, a null member stores "". The members are gathered first so that a new map is
// made at its size (labels and annotations are read for every member's objects).
func (r *reader) stringMapInto(dst *map[string]string) {
	if r.null() {
		*dst = nil
		return
	}
	if !r.object() {
		return
	}
	pairs := r.pairs[:0]
	for k, ok := r.nextKey(); ok; k, ok = r.nextKey() {
		s, _ := r.str()
		pairs = append(pairs, [2]string{k.string(), s})
	}
	r.pairs = pairs
	if *dst == nil {
		*dst = make(map[string]string, len(pairs))
	}
	for _, p := range pairs {
		(*dst)[p[0]] = p[1]
	}
}

// ---- strings ----

// bytesString is b as a string without a copy. Decoded strings point into the request body, which is
// never written after it is read: the body stays alive as long as anything decoded from it.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// stringFrom is the string a JSON string's contents (quotes excluded) decode to: the bytes themselves
// when nothing needs undoing (no escape, valid UTF-8), else a decoded copy.
func stringFrom(raw []byte) string {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c == '\\' {
			return bytesString(unquote(make([]byte, 0, len(raw)), raw))
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && n == 1 {
			return bytesString(unquote(make([]byte, 0, len(raw)+8), raw))
		}
		i += n
	}
	return bytesString(raw)
}

// unquote appends the decoded contents of a checked JSON string to dst, exactly as encoding/json
// decodes it: escapes undone, an invalid surrogate or invalid UTF-8 replaced by U+FFFD.
func unquote(dst, s []byte) []byte {
	for r := 0; r < len(s); {
		// Copy the run of bytes that need nothing.
		run := r
		for run < len(s) && s[run] != '\\' && s[run] < utf8.RuneSelf {
			run++
		}
		dst = append(dst, s[r:run]...)
		if r = run; r == len(s) {
			break
		}
		if c := s[r]; c != '\\' {
			rr, n := utf8.DecodeRune(s[r:])
			r += n
			dst = utf8.AppendRune(dst, rr)
			continue
		}
		r++
		switch e := s[r]; e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			rr := getu4(s[r-1:])
			r += 5
			if utf16.IsSurrogate(rr) {
				if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
					r += 6
					dst = utf8.AppendRune(dst, dec)
					continue
				}
				rr = unicode.ReplacementChar
			}
			dst = utf8.AppendRune(dst, rr)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
		r++
	}
	return dst
}

// getu4 decodes \uXXXX at the start of s, -1 if there is none.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
