package sync

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The child writer (childjson.go) writes every kind the hook renders as json.Marshal, a round trip
// through map[string]any with nulls, status and an empty spec dropped, and json.Marshal again did, once
// both are canonicalised: checked on objects with random fields set (strings with HTML, control and
// non-UTF-8 bytes, integers past 2^53, empty and nil maps, slices and pointers, times, quantities).
func TestChildWriterMatchesMarshal(t *testing.T) {
	kinds := []func() any{
		func() any { return new(appsv1.StatefulSet) }, func() any { return new(corev1.Service) },
		func() any { return new(policyv1.PodDisruptionBudget) }, func() any { return new(corev1.ConfigMap) },
		func() any { return new(coordv1.Lease) }, func() any { return new(batchv1.Job) },
		func() any { return new(corev1.ServiceAccount) }, func() any { return new(rbacv1.Role) },
		func() any { return new(rbacv1.RoleBinding) },
	}
	rng := rand.New(rand.NewPCG(1, 2))
	w := writers.Get().(*childWriter)
	defer writers.Put(w)
	for round := range 60 {
		for _, kind := range kinds {
			obj := kind()
			fillRandom(rng, reflect.ValueOf(obj).Elem(), 0)
			want, err := referenceToChild(obj)
			require.NoError(t, err)
			wantJSON, err := json.Marshal(want)
			require.NoError(t, err)
			w.out.Reset()
			got, err := w.appendChild(obj, nil)
			require.NoError(t, err, "round %d %T", round, obj)
			require.Equal(t, string(canonical(t, wantJSON)), string(canonical(t, got)), "round %d %T", round, obj)
		}
	}
}

var randomStrings = []string{"", "a", "etcd", "<tag>&amp;", "line\nbreak\t\"q\"\\", "\u2028\u2029", "caf\u00e9", "bad\xffutf8", "\x01\x1f", "\U0001F600"}

// fillRandom sets some fields under v, leaving others zero, nil or empty.
func fillRandom(rng *rand.Rand, v reflect.Value, depth int) {
	if depth > 12 || rng.IntN(4) == 0 {
		return // left zero
	}
	switch v.Type() {
	case reflect.TypeFor[metav1.Time]():
		v.Set(reflect.ValueOf(metav1.NewTime(time.Unix(rng.Int64N(2e9), 0))))
		return
	case reflect.TypeFor[metav1.MicroTime]():
		v.Set(reflect.ValueOf(metav1.NewMicroTime(time.Unix(rng.Int64N(2e9), rng.Int64N(1e9)))))
		return
	case reflect.TypeFor[resource.Quantity]():
		v.Set(reflect.ValueOf(resource.MustParse([]string{"1", "10Gi", "500m", "1.5", "2e3"}[rng.IntN(5)])))
		return
	case reflect.TypeFor[intstr.IntOrString]():
		if rng.IntN(2) == 0 {
			v.Set(reflect.ValueOf(intstr.FromInt32(rng.Int32())))
		} else {
			v.Set(reflect.ValueOf(intstr.FromString(randomStrings[rng.IntN(len(randomStrings))])))
		}
		return
	case reflect.TypeFor[runtime.RawExtension](), reflect.TypeFor[metav1.FieldsV1]():
		raw := []byte(`{"b":null,"a":[1,null,{"c":null}],"d":1e2}`)
		v.FieldByName("Raw").SetBytes(raw)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillRandom(rng, v.Field(i), depth+1)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillRandom(rng, v.Elem(), depth+1)
	case reflect.Slice:
		n := rng.IntN(3)
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fillRandom(rng, v.Index(i), depth+1)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for range rng.IntN(4) {
			k := reflect.New(v.Type().Key()).Elem()
			fillRandom(rng, k, 0)
			e := reflect.New(v.Type().Elem()).Elem()
			fillRandom(rng, e, depth+1)
			v.SetMapIndex(k, e)
		}
	case reflect.String:
		v.SetString(randomStrings[rng.IntN(len(randomStrings))])
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := rng.Int64()
		if rng.IntN(2) == 0 {
			n %= 1000
		}
		if v.OverflowInt(n) {
			n %= 100
		}
		v.SetInt(n)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(rng.IntN(200)))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(rng.Float64() * 1e3)
	}
}

// Observed claim templates that are an empty list are answered as such (the rendered empty list is
// omitted by omitempty: the copy adds them after the spec's other members).
func TestEmptyObservedClaimTemplatesKept(t *testing.T) {
	w := writers.Get().(*childWriter)
	defer writers.Put(w)
	w.out.Reset()
	sts := &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}, ObjectMeta: metav1.ObjectMeta{Name: "demo"}}
	got, err := w.appendChild(sts, []byte(`[ ]`))
	require.NoError(t, err)
	require.Contains(t, string(got), `"volumeClaimTemplates":[]`)
	w.out.Reset()
	sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
	got, err = w.appendChild(sts, []byte(`[{"metadata":{"creationTimestamp":null,"name":"data"}}]`))
	require.NoError(t, err)
	require.Contains(t, string(got), `"volumeClaimTemplates":[{"metadata":{"creationTimestamp":null,"name":"data"}}]`, "copied as the server sent them, nulls kept")
}
