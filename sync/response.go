package sync

import (
	"bytes"

	json "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// AppendJSON appends the response as encoding/json marshals it (the status's types carry v1 tags);
// children already encoded are copied as they are.
func (r *Response) AppendJSON(dst []byte) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	if err := json.MarshalWrite(buf, r, jsonv1.DefaultOptionsV1()); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	return b, nil
}
