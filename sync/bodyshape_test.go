package sync

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The split made in the shape pass (splitter) is the library's (splitBody), whenever it is made; and
// it is made for every request as Metacontroller spells it (every fixture), so that the fast way is
// the one taken.
func TestShapeSplitIsTheLibrarySplit(t *testing.T) {
	fast := 0
	for name, body := range requestBodies(t) {
		for vname, v := range variants(body) {
			var sp splitter
			_, _, err := shape(v, &sp)
			if err != nil {
				continue // not JSON
			}
			if !sp.ok {
				require.NotEqual(t, "as-is", vname, "%s: a body as Metacontroller spells it is split in the shape pass", filepath.Base(name))
				continue
			}
			fast++
			sp.rq.children.resolve()
			sp.rq.related.resolve()
			r := objReaders.Get().(*objReader)
			want, err := splitBody(r, v)
			objReaders.Put(r)
			require.NoError(t, err, "%s/%s", filepath.Base(name), vname)
			for _, g := range []*groups{&want.children, &want.related, &sp.rq.children, &sp.rq.related} {
				if len(g.list) == 0 {
					g.list = nil // preallocated or not: no group either way
				}
			}
			require.Equal(t, *want, sp.rq, "%s/%s", filepath.Base(name), vname)
		}
	}
	require.Positive(t, fast)
}
