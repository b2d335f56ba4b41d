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
	sh, _, err := shape(body)
	return sh, err
}

// shape is Shape, and where the value ends.
func shape(body []byte) (sh BodyShape, end int, err error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), scanOptions...)
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
		case '}', ']':
			if _, err := dec.ReadToken(); err != nil {
				return sh, 0, err
			}
		default:
			if _, err := dec.ReadValue(); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return sh, 0, err
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
