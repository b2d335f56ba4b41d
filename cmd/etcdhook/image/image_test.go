package main

import (
	"archive/tar"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"
)

// created stands for a commit's time (SOURCE_DATE_EPOCH).
var created = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// spec has tiny fake binaries, so that the test builds images in milliseconds instead of compiling
// etcdhook; each architecture's differs, as real ones do.
func spec() Spec {
	return Spec{
		Binaries: []Binary{{Arch: "amd64", Data: []byte("fake etcdhook for amd64")}, {Arch: "arm64", Data: []byte("fake etcdhook for arm64")}},
		Created:  created,
		Labels:   map[string]string{"org.opencontainers.image.version": "v0.1.0"},
	}
}

func digest(t *testing.T, s Spec) v1.Hash {
	t.Helper()
	idx, err := Index(s)
	require.NoError(t, err)
	d, err := idx.Digest()
	require.NoError(t, err)
	return d
}

// Two builds of the same input give the same index digest; and the digest does depend on each input,
// so sameness is not an accident of ignoring them.
func TestIndexIsReproducible(t *testing.T) {
	first := digest(t, spec())
	require.Equal(t, first, digest(t, spec()), "two builds of the same binaries and time")

	later := spec()
	later.Created = created.Add(time.Second)
	require.NotEqual(t, first, digest(t, later), "another commit time")
	other := spec()
	other.Binaries[1].Data = []byte("another arm64 binary")
	require.NotEqual(t, first, digest(t, other), "another binary")
}

// One image per platform, OCI media types, and each image's config: the user, entrypoint and working
// directory the Dockerfile's distroless nonroot image had, the fixed time, the labels.
func TestIndexConfig(t *testing.T) {
	idx, err := Index(spec())
	require.NoError(t, err)
	mt, err := idx.MediaType()
	require.NoError(t, err)
	require.Equal(t, types.OCIImageIndex, mt)
	m, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Equal(t, "v0.1.0", m.Annotations["org.opencontainers.image.version"])
	require.Len(t, m.Manifests, 2)
	for i, arch := range []string{"amd64", "arm64"} {
		d := m.Manifests[i]
		require.Equal(t, &v1.Platform{OS: "linux", Architecture: arch}, d.Platform)
		require.Equal(t, types.OCIManifestSchema1, d.MediaType)

		img, err := PlatformImage(idx, arch)
		require.NoError(t, err)
		cfg, err := img.ConfigFile()
		require.NoError(t, err)
		require.Equal(t, arch, cfg.Architecture)
		require.Equal(t, "linux", cfg.OS)
		require.Equal(t, created, cfg.Created.Time.UTC())
		require.Equal(t, "65532:65532", cfg.Config.User)
		require.Equal(t, []string{"/etcdhook"}, cfg.Config.Entrypoint)
		require.Empty(t, cfg.Config.Cmd)
		require.Equal(t, "/home/nonroot", cfg.Config.WorkingDir)
		require.Equal(t, "v0.1.0", cfg.Config.Labels["org.opencontainers.image.version"])

		manifest, err := img.Manifest()
		require.NoError(t, err)
		require.Equal(t, types.OCIConfigJSON, manifest.Config.MediaType)
		require.Len(t, manifest.Layers, 1, "FROM scratch: one layer")
		require.Equal(t, types.OCILayer, manifest.Layers[0].MediaType)
		require.Len(t, cfg.RootFS.DiffIDs, 1)
	}
	_, err = PlatformImage(idx, "riscv64")
	require.Error(t, err)
}

// file is a layer entry as the test compares it.
type file struct {
	name     string
	typeflag byte
	mode     int64
	uid, gid int
	content  string
}

// The layer holds exactly these entries, with these types, modes and owners, every time the commit's.
func TestLayerFiles(t *testing.T) {
	idx, err := Index(spec())
	require.NoError(t, err)
	img, err := PlatformImage(idx, "arm64")
	require.NoError(t, err)
	layers, err := img.Layers()
	require.NoError(t, err)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()

	var got []file
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.Equal(t, created, h.ModTime.UTC(), h.Name)
		require.Empty(t, h.Uname+h.Gname, h.Name)
		content, err := io.ReadAll(tr)
		require.NoError(t, err)
		got = append(got, file{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, string(content)})
	}
	require.Equal(t, []file{
		{"etc/", tar.TypeDir, 0o755, 0, 0, ""},
		{"etc/group", tar.TypeReg, 0o644, 0, 0, group},
		{"etc/passwd", tar.TypeReg, 0o644, 0, 0, passwd},
		{"etcdhook", tar.TypeReg, 0o755, 0, 0, "fake etcdhook for arm64"},
		{"home/", tar.TypeDir, 0o755, 0, 0, ""},
		{"home/nonroot/", tar.TypeDir, 0o700, 65532, 65532, ""},
		{"tmp/", tar.TypeDir, 0o1777, 0, 0, ""},
	}, got)
	require.Contains(t, passwd, "\nnonroot:x:65532:65532:")
	require.Contains(t, group, "\nnonroot:x:65532:\n")
}

// What make image writes and pushes is the index built: the layout reads back with the same digest and
// names, the docker-archive with the same config and layer, and a registry serves the same digest.
func TestOutputs(t *testing.T) {
	idx, err := Index(spec())
	require.NoError(t, err)
	want, err := idx.Digest()
	require.NoError(t, err)
	tag, err := name.NewTag("ghcr.io/etcdhook/etcdhook:v0.1.0")
	require.NoError(t, err)
	dir := t.TempDir()

	t.Run("layout", func(t *testing.T) {
		require.NoError(t, WriteLayout(filepath.Join(dir, "oci"), tag, idx))
		outer, err := layout.ImageIndexFromPath(filepath.Join(dir, "oci"))
		require.NoError(t, err)
		m, err := outer.IndexManifest()
		require.NoError(t, err)
		require.Len(t, m.Manifests, 1)
		require.Equal(t, want, m.Manifests[0].Digest)
		require.Equal(t, "v0.1.0", m.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
		require.Equal(t, "ghcr.io/etcdhook/etcdhook:v0.1.0", m.Manifests[0].Annotations["io.containerd.image.name"])
		inner, err := outer.ImageIndex(want)
		require.NoError(t, err)
		got, err := inner.Digest()
		require.NoError(t, err)
		require.Equal(t, want, got)
	})

	t.Run("tarball", func(t *testing.T) {
		img, err := PlatformImage(idx, "amd64")
		require.NoError(t, err)
		file := filepath.Join(dir, "etcdhook-linux-amd64.tar")
		require.NoError(t, WriteTarball(file, tag, img))
		m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(file) })
		require.NoError(t, err)
		require.Equal(t, []string{"ghcr.io/etcdhook/etcdhook:v0.1.0"}, m[0].RepoTags)
		loaded, err := tarball.ImageFromPath(file, nil)
		require.NoError(t, err)
		for _, f := range []func(v1.Image) (v1.Hash, error){(v1.Image).ConfigName, layerDigest} {
			a, err := f(img)
			require.NoError(t, err)
			b, err := f(loaded)
			require.NoError(t, err)
			require.Equal(t, a, b)
		}
	})

	t.Run("push", func(t *testing.T) {
		srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		defer srv.Close()
		ref, err := name.ParseReference(strings.TrimPrefix(srv.URL, "http://") + "/etcdhook/etcdhook:v0.1.0")
		require.NoError(t, err)
		require.NoError(t, Push(context.Background(), ref, idx))
		pulled, err := remote.Index(ref)
		require.NoError(t, err)
		got, err := pulled.Digest()
		require.NoError(t, err)
		require.Equal(t, want, got)
		arm, err := PlatformImage(pulled, "arm64")
		require.NoError(t, err)
		cfg, err := arm.ConfigFile()
		require.NoError(t, err)
		require.Equal(t, []string{"/etcdhook"}, cfg.Config.Entrypoint)
	})
}

func TestParsePlatforms(t *testing.T) {
	arches, err := parsePlatforms("linux/amd64, linux/arm64")
	require.NoError(t, err)
	require.Equal(t, []string{"amd64", "arm64"}, arches)
	for _, bad := range []string{"", "darwin/arm64", "linux/", "linux/arm/v7", "amd64"} {
		_, err := parsePlatforms(bad)
		require.Error(t, err, bad)
	}
}

func layerDigest(img v1.Image) (v1.Hash, error) {
	layers, err := img.Layers()
	if err != nil {
		return v1.Hash{}, err
	}
	return layers[0].Digest()
}
