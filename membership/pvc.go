package membership

import (
	"context"
	"fmt"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/etcdhook/etcdhook/api"
)

// PVCRequest is `etcdhook pvc delete`.
type PVCRequest struct {
	Namespace  string
	Claim      string
	ClusterUID string
	PeerURL    string
	Pod        string
	Endpoints  []string
	// Events receives ClaimDeleted when this Job deletes the claim (nil: none).
	Events Recorder
}

// DeletePVC deletes the volume of a removed member, after checking that no member has its peer URL,
// that its pod is gone, and that the claim belongs to this EtcdCluster.
func DeletePVC(ctx context.Context, e *Etcd, kube kubernetes.Interface, log *slog.Logger, req PVCRequest) error {
	l, err := e.MemberList(ctx, req.Endpoints)
	if err != nil {
		return fmt.Errorf("reading the member list: %w", err)
	}
	for _, m := range l.Members {
		if samePeer(m.PeerURL, req.PeerURL) {
			return fmt.Errorf("%w: %s is still member %s", ErrRefused, req.PeerURL, m.ID)
		}
	}
	if req.Pod != "" {
		_, err := kube.CoreV1().Pods(req.Namespace).Get(ctx, req.Pod, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("%w: pod %s still exists", ErrRefused, req.Pod)
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	pvc, err := kube.CoreV1().PersistentVolumeClaims(req.Namespace).Get(ctx, req.Claim, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		log.Info("claim already gone", "claim", req.Claim)
		return nil
	}
	if err != nil {
		return err
	}
	if pvc.Labels[api.LabelClusterUID] != req.ClusterUID {
		return fmt.Errorf("%w: claim %s belongs to EtcdCluster UID %q, not %q", ErrRefused, req.Claim, pvc.Labels[api.LabelClusterUID], req.ClusterUID)
	}
	uid := pvc.UID
	err = kube.CoreV1().PersistentVolumeClaims(req.Namespace).Delete(ctx, req.Claim, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	log.Info("claim deleted", "claim", req.Claim)
	recorderOr(req.Events).Event(EventClaimDeleted, "DeleteClaim",
		fmt.Sprintf("claim %s of removed member %s (pod %s gone) deleted by Job", req.Claim, req.PeerURL, req.Pod), false)
	return nil
}
