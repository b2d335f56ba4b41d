package delta

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"
)

// A chain stored in a bucket lists in revision order and tells a follower where to go on; a gap or a
// chunk whose content is not what its name says is refused.
func TestBlobChain(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	c := BlobChain{Bucket: b, Prefix: "prod/demo/chains"}
	_, next, err := c.List(ctx, 100)
	require.NoError(t, err)
	require.EqualValues(t, 101, next, "an empty chain goes on after its snapshot")

	put := func(first int64, n int) Header {
		var buf bytes.Buffer
		h, err := Write(&buf, "c1", 100, revs(first, n))
		require.NoError(t, err)
		require.NoError(t, c.Put(ctx, h, buf.Bytes()))
		return h
	}
	put(101, 10)
	put(111, 995) // 1105: a name with more digits still sorts by revision
	spans, next, err := c.List(ctx, 100)
	require.NoError(t, err)
	require.EqualValues(t, 1106, next)
	require.Equal(t, []int64{101, 111}, []int64{spans[0].First, spans[1].First})
	ch, err := c.ReadSpan(ctx, spans[1], 100, "c1", ReadOptions{})
	h, rs := ch.Header, ch.Revisions
	require.NoError(t, err)
	require.EqualValues(t, 1105, h.Last)
	require.Len(t, rs, 995)
	_, err = c.ReadSpan(ctx, spans[1], 100, "c2", ReadOptions{})
	require.ErrorContains(t, err, "is of cluster c1, not c2")

	// A chunk stored under another chunk's name (a copy by hand, a bucket mixed up).
	var buf bytes.Buffer
	_, err = Write(&buf, "c1", 100, revs(2000, 3))
	require.NoError(t, err)
	require.NoError(t, b.WriteAll(ctx, c.Key(Header{ChainStart: 100, First: 1106, Last: 1108}), buf.Bytes(), nil))
	spans, _, err = c.List(ctx, 100)
	require.NoError(t, err)
	_, err = c.ReadSpan(ctx, spans[2], 100, "c1", ReadOptions{})
	require.ErrorContains(t, err, "not what its name says")

	// A chunk missing in the middle.
	put(1200, 5)
	_, next, err = c.List(ctx, 100)
	require.ErrorIs(t, err, ErrGap)
	require.EqualValues(t, 1109, next, "the chain replays up to the gap: revision 1108")
}
