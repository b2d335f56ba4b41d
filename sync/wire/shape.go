package wire

import (
	"bytes"
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

// Shape counts body's shape in one pass of the tokenizer, without decoding or allocating values. A body
// that is not JSON gets the counts up to where it fails, and the error.
func Shape(body []byte) (BodyShape, error) {
	var sh BodyShape
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), decodeOptions)
	counted := false // the value of the current top-level key is counted
	for {
		depth := dec.StackDepth()
		container, n := dec.StackIndex(depth)
		next := dec.PeekKind()
		if container == '[' && next != ']' && next != 0 {
			sh.Elements++
		}
		name := container == '{' && n%2 == 0 && next == '"'
		tok, err := dec.ReadToken()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return sh, err
		}
		switch {
		case name && depth == 1:
			k := tok.String()
			counted = k != "parent" && k != "controller" && k != "finalizing"
		case name && depth == 3 && counted:
			// An object's key inside a group: counted when the top-level value and the group are objects.
			if top, _ := dec.StackIndex(2); top == '{' {
				sh.Objects++
			}
		}
		if dec.StackDepth() == 0 {
			return sh, trailing(body[dec.InputOffset():])
		}
	}
}
