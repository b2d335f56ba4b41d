package membership

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/etcdhook/etcdhook/api"
)

// KubeSecrets is the SecretStore on the Kubernetes API. The Secrets it creates are owned by the
// EtcdCluster (not as its controller: they are not Metacontroller children, so no hook answer can
// delete them) and go with it when it is deleted.
type KubeSecrets struct {
	Client     kubernetes.Interface
	Namespace  string
	Cluster    string
	ClusterUID string
}

func (k *KubeSecrets) Get(ctx context.Context, name string) (map[string][]byte, string, bool, error) {
	s, err := k.read(ctx, name)
	if s == nil || err != nil {
		return nil, "", false, err
	}
	// A Secret of another EtcdCluster of the same name (deleted and re-created: garbage collection
	// removes the old one soon): never used, never replaced.
	for _, o := range s.OwnerReferences {
		if o.Kind == api.Kind && string(o.UID) != k.ClusterUID {
			return nil, "", false, fmt.Errorf("Secret %s belongs to another EtcdCluster (UID %s): waiting for it to be garbage-collected", name, o.UID)
		}
	}
	return s.Data, s.ResourceVersion, true, nil
}

// read is the Secret, nil when it does not exist.
func (k *KubeSecrets) read(ctx context.Context, name string) (*corev1.Secret, error) {
	s, err := k.Client.CoreV1().Secrets(k.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return s, err
}

// GetOwned is Get for a Secret the agent writes to under a name the user chose (a user's credentials,
// docs/design/20-auth.md): one that exists without this EtcdCluster as its owner is another application's,
// and is never read or overwritten (ErrSecretNotOwned).
func (k *KubeSecrets) GetOwned(ctx context.Context, name string) (map[string][]byte, string, bool, error) {
	s, err := k.read(ctx, name)
	if s == nil || err != nil {
		return nil, "", false, err
	}
	for _, o := range s.OwnerReferences {
		if o.Kind == api.Kind && string(o.UID) == k.ClusterUID {
			return s.Data, s.ResourceVersion, true, nil
		}
	}
	return nil, "", false, fmt.Errorf("Secret %s: %w", name, ErrSecretNotOwned)
}

func (k *KubeSecrets) Create(ctx context.Context, name string, data map[string][]byte) error {
	n := api.Names{Cluster: k.Cluster, Namespace: k.Namespace}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: k.Namespace,
			Labels: n.ObjectLabels(api.ComponentEtcd),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: api.APIVersion, Kind: api.Kind, Name: k.Cluster, UID: types.UID(k.ClusterUID),
			}},
		},
		Type: corev1.SecretTypeTLS,
		Data: data,
	}
	_, err := k.Client.CoreV1().Secrets(k.Namespace).Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return ErrSecretExists
	}
	return err
}

func (k *KubeSecrets) Update(ctx context.Context, name, version string, data map[string][]byte) error {
	s, err := k.Client.CoreV1().Secrets(k.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if s.ResourceVersion != version {
		return ErrSecretConflict
	}
	s.Data = data
	_, err = k.Client.CoreV1().Secrets(k.Namespace).Update(ctx, s, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return ErrSecretConflict
	}
	return err
}
