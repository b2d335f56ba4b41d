package sync

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/etcdhook/etcdhook/sync/wire"
)

// requestBodies are every fixture request on disk.
func requestBodies(t testing.TB) map[string][]byte {
	out := map[string][]byte{}
	files, err := filepath.Glob(filepath.Join(fixtureDir, "*", "*.request.json"))
	require.NoError(t, err)
	for _, f := range files {
		if strings.Contains(f, "/customize/") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		out[f] = b
	}
	return out
}

// The same request spelled otherwise gets the same answer: indented or compact (as Metacontroller sends
// it), keys in another case or escaped (encoding/json matches keys case-insensitively and after
// unescaping), strings escaped, a stray ']' or '}' after the value (json.Decoder.More stopped there);
// and a body that is not a whole request is refused as malformed.
func TestSpellingsGiveTheSameAnswer(t *testing.T) {
	answer := func(body []byte) ([]byte, error) {
		resp, err := ComputeBody(body, fixtureNow, Options{Image: FixtureImage})
		if err != nil {
			return nil, err
		}
		return resp.AppendJSON(nil)
	}
	for name, body := range requestBodies(t) {
		want, wantErr := answer(body)
		if wantErr != nil {
			continue // a refused fixture: its reason is TestDecodeRefusesForTheRightReason's
		}
		compact, indented := slices.Clone(body), slices.Clone(body)
		require.NoError(t, (*jsontext.Value)(&compact).Compact())
		require.NoError(t, (*jsontext.Value)(&indented).Indent(jsontext.WithIndent("\t")))
		for vname, v := range map[string][]byte{
			"compact":  compact,
			"indented": indented,
			// (not in the claim templates, which are answered as the API server spelled them)
			"keys-upper":      bytes.ReplaceAll(bytes.ReplaceAll(body, []byte(`"readyReplicas"`), []byte(`"READYREPLICAS"`)), []byte(`"holderIdentity"`), []byte(`"HolderIdentity"`)),
			"keys-escaped":    bytes.ReplaceAll(body, []byte(`"name"`), []byte(`"n\u0061me"`)),
			"escaped-strings": bytes.ReplaceAll(bytes.ReplaceAll(body, []byte(`demo`), []byte(`d\u0065mo`)), []byte(`prod`), []byte(`pr\u006fd`)),
			"trailing-brace":  append(slices.Clip(bytes.TrimRight(body, "\n")), "}]"...),
		} {
			got, err := answer(v)
			require.NoError(t, err, "%s/%s", filepath.Base(name), vname)
			require.JSONEq(t, string(want), string(got), "%s/%s", filepath.Base(name), vname)
		}
		for vname, v := range map[string][]byte{
			"trailing-data": append(slices.Clip(bytes.TrimRight(body, "\n")), " x"...),
			"truncated":     body[:len(body)/2],
		} {
			_, err := answer(v)
			var bad *MalformedError
			require.True(t, errors.As(err, &bad), "%s/%s: %v", filepath.Base(name), vname, err)
		}
	}
}

// The views (sync/wire/views.go) decode only what the decision reads of some kinds: for every fixture,
// the answer is the one from decoding every field of every object.
func TestViewsChangeNoAnswer(t *testing.T) {
	n := 0
	for name, body := range requestBodies(t) {
		var req Request
		if wire.Unmarshal(body, &req) != nil {
			continue // a malformed fixture
		}
		answer := func(decode func(*Request) (*Observed, error)) ([]byte, error) {
			o, err := decode(&req)
			if err != nil {
				return nil, err
			}
			resp, err := Answer(context.Background(), o, fixtureNow, Options{Image: FixtureImage})
			if err != nil {
				return nil, err
			}
			return resp.AppendJSON(nil)
		}
		want, wantErr := answer(wire.DecodeRequestWhole)
		got, err := answer(wire.DecodeRequest)
		require.Equal(t, wantErr, err, name)
		if wantErr == nil {
			require.JSONEq(t, string(want), string(got), name)
			n++
		}
	}
	require.Greater(t, n, 150, "fixtures answered")
}
