package main

import (
	"context"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// WriteLayout writes idx as an OCI image layout in dir (replacing what was there), named for tag the
// way `docker buildx build --output type=oci` names it: org.opencontainers.image.ref.name is the tag
// (`skopeo copy oci:DIR:v0.1.0 …`), io.containerd.image.name the whole reference (what containerd calls
// the image once the directory, tarred, is imported).
func WriteLayout(dir string, tag name.Tag, idx v1.ImageIndex) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag.TagStr(),
		"io.containerd.image.name":          tag.Name(),
	}))
}

// PlatformImage is idx's image for linux/arch.
func PlatformImage(idx v1.ImageIndex, arch string) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == arch {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("the index has no image for linux/%s", arch)
}

// WriteTarball writes one platform's image as a docker-archive tarball tagged tag: what `docker load`,
// `ctr images import` and `localkube image import` take. The archive holds the image's config and
// layer, not its OCI manifest, so the importer's manifest (and digest) is its own: compare layers or
// the config digest, not the index digest, with the registry's.
func WriteTarball(file string, tag name.Tag, img v1.Image) error {
	return tarball.WriteToFile(file, tag, img)
}

// Push uploads idx (its images, configs and layers, then the index) to ref, with the credentials
// `docker login` (or docker/login-action) stored: go-containerregistry's default keychain reads
// ~/.docker/config.json and its credential helpers.
func Push(ctx context.Context, ref name.Reference, idx v1.ImageIndex) error {
	return remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain))
}
