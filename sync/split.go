package sync

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// A body is split into its parent and its groups of objects as encoding/json decodes it into a Request
// (keys match case-insensitively, a later key overwrites an earlier one, a second children object adds
// its groups to the first, null clears a map, a value of another type is an error), in one pass of the
// library over the body, each object left as the bytes it was sent as (body[start:end]): no copy.

// wireRequest is a Request as the split reads it.
type wireRequest struct {
	Parent     rawPart   `json:"parent"`
	Children   groupPart `json:"children"`
	Related    groupPart `json:"related"`
	Finalizing bool      `json:"finalizing"`
}

// rawPart is a value of the body, as sent.
type rawPart struct{ body, v []byte }

func (p *rawPart) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := readRaw(dec, p.body)
	p.v = v
	return err
}

// readRaw reads the next value and returns it as the slice of body it was read from.
func readRaw(dec *jsontext.Decoder, body []byte) ([]byte, error) {
	v, err := dec.ReadValue()
	if err != nil {
		return nil, err
	}
	end := int(dec.InputOffset())
	return body[end-len(v) : end : end], nil
}

// groupPart is the children or related map.
type groupPart struct {
	body []byte
	g    groups
}

func (p *groupPart) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	switch dec.PeekKind() {
	case 'n':
		p.g = groups{}
		_, err := dec.ReadToken()
		return err
	case '{':
	default:
		return fmt.Errorf("a map of groups cannot be a JSON %v", dec.PeekKind())
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	p.g.set = true
	for dec.PeekKind() != '}' {
		key, err := readName(dec)
		if err != nil {
			return err
		}
		gr := group{key: key}
		switch dec.PeekKind() {
		case 'n':
			_, err = dec.ReadToken()
		case '{':
			err = p.readObjects(dec, &gr)
		default:
			err = fmt.Errorf("group %q cannot be a JSON %v", key, dec.PeekKind())
		}
		if err != nil {
			return err
		}
		p.g.list = append(p.g.list, gr)
	}
	_, err := dec.ReadToken()
	return err
}

// readObjects reads one group's objects, by their request key.
func (p *groupPart) readObjects(dec *jsontext.Decoder, gr *group) error {
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		key, err := readName(dec)
		if err != nil {
			return err
		}
		raw, err := readRaw(dec, p.body)
		if err != nil {
			return err
		}
		gr.objs = append(gr.objs, rawObject{key: key, raw: raw})
	}
	_, err := dec.ReadToken()
	return err
}

// splitBody splits a checked body.
func splitBody(r *objReader, body []byte) (*rawRequest, error) {
	w := wireRequest{Parent: rawPart{body: body}, Children: groupPart{body: body}, Related: groupPart{body: body}}
	if err := r.unmarshal(body, &w); err != nil {
		return nil, err
	}
	rq := &rawRequest{parent: w.Parent.v, finalizing: w.Finalizing, children: w.Children.g, related: w.Related.g}
	rq.children.resolve()
	rq.related.resolve()
	return rq, nil
}

// resolve keeps, of groups and of objects under one key, the last one, as a Go map does; and sorts.
func (g *groups) resolve() {
	g.list = lastByKey(g.list, func(x group) string { return x.key })
	for i := range g.list {
		g.list[i].objs = lastByKey(g.list[i].objs, func(x rawObject) string { return x.key })
	}
}

func lastByKey[T any](s []T, key func(T) string) []T {
	if len(s) < 2 {
		return s
	}
	slices.SortStableFunc(s, func(a, b T) int { return strings.Compare(key(a), key(b)) })
	out := s[:0]
	for i := range s {
		if i+1 < len(s) && key(s[i+1]) == key(s[i]) {
			continue
		}
		out = append(out, s[i])
	}
	return out
}
