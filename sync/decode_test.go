package sync

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdhook/etcdhook/api"
)

// requestBodies are every fixture request on disk and, built again from the test world, the same
// requests as the world makes them (so that a fixture regenerated elsewhere is covered too).
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

// The answer from DecodeBody and the canonical encoder is byte for byte the reference's (full typed
// decoding, children through map[string]any, json.Marshal), for every fixture and for variants of each
// that spell the same request differently (indented, keys in another case, escaped, duplicated).
func TestDecodeMatchesTypedDecoding(t *testing.T) {
	for name, body := range requestBodies(t) {
		for vname, v := range variants(body) {
			t.Run(filepath.Base(name)+"/"+vname, func(t *testing.T) {
				sameAnswer(t, v)
			})
		}
	}
}

// variants are the same request written differently.
func variants(body []byte) map[string][]byte {
	var indented, compact bytes.Buffer
	_ = json.Indent(&indented, body, "", "\t")
	_ = json.Compact(&compact, body)
	return map[string][]byte{
		"as-is":    body,
		"indented": indented.Bytes(),
		// as Metacontroller sends it
		"compact": compact.Bytes(),
		// members the decision never reads, of types the full object does not have: passed over
		"foreign-spec-status": bytes.ReplaceAll(body, []byte(`"kind": "ConfigMap",`), []byte(`"kind": "ConfigMap", "spec": "x", "status": [1],`)),
		// encoding/json matches keys case-insensitively and after unescaping.
		"keys-upper":   bytes.ReplaceAll(bytes.ReplaceAll(body, []byte(`"metadata"`), []byte(`"METADATA"`)), []byte(`"annotations"`), []byte(`"Annotations"`)),
		"keys-escaped": bytes.ReplaceAll(bytes.ReplaceAll(body, []byte(`"name"`), []byte(`"n\u0061me"`)), []byte(`"spec"`), []byte(`"\u017fpec"`)),
		// a later key wins; a later object decodes into what the earlier one left.
		"dup-metadata":    bytes.ReplaceAll(body, []byte(`"metadata":{`), []byte(`"metadata":{"labels":{"x":"y"},"name":"zz"},"metadata":{`)),
		"dup-parent":      bytes.Replace(body, []byte(`{`), []byte(`{"parent":null,"children":{"X.v1":{"a":1}},"children":null,`), 1),
		"escaped-strings": bytes.ReplaceAll(bytes.ReplaceAll(body, []byte(`demo`), []byte(`d\u0065mo`)), []byte(`prod`), []byte(`pr\u006fd`)),
		"html-and-utf8":   bytes.ReplaceAll(body, []byte(`"etcd"`), []byte(`"et<c>d&\u2028\ud800x\u00e9"`)),
		"replicas-float":  bytes.ReplaceAll(body, []byte(`"replicas":`), []byte(`"replicas":1e0,"replicas":`)),
		// the observed claim templates are answered as a map[string]any decoded from them would be
		"template-numbers":      bytes.ReplaceAll(body, []byte(`"accessModes":`), []byte(`"x":[1.5e300,-0,1E-7,123456789012345678,0.1,-2.50],"accessModes":`)),
		"template-out-of-range": bytes.ReplaceAll(body, []byte(`"accessModes":`), []byte(`"x":1e400,"accessModes":`)),
		"template-dups":         bytes.ReplaceAll(body, []byte(`"accessModes":`), []byte(`"a":null,"a":{"b":null,"b":"<\u00e9>"},"accessModes":`)),
		"trailing-brace":        append(slices.Clip(bytes.TrimRight(body, "\n")), "}]"...),
		"trailing-data":         append(slices.Clip(bytes.TrimRight(body, "\n")), " x"...),
		"truncated":             body[:len(body)/2],
	}
}

func sameAnswer(t *testing.T, body []byte) {
	t.Helper()
	wantCode, want, wantErr := referenceBody(body, fixtureNow, Options{Image: FixtureImage})
	code, got, err := currentBody(body, fixtureNow, Options{Image: FixtureImage})
	if wantCode == http.StatusUnprocessableEntity && errors.Is(wantErr, errTypedDecode) && code == http.StatusOK {
		return // a mistyped field the decision never reads (see DecodeBody)
	}
	require.Equal(t, wantCode, code, "reference: %v\ncurrent: %v", wantErr, err)
	if code == http.StatusOK {
		// The same answer once canonicalised: key order and spelling (escapes, number forms) aside.
		require.Equal(t, string(canonical(t, want)), string(canonical(t, got)))
	}
	if wantErr != nil {
		require.Equal(t, wantErr.Error(), err.Error())
	}
}

// FuzzDecodeMatchesTypedDecoding: for any body, the same code as the reference and, for a 200, the
// same answer once canonicalised.
func FuzzDecodeMatchesTypedDecoding(f *testing.F) {
	for _, body := range requestBodies(f) {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sameAnswer(t, body)
	})
}

// The parent's status is carried over whole, so readParent must read every field of api.ClusterStatus:
// one with every field set reads back equal.
func TestStatusReaderReadsEveryField(t *testing.T) {
	var want api.ClusterStatus
	fillAll(reflect.ValueOf(&want).Elem(), 1)
	b, err := json.Marshal(api.EtcdCluster{Status: want})
	require.NoError(t, err)
	var got api.EtcdCluster
	_, err = readParent(objReaders.Get().(*objReader), b, &got)
	require.NoError(t, err)
	require.Equal(t, want, got.Status, "a field of api.ClusterStatus is not read by readParent (sync/decode.go)")
}

// fillAll sets every field under v to a value that is not zero (times whole seconds, in UTC as
// metav1.Time decodes them to Local).
func fillAll(v reflect.Value, n int) {
	if v.Type() == reflect.TypeFor[metav1.Time]() {
		v.Set(reflect.ValueOf(metav1.NewTime(time.Unix(int64(1700000000+n), 0).Local())))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillAll(v.Field(i), n+i)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillAll(v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fillAll(v.Index(i), n+i)
		}
	case reflect.String:
		v.SetString("s" + strconv.Itoa(n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(n))
	default:
		panic("fillAll: " + v.Type().String())
	}
}
