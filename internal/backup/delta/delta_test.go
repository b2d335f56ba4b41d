package delta

import (
	"bytes"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 27, 2, 0, 0, 0, time.UTC)

// revs are n contiguous revisions from first, a put each, every tenth a delete and a put in one txn.
func revs(first int64, n int) []Revision {
	out := make([]Revision, n)
	for i := range out {
		r := Revision{Rev: first + int64(i), Time: t0.Add(time.Duration(i) * 10 * time.Millisecond),
			Ops: []Op{{Type: Put, Key: []byte("k"), Value: []byte{byte(i)}, Lease: int64(i % 3)}}}
		if i%10 == 0 {
			r.Ops = append(r.Ops, Op{Type: Delete, Key: []byte("gone")})
		}
		out[i] = r
	}
	return out
}

func chunk(t *testing.T, rs []Revision, to ...age.Recipient) []byte {
	t.Helper()
	var b bytes.Buffer
	_, err := Write(&b, "cdf818194e3a8c32", 100, rs, to...)
	require.NoError(t, err)
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	rs := revs(101, 50)
	for _, tc := range []struct {
		name string
		to   []age.Recipient
		ids  []age.Identity
	}{{"plain", nil, nil}, {"encrypted", []age.Recipient{id.Recipient()}, []age.Identity{id}}} {
		t.Run(tc.name, func(t *testing.T) {
			b := chunk(t, rs, tc.to...)
			if len(tc.to) > 0 {
				require.NotContains(t, string(b), "gone", "encrypted at rest")
			}
			h, got, err := Read(bytes.NewReader(b), tc.ids...)
			require.NoError(t, err)
			require.Equal(t, Header{ClusterID: "cdf818194e3a8c32", ChainStart: 100, First: 101, Last: 150,
				FirstTime: rs[0].Time, LastTime: rs[49].Time}, h)
			require.Equal(t, rs, got)
		})
	}
}

// Every damaged or foreign chunk is refused with the reason.
func TestReadRefuses(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	other, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	good := chunk(t, revs(101, 50))
	sealed := chunk(t, revs(101, 50), id.Recipient())
	reordered := revs(101, 5)
	reordered[2], reordered[3] = reordered[3], reordered[2]
	missing := append(revs(101, 2), revs(104, 2)...)

	for _, tc := range []struct {
		name string
		data []byte
		ids  []age.Identity
		want string
	}{
		{"truncated", good[:len(good)/2], nil, ""},
		{"truncated by one byte", good[:len(good)-1], nil, ""},
		{"empty", nil, nil, "the chunk's header"},
		{"wrong key", sealed, []age.Identity{other}, "decrypting the chunk"},
		{"encrypted, no key", sealed, nil, "no key is configured"},
		{"plain where the chain is encrypted", good, []age.Identity{id}, "not encrypted, but the chain is"},
		{"encrypted chunk cut short", sealed[:len(sealed)-20], []age.Identity{id}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Read(bytes.NewReader(tc.data), tc.ids...)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}

	// Write refuses what Read would: the follower never uploads a chunk no restore can use.
	for _, tc := range []struct {
		name string
		rs   []Revision
		want string
	}{
		{"reordered", reordered, "out of order"},
		{"a revision missing", missing, "missing or out of order"},
		{"no revision", nil, "at least one revision"},
		{"within the snapshot", revs(100, 3), "not after its chain's snapshot"},
		{"an empty revision", []Revision{{Rev: 101, Time: t0}}, "has no event"},
	} {
		t.Run("write "+tc.name, func(t *testing.T) {
			_, err := Write(&bytes.Buffer{}, "cdf818194e3a8c32", 100, tc.rs)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestFollows(t *testing.T) {
	a := Header{ClusterID: "c1", ChainStart: 100, First: 101, Last: 150}
	require.NoError(t, Follows(a, Header{ClusterID: "c1", ChainStart: 100, First: 151, Last: 160}))
	require.ErrorContains(t, Follows(a, Header{ClusterID: "c1", ChainStart: 100, First: 152, Last: 160}), "gap")
	require.ErrorContains(t, Follows(a, Header{ClusterID: "c1", ChainStart: 100, First: 140, Last: 160}), "gap")
	require.ErrorContains(t, Follows(a, Header{ClusterID: "c2", ChainStart: 100, First: 151, Last: 160}), "of cluster c2")
	require.ErrorContains(t, Follows(a, Header{ClusterID: "c1", ChainStart: 90, First: 151, Last: 160}), "chain from revision 90")
}
