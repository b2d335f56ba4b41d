package sync

import (
	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/sync/wire"
)

// Response is what Metacontroller applies. Children is never nil: an absent list deletes every child.
// Each child is its JSON (wire.Child; from Compute, a map[string]any); both marshal to the same answer.
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
}

// AppendJSON appends the response as the hook sends it.
func (r *Response) AppendJSON(dst []byte) ([]byte, error) {
	b, err := wire.Marshal(r)
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}
