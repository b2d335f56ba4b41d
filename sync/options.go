package sync

import corev1 "k8s.io/api/core/v1"

// Options are the hook server's own settings that reach the children.
type Options struct {
	// Image is etcdhook's own image: the init container copies the agent from it, Jobs run it.
	Image string
	// ImagePullPolicy applies to the etcdhook image and the etcd image.
	ImagePullPolicy corev1.PullPolicy
	// SeedBootstrap: new clusters bootstrap from a seed and joins, never statically (a static creation
	// already recorded goes on).
	SeedBootstrap bool
}

// DefaultImage is used when the server is not told its own image.
const DefaultImage = "ghcr.io/etcdhook/etcdhook:dev"

func (o Options) withDefaults() Options {
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if o.ImagePullPolicy == "" {
		o.ImagePullPolicy = corev1.PullIfNotPresent
	}
	return o
}
