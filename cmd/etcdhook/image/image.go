package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/etcdhook/etcdhook/api"
)

// The user every process of the image runs as: distroless' nonroot, which the Dockerfile's base had, so
// that an image built either way runs alike (the manifests' securityContext asks for a non-root user).
const (
	nonrootID = 65532
	nonroot   = "65532:65532"
	home      = "home/nonroot"
)

// passwd and group are those of distroless' static image, minus the users nothing here runs as: root
// (to own the files), nobody and nonroot. Programs that look a uid up (the Go runtime's os/user, a
// `kubectl exec … id`) find a name, and a process gets $HOME from the runtime's passwd lookup.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
)

// Binary is the etcdhook executable built for one linux architecture (a GOARCH).
type Binary struct {
	Arch string
	Data []byte
}

// Spec is everything an image depends on; the same Spec gives the same digests.
type Spec struct {
	Binaries []Binary // one image per entry, in this order in the index
	// Created is the images' creation time and every file's modification time: the commit's time
	// (SOURCE_DATE_EPOCH), not the clock, so that a rebuild of the same commit is byte for byte the same.
	Created time.Time
	// Labels go into every image's config and onto the index (org.opencontainers.image.*).
	Labels map[string]string
}

// Index is the multi-architecture image: an OCI index with one image per binary.
func Index(s Spec) (v1.ImageIndex, error) {
	if len(s.Binaries) == 0 {
		return nil, fmt.Errorf("no binary to build an image of")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range s.Binaries {
		img, err := Image(b, s.Created, s.Labels)
		if err != nil {
			return nil, fmt.Errorf("linux/%s: %w", b.Arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: b.Arch}},
		})
	}
	// Registries show an index's annotations (ghcr.io links the package to its repository by
	// org.opencontainers.image.source), and clients that never open a platform's config see them.
	return mutate.Annotations(idx, s.Labels).(v1.ImageIndex), nil
}

// Image is one platform's image: FROM scratch, a single layer (Layer), run as nonroot with the binary
// as its entrypoint.
func Image(b Binary, created time.Time, labels map[string]string) (v1.Image, error) {
	layer, err := Layer(b.Data, created)
	if err != nil {
		return nil, err
	}
	cfg := &v1.ConfigFile{
		Architecture: b.Arch,
		OS:           "linux",
		Created:      v1.Time{Time: created},
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			User:       nonroot,
			Entrypoint: []string{api.HookBinary},
			// A PATH as Docker's default, for `kubectl debug` and tools that exec by name; WorkingDir
			// as distroless' nonroot image.
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			WorkingDir: "/" + home,
			Labels:     labels,
		},
	}
	img, err := mutate.ConfigFile(mutate.MediaType(empty.Image, types.OCIManifestSchema1), cfg)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	return mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "cmd/etcdhook/image", Comment: "etcdhook FROM scratch"},
	})
}

// entry is one file or directory of the layer.
type entry struct {
	name     string
	mode     int64 // permission bits, with the sticky bit for /tmp
	uid      int
	data     []byte // nil for a directory
	isFolder bool
}

// entries are the layer's contents in the order they are written (a directory before what it holds):
// the binary where the member pods and Jobs run it (api.HookBinary), the user database, a home for
// nonroot and a /tmp anyone may write to, as distroless has. Owners are root but for nonroot's home.
func entries(bin []byte) []entry {
	return []entry{
		{name: "etc/", mode: 0o755, isFolder: true},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: api.HookBinary[1:], mode: 0o755, data: bin},
		{name: "home/", mode: 0o755, isFolder: true},
		{name: home + "/", mode: 0o700, uid: nonrootID, isFolder: true},
		{name: "tmp/", mode: 0o1777, isFolder: true},
	}
}

// Layer is the image's only layer. The tar holds nothing that differs between two builds of the same
// binary: fixed names, modes, owners and times, no user or group names, USTAR headers (no PAX records
// with access times). gzip at the best compression: the layer is pulled by every member pod's node.
func Layer(bin []byte, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries(bin) {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: mtime.UTC().Truncate(time.Second), Format: tar.FormatUSTAR}
		if e.isFolder {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("%s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("%s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer)), nil },
		tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithMediaType(types.OCILayer))
}
