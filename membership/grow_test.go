package membership

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/etcdhook/etcdhook/api"
)

func claim(uid, asked, has string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-demo-1", Namespace: "prod", Labels: map[string]string{api.LabelClusterUID: uid}},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(asked)}}},
		Status: corev1.PersistentVolumeClaimStatus{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(has)}},
	}
}

func growRequest() GrowRequest {
	return GrowRequest{Namespace: "prod", Claim: "data-demo-1", ClusterUID: "u1", Size: resource.MustParse("20Gi"),
		Pod: "demo-1", RestartAfter: time.Hour, Poll: time.Millisecond}
}

// A volume driver stand-in: once the claim asks for more, its capacity follows on the next read.
func resizer(kube *fake.Clientset) {
	kube.PrependReactor("get", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := kube.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, "prod", "data-demo-1")
		if err != nil {
			return true, nil, err
		}
		pvc := obj.(*corev1.PersistentVolumeClaim).DeepCopy()
		pvc.Status.Capacity = pvc.Spec.Resources.Requests.DeepCopy()
		return true, pvc, nil
	})
}

func TestGrowPVCAsksAndWaits(t *testing.T) {
	kube := fake.NewClientset(claim("u1", "10Gi", "10Gi"))
	resizer(kube)
	require.NoError(t, GrowPVC(ctx10(t), &Etcd{}, kube, slog.Default(), growRequest()))
	pvc, err := kube.CoreV1().PersistentVolumeClaims("prod").Get(context.Background(), "data-demo-1", metav1.GetOptions{})
	require.NoError(t, err)
	q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	require.Equal(t, "20Gi", q.String())
	var patches int
	for _, a := range kube.Actions() {
		if a.GetVerb() == "patch" {
			patches++
		}
		require.NotEqual(t, "delete", a.GetVerb(), "no pod restart for a driver that grows online")
	}
	require.Equal(t, 1, patches)
}

// A claim already asking for more (a second attempt, or a larger size by hand) is never shrunk.
func TestGrowPVCNeverShrinks(t *testing.T) {
	kube := fake.NewClientset(claim("u1", "30Gi", "30Gi"))
	require.NoError(t, GrowPVC(ctx10(t), &Etcd{}, kube, slog.Default(), growRequest()))
	for _, a := range kube.Actions() {
		require.Equal(t, "get", a.GetVerb())
	}
}

func TestGrowPVCRefusals(t *testing.T) {
	kube := fake.NewClientset(claim("other", "10Gi", "10Gi"))
	err := GrowPVC(context.Background(), &Etcd{}, kube, slog.Default(), growRequest())
	require.ErrorIs(t, err, ErrRefused)
	require.ErrorContains(t, err, `belongs to EtcdCluster UID "other"`)

	// The API server's admission refuses the expansion (the StorageClass does not allow it).
	kube = fake.NewClientset(claim("u1", "10Gi", "10Gi"))
	kube.PrependReactor("patch", "persistentvolumeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"}, "data-demo-1",
			errors.New("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"))
	})
	err = GrowPVC(context.Background(), &Etcd{}, kube, slog.Default(), growRequest())
	require.ErrorIs(t, err, ErrRefused)
	require.ErrorContains(t, err, "growing claim data-demo-1 from 10Gi to 20Gi")
	require.ErrorContains(t, err, "storageclass that provisions the pvc must support resize")
}

// No driver grows it: the Job gives up at its deadline and says how far the claim got.
func TestGrowPVCTimesOut(t *testing.T) {
	kube := fake.NewClientset(claim("u1", "10Gi", "10Gi"))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := GrowPVC(ctx, &Etcd{}, kube, slog.Default(), growRequest())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "claim data-demo-1 still has 10Gi of the 20Gi asked")
}

func statefulSet(uid, size string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "prod", UID: k8stypes.UID("sts-" + uid)},
		Spec: appsv1.StatefulSetSpec{VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}},
		}}},
	}
}

func TestOrphanStatefulSet(t *testing.T) {
	req := OrphanRequest{Namespace: "prod", StatefulSet: "demo", UID: "sts-1", Size: resource.MustParse("20Gi"), Poll: time.Millisecond}
	kube := fake.NewClientset(statefulSet("1", "10Gi"))
	require.NoError(t, OrphanStatefulSet(context.Background(), kube, slog.Default(), req))
	var deletes []k8stesting.DeleteActionImpl
	for _, a := range kube.Actions() {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok {
			deletes = append(deletes, d)
		}
	}
	require.Len(t, deletes, 1)
	opts := deletes[0].GetDeleteOptions()
	require.Equal(t, metav1.DeletePropagationOrphan, *opts.PropagationPolicy, "pods and claims stay")
	require.Equal(t, "sts-1", string(*opts.Preconditions.UID))

	// Another StatefulSet under the name (re-created already), or one whose template has the size:
	// nothing is deleted.
	for _, sts := range []*appsv1.StatefulSet{statefulSet("2", "10Gi"), statefulSet("1", "20Gi")} {
		kube := fake.NewClientset(sts)
		require.NoError(t, OrphanStatefulSet(context.Background(), kube, slog.Default(), req))
		for _, a := range kube.Actions() {
			require.Equal(t, "get", a.GetVerb())
		}
	}
}

// ctx10 bounds a call that would otherwise wait for a capacity that never comes.
func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
