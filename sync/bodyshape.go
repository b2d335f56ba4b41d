package sync

import (
	"bytes"
	"errors"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// BodyShape is what the hook bounds before it decodes anything (hooks/limits.go): the members of every
// object two levels below a top-level key other than "parent", "controller" and "finalizing" (keys as
// written: the child and related objects), and the array elements anywhere. Objects is never below what
// decoding sees (it matches keys case-insensitively and after unescaping, so every other spelling is
// counted); elements, not bytes, bound what typed decoding allocates (each "{}" becomes a struct).
type BodyShape struct {
	Objects, Elements int
}

// scanOptions read a request as encoding/json reads it: a repeated key and invalid UTF-8 are not
// errors (a later key wins; an invalid byte becomes U+FFFD).
var scanOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// errTrailing is a body with more after its value than encoding/json's Decoder accepted.
var errTrailing = errors.New("data after the request object")

// Shape checks body as one JSON value and counts its shape in the same pass (jsontext, without
// decoding or allocating). A body that is not JSON gets the counts up to where it fails, and the error.
// After the value only whitespace, or a stray ']' or '}', may follow (json.Decoder.More stops there, so
// the hook always accepted it).
func Shape(body []byte) (BodyShape, error) {
	sh, _, err := shape(body, nil)
	return sh, err
}

// Top-level keys of a request, as a split in the shape pass reads them.
const (
	topParent = 1 << iota
	topChildren
	topRelated
	topFinalizing
	topController
)

// splitter splits a request in the shape pass, when the body is spelled as Metacontroller spells it:
// each top-level key once and exactly, groups and objects as objects. Anything else (a key spelled
// otherwise, repeated, or a value of another type) leaves ok false, and the library splits the body by
// encoding/json's rules instead (splitBody): the result is the same, found without a second pass.
type splitter struct {
	ok   bool
	rq   rawRequest
	seen int
	top  int     // the top-level key whose value is being read
	grp  *groups // its groups (children or related)
	// key and start: the object (or parent) whose bytes are being read, and where they start;
	// spanning: a container is being read, whose value ends back at spanDepth.
	key       string
	start     int
	spanning  bool
	spanDepth int
}

// name takes the name at depth (1: a top-level key, 2: a group, 3: an object).
func (s *splitter) name(depth int, name []byte) {
	switch depth {
	case 1:
		top := 0
		switch string(name) {
		case `"parent"`:
			top = topParent
		case `"children"`:
			top = topChildren
		case `"related"`:
			top = topRelated
		case `"finalizing"`:
			top = topFinalizing
		case `"controller"`:
			top = topController
		}
		if top == 0 || s.seen&top != 0 {
			s.ok = false
			return
		}
		s.seen |= top
		s.top = top
		s.grp = nil
		switch top {
		case topChildren:
			s.grp = &s.rq.children
		case topRelated:
			s.grp = &s.rq.related
		}
	case 2, 3:
		if s.grp == nil {
			return
		}
		key, err := readString(name)
		if err != nil {
			s.ok = false
			return
		}
		if depth == 2 {
			s.grp.list = append(s.grp.list, group{key: key})
		} else {
			s.key = key
		}
	}
}

// value sees the value starting at depth (the depth of its container): kind, and its bytes when it is
// not an object or array; start is its offset.
func (s *splitter) value(depth int, kind jsontext.Kind, v []byte, start int) {
	switch {
	case depth == 1 && s.top == topParent:
		s.spanOf(depth, kind, v, start)
	case depth == 1 && s.top == topFinalizing:
		switch kind {
		case 't', 'f':
			s.rq.finalizing = kind == 't'
		case 'n':
		default:
			s.ok = false
		}
	case depth == 1 && s.grp != nil:
		switch kind {
		case 'n':
			*s.grp = groups{}
		case '{':
			s.grp.set = true
		default:
			s.ok = false
		}
	case depth == 2 && s.grp != nil:
		if kind != '{' && kind != 'n' {
			s.ok = false
		}
	case depth == 3 && s.grp != nil:
		s.spanOf(depth, kind, v, start)
	}
}

// spanOf records a scalar at once, or waits for a container's end.
func (s *splitter) spanOf(depth int, kind jsontext.Kind, v []byte, start int) {
	if kind == '{' || kind == '[' {
		s.start, s.spanning, s.spanDepth = start, true, depth
		return
	}
	s.done(v)
}

// end sees a container close, back at depth.
func (s *splitter) end(depth int, body []byte, end int) {
	if s.spanning && s.spanDepth == depth {
		s.spanning = false
		s.done(body[s.start:end:end])
	}
}

func (s *splitter) done(raw []byte) {
	if s.top == topParent {
		s.rq.parent = raw
		return
	}
	g := &s.grp.list[len(s.grp.list)-1]
	g.objs = append(g.objs, rawObject{key: s.key, raw: raw})
}

// shape is Shape, where the value ends, and with sp, the split of the request (sp.ok).
func shape(body []byte, sp *splitter) (sh BodyShape, end int, err error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), scanOptions...)
	if sp != nil {
		*sp = splitter{ok: dec.PeekKind() == '{'}
		// Room for a 9-member cluster's groups without growing.
		sp.rq.children.list = make([]group, 0, 12)
		sp.rq.related.list = make([]group, 0, 4)
	}
	// The counted path: a top-level object, the object under a counted key (depth 2), an object under
	// one of its members (depth 3), whose members are counted.
	var excludedKey, countedV, countedG bool
	for {
		depth := dec.StackDepth()
		kind, n := dec.StackIndex(depth)
		next := dec.PeekKind()
		if kind == '{' && n%2 == 0 && next == '"' {
			name, err := dec.ReadValue()
			if err != nil {
				return sh, 0, err
			}
			switch depth {
			case 1:
				s := string(name)
				excludedKey = s == `"parent"` || s == `"controller"` || s == `"finalizing"`
			case 3:
				if countedG {
					sh.Objects++
				}
			}
			if sp != nil && sp.ok {
				sp.name(depth, name)
			}
			continue
		}
		if kind == '[' && next != ']' && next != 0 {
			sh.Elements++
		}
		switch next {
		case '{', '[':
			switch depth {
			case 1:
				countedV = next == '{' && !excludedKey
			case 2:
				countedG = next == '{' && countedV
			}
			if _, err := dec.ReadToken(); err != nil {
				return sh, 0, err
			}
			if sp != nil && sp.ok {
				sp.value(depth, next, nil, int(dec.InputOffset())-1)
			}
		case '}', ']':
			if _, err := dec.ReadToken(); err != nil {
				return sh, 0, err
			}
			if sp != nil && sp.ok {
				sp.end(dec.StackDepth(), body, int(dec.InputOffset()))
			}
		default:
			v, err := dec.ReadValue()
			if err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return sh, 0, err
			}
			if sp != nil && sp.ok {
				end := int(dec.InputOffset())
				sp.value(depth, next, body[end-len(v):end:end], end-len(v))
			}
		}
		if dec.StackDepth() == 0 {
			break
		}
	}
	end = int(dec.InputOffset())
	for _, c := range body[end:] {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case ']', '}':
			return sh, end, nil
		}
		return sh, 0, errTrailing
	}
	return sh, end, nil
}
