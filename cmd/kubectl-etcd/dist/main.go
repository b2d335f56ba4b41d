// Command dist builds the kubectl plugin's krew release into a directory (`make plugin-dist`, run from
// the repository root):
//
//	go run ./cmd/kubectl-etcd/dist -version v0.1.0 -out dist
//
// For each platform of the krew manifest it cross-builds kubectl-etcd (CGO_ENABLED=0, -trimpath, the
// version in plugin.Version) and packs kubectl-etcd_<version>_<os>_<arch>.tar.gz holding the binary
// (kubectl-etcd, or kubectl-etcd.exe on Windows) and LICENSE at the archive's root, as krew extracts
// them. It writes sha256sums.txt (sha256sum's format) and etcd.yaml: cmd/kubectl-etcd/krew.yaml
// rendered as krew-release-bot renders it, each addURIAndSha giving the release URL and the sha256 of
// the archive built here. The result is checked as krew would check it (Verify) before dist exits 0.
//
// The archives are reproducible: fixed modes, owners and times, so the same source and Go version give
// the same sha256.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

func main() {
	version := flag.String("version", "v0.1.0", "release tag: spec.version, the archive names and URLs, `kubectl etcd version`")
	out := flag.String("out", "dist", "directory for the archives, sha256sums.txt and etcd.yaml")
	tmpl := flag.String("template", "cmd/kubectl-etcd/krew.yaml", "krew manifest template")
	license := flag.String("license", "LICENSE", "licence file packed in every archive")
	goCmd := flag.String("go", "go", "go command for the builds")
	flag.Parse()
	if err := run(*goCmd, *version, *out, *tmpl, *license); err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(1)
	}
}

func run(goCmd, version, out, tmplPath, licensePath string) error {
	if !validVersion(version) {
		return fmt.Errorf("version %q: krew wants a semantic version with a leading v (v0.1.0)", version)
	}
	tmpl, err := os.ReadFile(tmplPath)
	if err != nil {
		return err
	}
	license, err := os.ReadFile(licensePath)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	// Only this command's own outputs are removed, so that an archive of a platform dropped from the
	// list (or of another version) does not linger beside the new ones.
	old, _ := filepath.Glob(filepath.Join(out, "kubectl-etcd_*.tar.gz"))
	for _, f := range append(old, filepath.Join(out, SumsFile), filepath.Join(out, ManifestFile)) {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "kubectl-etcd-dist-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	var archives []string
	for _, p := range Platforms {
		bin := filepath.Join(tmp, p.OS+"_"+p.Arch, p.Bin())
		fmt.Printf("building %s/%s\n", p.OS, p.Arch)
		cmd := exec.Command(goCmd, "build", "-trimpath",
			"-ldflags", "-s -w -X github.com/etcdhook/etcdhook/cmd/kubectl-etcd/plugin.Version="+version,
			"-o", bin, "./cmd/kubectl-etcd")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build for %s/%s: %w", p.OS, p.Arch, err)
		}
		exe, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		name := ArchiveName(version, p)
		if err := WriteArchive(filepath.Join(out, name), p.Bin(), exe, license); err != nil {
			return err
		}
		archives = append(archives, name)
	}
	sums, err := WriteSums(out, archives)
	if err != nil {
		return err
	}
	manifest, err := Render(tmpl, version, sums)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, ManifestFile), manifest, 0o644); err != nil {
		return err
	}
	if err := Verify(manifest, out, version); err != nil {
		return fmt.Errorf("%s is not what krew accepts: %w", filepath.Join(out, ManifestFile), err)
	}
	for _, a := range archives {
		fmt.Printf("%s  %s\n", sums[a], filepath.Join(out, a))
	}
	fmt.Println("manifest:", filepath.Join(out, ManifestFile))
	return nil
}
