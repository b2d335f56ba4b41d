package membership

import (
	"strconv"

	"github.com/etcdhook/etcdhook/api"
)

// dataBinding is what the data directory's binding records beyond the member's identity, as the agent
// last read or made it: the snapshot the data was restored from, and the recovery it carries. The
// binding written once etcd runs (the first look) keeps both.
type dataBinding struct {
	// restored: the snapshot the data directory was restored from; reported.
	restored *Restored
	// recovered: the binding's Recovered as read at the last start decision (a rewrite keeps it).
	recovered string
}

// read takes them from the binding the start decision read.
func (d *dataBinding) read(b *Binding) {
	d.restored, d.recovered = b.Restored, b.Recovered
}

// fill reports the snapshot the data was restored from.
func (d *dataBinding) fill(r *api.Report) {
	if d.restored != nil {
		r.RestoredFrom, r.RestoredRevision = d.restored.URL, strconv.FormatInt(d.restored.Revision, 10)
	}
}
