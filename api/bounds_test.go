package api

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestBoundCheck(t *testing.T) {
	b := Bound{Bytes: 100, Depth: 2, Tokens: 8}
	for _, tc := range []struct {
		in   string
		want string // "" = within the bound
	}{
		{``, ""}, // absent
		{`[]`, ""},
		{`[{"a":1}]`, ""},
		{` [ {"a" : 1} ] `, ""},
		{strings.Repeat(" ", 101), "bytes, over the bound"},
		{`[[[]]]`, "nested deeper"},
		{`[{"a":[1]}]`, "nested deeper"},
		{`[1,2,3,4,5,6,7,8,9]`, "tokens"},
		{`[1][2]`, "more than one JSON value"},
		{`[1,]`, "not JSON"},
		{`{"a":1,"a":2}`, "not JSON"}, // duplicate names: no agent writes them
		{`[`, "not JSON"},
	} {
		err := b.Check(tc.in)
		if tc.want == "" {
			require.NoError(t, err, "%q", tc.in)
		} else {
			require.ErrorContains(t, err, tc.want, "%q", tc.in)
		}
	}
	require.NoError(t, Bound{Bytes: 3}.Check("abc"), "not JSON: bytes only")
	require.Error(t, Bound{Bytes: 3}.Check("abcd"))
}

func TestParseMembersDistrustsWhatNoAgentWrites(t *testing.T) {
	ok := `{"id":"8e9e05c52164694d","name":"demo-0","peerURL":"https://demo-0.demo-peer.prod.svc:2380","started":true}`
	for name, list := range map[string]string{
		"an ID that is not one":     `[{"id":"zz","peerURL":"http://a:2380"}]`,
		"no ID":                     `[{"peerURL":"http://a:2380"}]`,
		"no peer URL":               `[{"id":"1"}]`,
		"an ID twice":               "[" + ok + "," + ok + "]",
		"a peer URL past the bound": `[{"id":"1","peerURL":"http://` + strings.Repeat("a", MaxURLBytes) + `"}]`,
		"an object, not a list":     `{"id":"1"}`,
	} {
		_, err := ParseReport(map[string]string{AnnMembers: list})
		require.Error(t, err, name)
	}
	r, err := ParseReport(map[string]string{AnnMembers: "[" + ok + "]"})
	require.NoError(t, err)
	require.Len(t, r.Members, 1)
}

// jsonDepthAndTokens measures a JSON value with encoding/json's tokenizer, independently of Check.
func jsonDepthAndTokens(s string) (depth, tokens int, err error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber() // a number out of float64's range is still JSON
	d := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return depth, tokens, nil
		}
		if err != nil {
			return 0, 0, err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			d++
			depth = max(depth, d)
			tokens++
		case json.Delim('}'), json.Delim(']'):
			d--
		default:
			tokens++
		}
	}
}

// FuzzBoundCheck: a value Check lets through is JSON for encoding/json too, within the depth and token
// bounds as encoding/json counts them, and within the bytes.
func FuzzBoundCheck(f *testing.F) {
	for _, s := range []string{`[]`, `[{"id":"1","peerURL":"x"}]`, `{"a":[1,2,{"b":null}]}`, `"s"`, `[[[[]]]]`, `1 2`} {
		f.Add(s)
	}
	b := Bound{Bytes: 512, Depth: 3, Tokens: 40}
	f.Fuzz(func(t *testing.T, s string) {
		if b.Check(s) != nil || s == "" {
			return
		}
		require.LessOrEqual(t, len(s), b.Bytes)
		depth, tokens, err := jsonDepthAndTokens(s)
		require.NoError(t, err, "%q passed the bound but encoding/json refuses it", s)
		require.LessOrEqual(t, depth, b.Depth, "%q", s)
		require.LessOrEqual(t, tokens, b.Tokens, "%q", s)
	})
}

// FuzzParseReport: whatever a Lease carries, the parsed report's member list is within its bounds, and
// a list that passed is one an agent could have written.
func FuzzParseReport(f *testing.F) {
	f.Add(`[{"id":"8e9e05c52164694d","peerURL":"http://a:2380","started":true}]`, "NOSPACE@1")
	f.Add(`[{}]`, "")
	f.Add(`[`, ",,,")
	f.Fuzz(func(t *testing.T, members, alarms string) {
		r, err := ParseReport(map[string]string{AnnMembers: members, AnnAlarms: alarms})
		if err != nil {
			require.Nil(t, r.Members)
			return
		}
		require.LessOrEqual(t, len(r.Members), MaxReportedMembers)
		seen := map[string]bool{}
		for _, m := range r.Members {
			_, err := ParseID(m.ID)
			require.NoError(t, err)
			require.NotEmpty(t, m.PeerURL)
			require.LessOrEqual(t, len(m.PeerURL), MaxURLBytes)
			require.False(t, seen[m.ID])
			seen[m.ID] = true
		}
	})
}

// FuzzParseRestoreReport: whatever the backup Lease carries, a report that parses names a Job, a time
// and a known outcome, and written back it stays within its annotation's bound.
func FuzzParseRestoreReport(f *testing.F) {
	f.Add(`{"time":"2026-01-01T00:00:00Z","job":"demo-restore-v1","outcome":"Verified","sha256":"ab"}`)
	f.Add(`{"time":"2026-01-01T00:00:00Z","job":"j","outcome":"Nope"}`)
	f.Add(`{"job":"j"}`)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRestoreReport(s)
		if err != nil || r == nil {
			require.Nil(t, r)
			return
		}
		require.NotEmpty(t, r.Job)
		require.False(t, r.Time.IsZero())
		require.Contains(t, []RestoreOutcome{RestoreVerified, RestoreRestored, RestoreRefused, RestoreFailed}, r.Outcome)
		if len(r.Job)+len(r.Snapshot)+len(r.SHA256) < 1024 {
			require.NoError(t, AnnotationBound(AnnRestoreReport).Check(r.String()))
		}
	})
}

// Every bound lets a value of its size through and refuses one byte more, whatever the key.
func TestEveryBoundIsExact(t *testing.T) {
	keys := []string{AnnMembers, AnnError, AnnRestoreFrom, AnnRestoredFrom, AnnBackupSuccess, AnnBackupFailure, AnnRestoreReport, AnnAlarms, AnnIntent, AnnDefragNow, "etcd.io/any-other"}
	for _, k := range keys {
		b := AnnotationBound(k)
		if b.Depth > 0 {
			// A JSON string of exactly the bound's bytes.
			at := `"` + strings.Repeat("a", b.Bytes-2) + `"`
			require.NoError(t, b.Check(at), k)
			require.Error(t, b.Check(at+" "), k)
			continue
		}
		require.NoError(t, b.Check(strings.Repeat("a", b.Bytes)), k)
		require.Error(t, b.Check(strings.Repeat("a", b.Bytes+1)), k)
	}
	for _, k := range []string{ConfigKeySpec, ConfigKeyRestoreInPlace, ConfigKeyAgent, ConfigKeyRunning, ConfigKeyClusterID} {
		b := ConfigBound(k)
		require.Error(t, b.Check(strings.Repeat(" ", b.Bytes+1)), k)
	}
}

// Review fixes: the same member spelt twice (hex without leading zeros) and null are not lists an
// agent writes; an agent's long error is cut by the writer, not dropped by the reader with its reason.
func TestReportWritersStayWithinTheReadersBounds(t *testing.T) {
	_, err := ParseReport(map[string]string{AnnMembers: `[{"id":"a","peerURL":"http://x:2380"},{"id":"000000000000000a","peerURL":"http://y:2380"}]`})
	require.ErrorContains(t, err, "listed twice")
	_, err = ParseReport(map[string]string{AnnMembers: `null`})
	require.Error(t, err)

	long := ReasonWaitingForJoin + ": " + strings.Repeat("é", 5000)
	ann := Report{Error: long}.Annotations()
	require.NoError(t, AnnotationBound(AnnError).Check(ann[AnnError]))
	r, err := ParseReport(ann)
	require.NoError(t, err)
	require.Equal(t, ReasonWaitingForJoin, r.Reason(), "the reason survives the cut")
	require.True(t, utf8.ValidString(ann[AnnError]))

	b := BackupReport{Message: strings.Repeat("\x01", 10000)}.String()
	require.NoError(t, AnnotationBound(AnnBackupFailure).Check(b), "escaped control characters included")

	// A user's token, prefixed as the hook carries it into a Lease, stays within the Lease's bound.
	tok := strings.Repeat("t", AnnotationBound(AnnDefragNow).Bytes)
	require.NoError(t, AnnotationBound(AnnDefrag).Check("now:"+tok))
}
