package sync

import (
	"bytes"
	stdjson "encoding/json"

	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// AppendJSON appends the response as encoding/json marshals it (the status's types carry v1 tags);
// children already encoded are copied as they are, without a pass of the library's reflection over
// each (an interface value costs it two allocations).
func (r *Response) AppendJSON(dst []byte) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	enc := jsontext.NewEncoder(buf, jsonv1.DefaultOptionsV1())
	write := func(toks ...jsontext.Token) error {
		for _, t := range toks {
			if err := enc.WriteToken(t); err != nil {
				return err
			}
		}
		return nil
	}
	if err := write(jsontext.BeginObject, jsontext.String("status")); err != nil {
		return nil, err
	}
	if err := json.MarshalEncode(enc, r.Status); err != nil {
		return nil, err
	}
	if err := write(jsontext.String("children")); err != nil {
		return nil, err
	}
	if r.Children == nil {
		if err := write(jsontext.Null); err != nil {
			return nil, err
		}
	} else {
		if err := write(jsontext.BeginArray); err != nil {
			return nil, err
		}
		for _, c := range r.Children {
			var err error
			if raw, ok := c.(*stdjson.RawMessage); ok {
				err = enc.WriteValue(jsontext.Value(*raw))
			} else {
				err = json.MarshalEncode(enc, c)
			}
			if err != nil {
				return nil, err
			}
		}
		if err := write(jsontext.EndArray); err != nil {
			return nil, err
		}
	}
	if err := write(jsontext.String("resyncAfterSeconds"), jsontext.Float(r.ResyncAfterSeconds),
		jsontext.String("finalized"), jsontext.Bool(r.Finalized), jsontext.EndObject); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	// The encoder ends a top-level value with a newline.
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	return b, nil
}
