package membership

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/etcdhook/etcdhook/api"
)

// GrowRequest is `etcdhook pvc grow` (docs/design/17-growing-volumes.md §17.2).
type GrowRequest struct {
	Namespace  string
	Claim      string
	ClusterUID string
	Size       resource.Quantity
	// Pod is the member pod that mounts the claim: restarted only when the volume driver grows file
	// systems offline (FileSystemResizePending for RestartAfter) and every other member is healthy;
	// PeerURL is its member's (that member may be down: its disk full).
	Pod       string
	PeerURL   string
	Endpoints []string
	// RestartAfter is how long the claim may wait with FileSystemResizePending before the pod is
	// restarted: drivers that grow file systems online clear it within seconds, and a restart that was
	// not needed costs a member's availability.
	RestartAfter time.Duration
	// Poll is how often the claim is read again (default 2 s).
	Poll   time.Duration
	Events Recorder
}

// fileSystemResizePending: the volume has grown and its file system grows when a node mounts it.
func fileSystemResizePending(pvc *corev1.PersistentVolumeClaim) bool {
	for _, c := range pvc.Status.Conditions {
		if c.Type == corev1.PersistentVolumeClaimFileSystemResizePending && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// GrowPVC asks for size on a member's claim and waits until its capacity reaches it. The API server's
// admission refuses the request when the claim's StorageClass does not allow expansion; that refusal
// is the Job's failure message. It never shrinks a claim and acts only on this cluster's claims.
func GrowPVC(ctx context.Context, e *Etcd, kube kubernetes.Interface, log *slog.Logger, req GrowRequest) error {
	claims := kube.CoreV1().PersistentVolumeClaims(req.Namespace)
	poll := req.Poll
	if poll <= 0 {
		poll = 2 * time.Second
	}
	var pendingSince time.Time
	restarted := false
	for {
		pvc, err := claims.Get(ctx, req.Claim, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading claim %s: %w", req.Claim, err)
		}
		if pvc.Labels[api.LabelClusterUID] != req.ClusterUID {
			return fmt.Errorf("%w: claim %s belongs to EtcdCluster UID %q, not %q", ErrRefused, req.Claim, pvc.Labels[api.LabelClusterUID], req.ClusterUID)
		}
		if pvc.DeletionTimestamp != nil {
			return fmt.Errorf("%w: claim %s is being deleted", ErrRefused, req.Claim)
		}
		if api.ClaimAtSize(pvc, req.Size) {
			capacity := pvc.Status.Capacity[corev1.ResourceStorage]
			log.Info("claim grown", "claim", req.Claim, "capacity", capacity.String())
			recorderOr(req.Events).Event(EventVolumeGrown, "GrowClaim",
				fmt.Sprintf("claim %s has %s (asked %s)", req.Claim, capacity.String(), req.Size.String()), false)
			return nil
		}
		if have := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; have.Cmp(req.Size) < 0 {
			// resourceVersion makes the patch conditional: a claim changed since the read is read again.
			patch, _ := json.Marshal(map[string]any{
				"metadata": map[string]any{"resourceVersion": pvc.ResourceVersion},
				"spec":     map[string]any{"resources": map[string]any{"requests": map[string]string{"storage": req.Size.String()}}},
			})
			_, err := claims.Patch(ctx, req.Claim, types.MergePatchType, patch, metav1.PatchOptions{})
			switch {
			case apierrors.IsConflict(err):
				continue
			case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
				// The claim's StorageClass does not allow expansion (admission), or the request is refused.
				return fmt.Errorf("%w: growing claim %s from %s to %s: %v", ErrRefused, req.Claim, have.String(), req.Size.String(), err)
			case err != nil:
				return fmt.Errorf("growing claim %s: %w", req.Claim, err)
			}
			log.Info("claim size asked", "claim", req.Claim, "from", have.String(), "to", req.Size.String())
			continue
		}
		if fileSystemResizePending(pvc) && !restarted {
			if pendingSince.IsZero() {
				pendingSince = time.Now()
			}
			if time.Since(pendingSince) >= req.RestartAfter {
				if err := restartForFileSystem(ctx, e, kube, log, req); err != nil {
					log.Info("not restarting the pod yet", "pod", req.Pod, "why", err.Error())
				} else {
					restarted = true
				}
			}
		}
		select {
		case <-ctx.Done():
			capacity := pvc.Status.Capacity[corev1.ResourceStorage]
			return fmt.Errorf("claim %s still has %s of the %s asked (file system resize pending: %t): %w",
				req.Claim, capacity.String(), req.Size.String(), fileSystemResizePending(pvc), ctx.Err())
		case <-time.After(poll):
		}
	}
}

// restartForFileSystem deletes the member's pod so that the kubelet grows the file system when it mounts
// the volume again: only while every other member is healthy (the same rule as a roll step; the hook
// started this Job under it, but minutes may have passed).
func restartForFileSystem(ctx context.Context, e *Etcd, kube kubernetes.Interface, log *slog.Logger, req GrowRequest) error {
	if req.Pod == "" {
		return fmt.Errorf("no pod named")
	}
	l, err := e.MemberList(ctx, req.Endpoints)
	if err != nil {
		return fmt.Errorf("reading the member list: %w", err)
	}
	healthy := e.Health(ctx, l.Members)
	for _, m := range l.Members {
		if healthy[m.ID] == nil && !samePeer(m.PeerURL, req.PeerURL) {
			return fmt.Errorf("member %s (%s) is not healthy", m.ID, m.PeerURL)
		}
	}
	pods := kube.CoreV1().Pods(req.Namespace)
	pod, err := pods.Get(ctx, req.Pod, metav1.GetOptions{})
	if err != nil {
		return err
	}
	uid := pod.UID
	if err := pods.Delete(ctx, req.Pod, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	log.Info("pod restarted to grow its file system", "pod", req.Pod, "claim", req.Claim)
	recorderOr(req.Events).Event(EventVolumeGrown, "RestartForFileSystem",
		fmt.Sprintf("pod %s restarted: the driver grows the file system of claim %s only when it is mounted", req.Pod, req.Claim), false)
	return nil
}

// OrphanRequest is `etcdhook statefulset orphan` (docs/design/17-growing-volumes.md §17.3).
type OrphanRequest struct {
	Namespace   string
	StatefulSet string
	// UID is the StatefulSet the hook saw: a re-created one is never deleted by an old Job.
	UID string
	// Size: the claim template is below it (else there is nothing to do).
	Size resource.Quantity
	Poll time.Duration
}

// OrphanStatefulSet deletes the StatefulSet with propagation Orphan: its pods, ControllerRevisions and
// claims stay, and the StatefulSet the hook renders next (with the new claim template) adopts them.
// The pod template is unchanged, so the adopted pods already run the update revision: none restarts.
func OrphanStatefulSet(ctx context.Context, kube kubernetes.Interface, log *slog.Logger, req OrphanRequest) error {
	sets := kube.AppsV1().StatefulSets(req.Namespace)
	poll := req.Poll
	if poll <= 0 {
		poll = time.Second
	}
	sts, err := sets.Get(ctx, req.StatefulSet, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if string(sts.UID) != req.UID {
		log.Info("statefulset already re-created", "statefulset", req.StatefulSet, "uid", sts.UID)
		return nil
	}
	if sts.DeletionTimestamp == nil {
		if q, ok := api.TemplateSize(sts.Spec.VolumeClaimTemplates); !ok || q.Cmp(req.Size) >= 0 {
			log.Info("no claim template below the size", "statefulset", req.StatefulSet)
			return nil
		}
		uid := sts.UID
		orphan := metav1.DeletePropagationOrphan
		err := sets.Delete(ctx, req.StatefulSet, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &orphan})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting statefulset %s (orphan): %w", req.StatefulSet, err)
		}
		log.Info("statefulset deleted, pods and claims orphaned", "statefulset", req.StatefulSet)
	}
	// Wait until the garbage collector has released the pods and removed it: a Job that ends earlier
	// says nothing the hook could act on.
	for {
		sts, err := sets.Get(ctx, req.StatefulSet, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && string(sts.UID) != req.UID) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("statefulset %s not gone: %w", req.StatefulSet, ctx.Err())
		case <-time.After(poll):
		}
	}
}
