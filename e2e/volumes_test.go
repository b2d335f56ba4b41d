//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdhook/etcdhook/api"
	"github.com/etcdhook/etcdhook/membership"
)

// allowExpansion sets allowVolumeExpansion on the claims' StorageClass for the test (the API server's
// admission refuses growing a claim of a class without it) and puts it back afterwards.
func (s *scenario) allowExpansion() {
	sc, err := s.e.kube.StorageV1().StorageClasses().Get(s.ctx, "standard", metav1.GetOptions{})
	require.NoError(s.t, err)
	was := sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
	set := func(on bool) error {
		_, err := s.e.kube.StorageV1().StorageClasses().Patch(context.Background(), "standard", types.MergePatchType,
			[]byte(fmt.Sprintf(`{"allowVolumeExpansion":%t}`, on)), metav1.PatchOptions{})
		return err
	}
	require.NoError(s.t, set(true))
	s.t.Cleanup(func() { _ = set(was) })
}

// resizer stands in for a CSI driver's external-resizer and the kubelet, which localkube's host-path
// provisioner does not have: a claim in the namespace that asks for more than its capacity gets its
// PersistentVolume's and its own status capacity raised, as they would report once the volume and its
// file system have grown. Everything else (admission of the request, the Jobs, the StatefulSet
// re-created over its pods, Metacontroller) is the real thing.
func (s *scenario) resizer() (grown func() []string) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list, err := s.e.kube.CoreV1().PersistentVolumeClaims(s.ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, pvc := range list.Items {
					asked, has := pvc.Spec.Resources.Requests[corev1.ResourceStorage], pvc.Status.Capacity[corev1.ResourceStorage]
					if pvc.Spec.VolumeName == "" || asked.Cmp(has) <= 0 {
						continue
					}
					patch := []byte(fmt.Sprintf(`{"spec":{"capacity":{"storage":%q}}}`, asked.String()))
					if _, err := s.e.kube.CoreV1().PersistentVolumes().Patch(ctx, pvc.Spec.VolumeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
						continue
					}
					pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: asked}
					if _, err := s.e.kube.CoreV1().PersistentVolumeClaims(s.ns).UpdateStatus(ctx, &pvc, metav1.UpdateOptions{}); err == nil {
						mu.Lock()
						seen = append(seen, pvc.Name+"="+asked.String())
						mu.Unlock()
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	s.t.Cleanup(func() { cancel(); <-done })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// podRestarts is each member pod's UID and its containers' restart count.
func (s *scenario) podRestarts() map[string]string {
	out := map[string]string{}
	for _, p := range s.pods() {
		n := int32(0)
		for _, c := range p.Status.ContainerStatuses {
			n += c.RestartCount
		}
		out[p.Name] = fmt.Sprintf("%s/%d", p.UID, n)
	}
	return out
}

// Volume growth (docs/design/17-growing-volumes.md §17): spec.storage.size from 1Gi to 2Gi on a running 3-member cluster
// under a writer. Every claim grows, one at a time; the StatefulSet is re-created for its claim template
// over the same pods; no pod restarts; a shrink below the claims is refused; a member added later gets a
// claim of the new size.
func TestVolumeGrowth(t *testing.T) {
	beside(t)
	s := newScenario(t, "grow")
	s.allowExpansion()
	grown := s.resizer()
	s.apply(spec(3, *etcdVersion))
	s.waitFor("settled", stepTimeout, s.settled(3))
	before, members := s.podRestarts(), s.memberIDs()
	sts, err := s.e.kube.AppsV1().StatefulSets(s.ns).Get(s.ctx, s.name, metav1.GetOptions{})
	require.NoError(t, err)

	w := s.startWriter("storage.size 1Gi -> 2Gi")
	s.apply(map[string]any{"storage": map[string]any{"size": "2Gi"}})
	size := resource.MustParse("2Gi")
	var growing []string
	took := s.waitFor("every claim and the claim template at 2Gi", 5*time.Minute, func() bool {
		ec := s.cluster()
		if g := ec.Status.Storage; g != nil && g.Growing != "" && (len(growing) == 0 || growing[len(growing)-1] != g.Growing) {
			growing = append(growing, g.Growing)
		}
		cur, err := s.e.kube.AppsV1().StatefulSets(s.ns).Get(s.ctx, s.name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		q, ok := api.TemplateSize(cur.Spec.VolumeClaimTemplates)
		st := ec.Status.Storage
		return ok && q.Cmp(size) == 0 && st != nil && st.AtSize == 3 && st.TemplateSize == "2Gi" && s.settled(3)()
	})
	for i := 0; i < 3; i++ {
		pvc, err := s.e.kube.CoreV1().PersistentVolumeClaims(s.ns).Get(s.ctx, s.names().PVC(i), metav1.GetOptions{})
		require.NoError(t, err)
		require.True(t, api.ClaimAtSize(pvc, size), "claim %s", pvc.Name)
	}
	cur, err := s.e.kube.AppsV1().StatefulSets(s.ns).Get(s.ctx, s.name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEqual(t, sts.UID, cur.UID, "the StatefulSet was re-created for its claim template")
	require.Equal(t, before, s.podRestarts(), "no pod was restarted or replaced")
	require.Equal(t, members, s.memberIDs())
	for _, p := range s.pods() {
		require.Equal(t, cur.Name, metav1.GetControllerOf(&p).Name, "pod %s adopted by the new StatefulSet", p.Name)
		require.Equal(t, cur.UID, metav1.GetControllerOf(&p).UID, "pod %s adopted by the new StatefulSet", p.Name)
	}
	s.checkEvents(membership.EventVolumeGrown)

	// Shrinking below what the claims ask for is refused by the hook, naming the field; nothing changes.
	s.apply(map[string]any{"storage": map[string]any{"size": "1Gi"}})
	s.waitFor("StorageShrink", time.Minute, func() bool {
		c := condition(s.cluster(), api.CondInvalidSpec)
		return c != nil && c.Reason == "StorageShrink" && strings.Contains(c.Message, "spec.storage.size cannot shrink from 2Gi to 1Gi")
	})
	require.Equal(t, before, s.podRestarts())
	s.apply(map[string]any{"storage": map[string]any{"size": "2Gi"}})
	s.waitFor("the refusal cleared", time.Minute, func() bool { return condition(s.cluster(), api.CondInvalidSpec) == nil && s.settled(3)() })

	// A member added now gets a claim of the new size from the template.
	w.Step("scale 3->4 after the growth")
	s.apply(map[string]any{"size": int64(4)})
	s.waitFor("size 4", stepTimeout, s.settled(4))
	pvc, err := s.e.kube.CoreV1().PersistentVolumeClaims(s.ns).Get(s.ctx, s.names().PVC(3), metav1.GetOptions{})
	require.NoError(t, err)
	q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	require.Equal(t, "2Gi", q.String())
	w.Finish(fmt.Sprintf("storage.size 1Gi -> 2Gi on 3 members: %s from the edit to every claim and the claim template at 2Gi and the cluster settled (claims grown in order %s; resizer stand-in saw %s); StatefulSet re-created over the same pods, pod restarts 0; shrink to 1Gi refused (StorageShrink); member 4 created at 2Gi\n\n",
		took.Round(100*time.Millisecond), strings.Join(growing, ", "), strings.Join(grown(), ", ")))
}
