// Command image builds etcdhook's container image without Docker (`make image`, run from the
// repository root):
//
//	go run ./cmd/etcdhook/image -tag ghcr.io/etcdhook/etcdhook:v0.1.0 -ldflags '-s -w -X main.version=v0.1.0'
//
// It cross-builds ./cmd/etcdhook for each platform (CGO_ENABLED=0, -trimpath) and assembles, with
// go-containerregistry, an OCI index of one image per platform, each FROM scratch: the binary at
// /etcdhook (api.HookBinary: the member pods' init container and the Jobs run it by that path),
// /etc/passwd and /etc/group with nonroot, /home/nonroot, /tmp (1777), user 65532:65532, entrypoint
// ["/etcdhook"]. No base image is pulled; TLS roots are compiled into the binary (cmd/etcdhook/roots.go).
//
// Into -out it writes oci/ (the multi-platform OCI image layout), etcdhook-linux-<arch>.tar (one
// platform's docker-archive, for `docker load`, `ctr images import`, `localkube image import`) and
// digest (the reference by the index's digest). With -push it uploads the index to a registry.
//
// The build is reproducible: every time in the image is -epoch (SOURCE_DATE_EPOCH, the Makefile passes
// the commit's time), every file's owner and mode is fixed, and Go builds the same binary from the same
// source and toolchain; so the same commit gives the same digest on any machine with the same Go.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// buildTags: disable_grpc_modules is cloud.google.com/go/storage's documented opt-out of its gRPC
// transport's modules (xDS, RLS, envoy's generated code). The GCS store (gocloud.dev/blob/gcsblob) uses
// the JSON API over HTTP, so nothing changes but the binary: 12.7 MB smaller, and 5.5 MiB less resident
// in every process of it from the start (docs/performance.md, issue 45 §3).
const buildTags = "disable_grpc_modules"

// source is the repository the images link to (org.opencontainers.image.source).
const source = "https://github.com/etcdhook/etcdhook"

type options struct {
	tag, platforms, tarPlatform, push string
	goCmd, pkg, ldflags, tags         string
	version, revision, out            string
	epoch                             int64
}

func main() {
	var o options
	flag.StringVar(&o.tag, "tag", "ghcr.io/etcdhook/etcdhook:dev", "image reference with a tag: the name in the layout and the tarball")
	flag.StringVar(&o.platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated linux/<GOARCH> list, one image each in the index")
	flag.StringVar(&o.tarPlatform, "tar", "", "the platform written as a docker-archive tarball, or none (default: this machine's if among -platforms, else the first)")
	flag.StringVar(&o.push, "push", "", "also push the index to this reference (e.g. ghcr.io/etcdhook/etcdhook:v0.1.0), with docker login's credentials")
	flag.StringVar(&o.goCmd, "go", "go", "go command for the builds")
	flag.StringVar(&o.pkg, "pkg", "./cmd/etcdhook", "the package built into /etcdhook")
	flag.StringVar(&o.ldflags, "ldflags", "-s -w", "go build -ldflags (the Makefile's LDFLAGS: the version)")
	flag.StringVar(&o.tags, "tags", buildTags, "go build -tags (the Makefile's GOTAGS)")
	flag.StringVar(&o.version, "version", "dev", "org.opencontainers.image.version label")
	flag.StringVar(&o.revision, "revision", "", "org.opencontainers.image.revision label (the commit)")
	flag.StringVar(&o.out, "out", "bin/image", "output directory: oci/, etcdhook-linux-<arch>.tar, digest")
	flag.Int64Var(&o.epoch, "epoch", envEpoch(), "the images' creation time and the files' times, in seconds since 1970 (default $SOURCE_DATE_EPOCH, else 0)")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// envEpoch is SOURCE_DATE_EPOCH (reproducible-builds.org's convention), or 0 when unset or not a number.
func envEpoch() int64 {
	n, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func run(ctx context.Context, o options) error {
	tag, err := name.NewTag(o.tag, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("-tag: %w (a registry/repository:tag reference)", err)
	}
	arches, err := parsePlatforms(o.platforms)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "etcdhook-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	spec := Spec{Created: time.Unix(o.epoch, 0).UTC(), Labels: map[string]string{
		"org.opencontainers.image.source":  source,
		"org.opencontainers.image.version": o.version,
		"org.opencontainers.image.title":   "etcdhook",
	}}
	if o.revision != "" {
		spec.Labels["org.opencontainers.image.revision"] = o.revision
	}
	for _, arch := range arches {
		bin, err := goBuild(o, arch, filepath.Join(tmp, arch, "etcdhook"))
		if err != nil {
			return err
		}
		spec.Binaries = append(spec.Binaries, Binary{Arch: arch, Data: bin})
	}
	idx, err := Index(spec)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}

	if err := WriteLayout(filepath.Join(o.out, "oci"), tag, idx); err != nil {
		return fmt.Errorf("OCI layout: %w", err)
	}
	fmt.Printf("OCI layout:  %s (%s)\n", filepath.Join(o.out, "oci"), o.platforms)
	if o.tarPlatform != "none" {
		arch := tarArch(o.tarPlatform, arches)
		img, err := PlatformImage(idx, arch)
		if err != nil {
			return fmt.Errorf("-tar %s: not one of -platforms %s", o.tarPlatform, o.platforms)
		}
		file := filepath.Join(o.out, "etcdhook-linux-"+arch+".tar")
		if err := WriteTarball(file, tag, img); err != nil {
			return fmt.Errorf("tarball: %w", err)
		}
		fmt.Printf("tarball:     %s (docker-archive, linux/%s, tagged %s)\n", file, arch, tag)
	}
	byDigest := tag.Context().Digest(digest.String())
	if err := os.WriteFile(filepath.Join(o.out, "digest"), []byte(byDigest.String()+"\n"), 0o644); err != nil {
		return err
	}
	if o.push != "" {
		ref, err := name.ParseReference(o.push, name.StrictValidation)
		if err != nil {
			return fmt.Errorf("-push: %w", err)
		}
		if err := Push(ctx, ref, idx); err != nil {
			return fmt.Errorf("push %s: %w", ref, err)
		}
		fmt.Printf("pushed:      %s@%s\n", ref, digest)
	}
	fmt.Printf("digest:      %s\n", digest)
	return nil
}

// parsePlatforms returns the GOARCHes of a "linux/amd64,linux/arm64" list: the image holds one static
// Linux binary, so only linux platforms make sense.
func parsePlatforms(list string) ([]string, error) {
	var arches []string
	for _, p := range strings.Split(list, ",") {
		arch, ok := strings.CutPrefix(strings.TrimSpace(p), "linux/")
		if !ok || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("-platforms: %q is not linux/<GOARCH>", p)
		}
		arches = append(arches, arch)
	}
	return arches, nil
}

// tarArch is the architecture of -tar's platform: the one asked for, else this machine's when it was
// built (the tarball is for loading here), else the first built.
func tarArch(platform string, arches []string) string {
	if platform != "" {
		return strings.TrimPrefix(platform, "linux/")
	}
	if slices.Contains(arches, runtime.GOARCH) {
		return runtime.GOARCH
	}
	return arches[0]
}

// goBuild cross-builds the binary for linux/arch into file and returns its bytes, so that it depends on
// the source, the toolchain and these flags only, not on the machine or the checkout: -trimpath (no
// local paths), no cgo, -buildvcs=false (Go would otherwise stamp the checkout's state, modified when an
// untracked file lies around, and a Go configured with GOFLAGS=-buildvcs=false would not: the version
// and the image's revision label say which commit it is), and the baseline instruction sets
// (GOAMD64=v1, GOARM64=v8.0) whatever the environment asks, which also suits any node.
func goBuild(o options, arch, file string) ([]byte, error) {
	fmt.Printf("building %s for linux/%s\n", o.pkg, arch)
	cmd := exec.Command(o.goCmd, "build", "-trimpath", "-buildvcs=false", "-tags", o.tags, "-ldflags", o.ldflags, "-o", file, o.pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOAMD64=v1", "GOARM64=v8.0")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build for linux/%s: %w", arch, err)
	}
	return os.ReadFile(file)
}
