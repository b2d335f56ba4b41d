//go:build e2e

package e2e

import (
	"fmt"

	"github.com/stretchr/testify/require"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/etcdhook/etcdhook/api"
)

// checkMemberLeasePolicy acts as member pod 0 (a token of the member ServiceAccount bound to that pod,
// as the kubelet mounts it) against the cluster's Leases: its own report may be patched; another
// member's Lease and its own hook-owned annotations may not (manifests/member-lease-policy.yaml).
func (s *scenario) checkMemberLeasePolicy() {
	s.t.Helper()
	n := s.names()
	pod, err := s.e.kube.CoreV1().Pods(s.ns).Get(s.ctx, n.Pod(0), metav1.GetOptions{})
	require.NoError(s.t, err)
	tr, err := s.e.kube.CoreV1().ServiceAccounts(s.ns).CreateToken(s.ctx, n.MemberAccount(), &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{
			ExpirationSeconds: ptr(int64(600)),
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	require.NoError(s.t, err)
	cfg := rest.AnonymousClientConfig(s.e.cfg)
	cfg.BearerToken = tr.Status.Token
	member, err := kubernetes.NewForConfig(cfg)
	require.NoError(s.t, err)
	patch := func(lease, key, value string) error {
		body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
		_, err := member.CoordinationV1().Leases(s.ns).Patch(s.ctx, lease, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	// Its own report: allowed (the agent does this every renewal). The value is what it already holds.
	own, err := s.e.kube.CoordinationV1().Leases(s.ns).Get(s.ctx, n.Lease(0), metav1.GetOptions{})
	require.NoError(s.t, err)
	require.NoError(s.t, patch(n.Lease(0), api.AnnVersion, own.Annotations[api.AnnVersion]))
	// Another member's Lease, even its report half: refused.
	err = patch(n.Lease(1), api.AnnError, "forged by member 0")
	require.True(s.t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "patching another member's Lease: %v", err)
	// Its own hook-owned half: refused.
	err = patch(n.Lease(0), api.AnnIntent, api.IntentLeave)
	require.True(s.t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "patching its own intent: %v", err)
	// The two-step escape (issue 24 §6): drop the labels that bind the policy, then write the intent of
	// a Lease no policy matches. The first step is refused, so the second never escapes.
	for _, label := range []string{api.LabelManagedBy, api.LabelComponent} {
		body := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, label)
		_, err = member.CoordinationV1().Leases(s.ns).Patch(s.ctx, n.Lease(0), types.MergePatchType, []byte(body), metav1.PatchOptions{})
		require.True(s.t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "dropping label %s of its own Lease: %v", label, err)
	}
	err = patch(n.Lease(0), api.AnnIntent, api.IntentLeave)
	require.True(s.t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "patching its own intent after trying to drop the labels: %v", err)
	// Built-in TLS: the member account reads its cluster's CA Secret, creates no other Secret
	// (manifests/member-secret-policy.yaml) and reads no other Secret (RBAC resourceNames).
	if n.TLS {
		_, err = member.CoreV1().Secrets(s.ns).Get(s.ctx, n.CASecret(), metav1.GetOptions{})
		require.NoError(s.t, err, "a member reads its cluster's CA")
		_, err = member.CoreV1().Secrets(s.ns).Create(s.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "not-" + n.CASecret()}}, metav1.CreateOptions{})
		require.True(s.t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "creating another Secret: %v", err)
		_, err = member.CoreV1().Secrets(s.ns).Get(s.ctx, "not-"+n.CASecret(), metav1.GetOptions{})
		require.True(s.t, apierrors.IsForbidden(err), "reading another Secret: %v", err)
	}
}
