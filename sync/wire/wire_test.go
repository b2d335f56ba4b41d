package wire

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Shape counts the objects two levels below every top-level key but parent, controller and
// finalizing, and every array element anywhere; a body that is not JSON gets the counts so far and an
// error, and only whitespace or a stray ']' or '}' may follow the value.
func TestShape(t *testing.T) {
	for _, tc := range []struct {
		body     string
		want     BodyShape
		fails    bool
		trailing string
	}{
		{body: `{"parent":{"a":{"b":1,"c":2}},"children":{"G":{"x":{},"y":{}},"H":{"z":[1,2,3]}}}`, want: BodyShape{Objects: 3, Elements: 3}},
		{body: `{"controller":{"g":{"a":1}},"related":{"P":{"p":{"l":[[1],[2]]}}}}`, want: BodyShape{Objects: 1, Elements: 4}},
		{body: `{"children":[{"a":{"b":1}}]}`, want: BodyShape{Elements: 1}},
		{body: `{"CHILDREN":{"G":{"x":{}}}}`, want: BodyShape{Objects: 1}}, // every spelling counted
		{body: `{"children":{"G":{"x":{}}}} ]`, want: BodyShape{Objects: 1}},
		{body: `{"children":{"G":{"x":{}}}} x`, want: BodyShape{Objects: 1}, fails: true},
		{body: `{"children":{"G":{"x":{},"y":`, want: BodyShape{Objects: 2}, fails: true},
	} {
		got, err := Shape([]byte(tc.body))
		require.Equal(t, tc.want, got, tc.body)
		require.Equal(t, tc.fails, err != nil, "%s: %v", tc.body, err)
	}
}

// A child is answered without status or an empty spec; the observed claim templates replace the
// rendered ones as they were sent, nulls kept.
func TestChild(t *testing.T) {
	l := &coordv1.Lease{TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Name: "l", Annotations: map[string]string{"a": "b"}}}
	m, err := childMap(l, nil)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
		"metadata": map[string]any{"name": "l", "annotations": map[string]any{"a": "b"}}}, m, "no creationTimestamp: null, no empty spec")

	p := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: new(string)},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	m, err = childMap(p, []byte(`[{"metadata":{"creationTimestamp":null}}]`))
	require.NoError(t, err)
	require.NotContains(t, m, "status")
	require.Equal(t, []any{map[string]any{"metadata": map[string]any{"creationTimestamp": nil}}}, m["spec"].(map[string]any)["volumeClaimTemplates"])
	_, err = Child(p, []byte(`[1e400]`))
	require.ErrorContains(t, err, "observed volumeClaimTemplates", "a number a float64 cannot hold")
}

func childMap(obj any, vct []byte) (map[string]any, error) {
	b, err := Child(obj, vct)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, Unmarshal(b, &m)
}

// Decode reads as encoding/json does: keys in any case, a later key winning; a body that is not one
// request is malformed, a request without a parent refused.
func TestDecode(t *testing.T) {
	_, err := Decode([]byte(`{"parent":null} x`))
	var bad *MalformedError
	require.True(t, errors.As(err, &bad), "%v", err)
	_, err = Decode([]byte(`{"children":5}`))
	require.True(t, errors.As(err, &bad), "%v", err)
	_, err = Decode([]byte(`{"PARENT":{"kind":"X"},"parent":null}`))
	var in *InputError
	require.True(t, errors.As(err, &in), "%v", err)
	require.ErrorContains(t, err, "request has no parent", "the later key wins")
}
