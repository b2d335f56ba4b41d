package sync

import (
	"bytes"
	stdjson "encoding/json"

	"github.com/etcdhook/etcdhook/api"
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

// Response is what Metacontroller applies. Children is never nil: an absent list deletes every child.
// From ComputeBody each child is its JSON (a *json.RawMessage, keys sorted); from Compute a map[string]any.
// Both marshal to the same bytes; AppendJSON writes them without a second encoding.
type Response struct {
	Status             *api.ClusterStatus `json:"status"`
	Children           []any              `json:"children"`
	ResyncAfterSeconds float64            `json:"resyncAfterSeconds"`
	Finalized          bool               `json:"finalized"`
	// Deleted lists the observed children this answer leaves out on purpose (not sent: the hook logs it).
	Deleted []Deletion `json:"-"`
	// For the log, not sent: the parent (namespace/name) and whether the request was a finalize.
	Parent     string `json:"-"`
	Finalizing bool   `json:"-"`
	// Changes: what this answer's conditions change against the parent's status (the audit trail).
	Changes []Change `json:"-"`
	// writer holds the buffer the children are written in (see Release).
	writer *childWriter
}

// Release gives back the buffer the children are written in, for the next answer. The response and
// its children must not be used afterwards; a response that is never released is simply collected.
func (r *Response) Release() {
	if w := r.writer; w != nil {
		r.writer, r.Children = nil, nil
		w.vct = nil
		writers.Put(w)
	}
}
