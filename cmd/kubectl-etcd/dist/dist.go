package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"

	"sigs.k8s.io/yaml"
)

// Platform is one os/arch the plugin is released for.
type Platform struct{ OS, Arch string }

// Bin is the binary's name in the archive and the manifest's bin.
func (p Platform) Bin() string {
	if p.OS == "windows" {
		return "kubectl-etcd.exe"
	}
	return "kubectl-etcd"
}

// Platforms are those of cmd/kubectl-etcd/krew.yaml, in its order; Verify fails if the two differ.
var Platforms = []Platform{
	{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"},
}

const (
	// ManifestFile is the rendered manifest: `kubectl krew install --manifest=dist/etcd.yaml` (krew
	// names a plugin's manifest after the plugin).
	ManifestFile = "etcd.yaml"
	// SumsFile holds `sha256sum`'s lines for the archives.
	SumsFile = "sha256sums.txt"
	// License is the licence's name in every archive (krew-index wants the licence installed).
	License = "LICENSE"
)

// ArchiveName is the archive's file name, the last element of the template's release URL.
func ArchiveName(version string, p Platform) string {
	return fmt.Sprintf("kubectl-etcd_%s_%s_%s.tar.gz", version, p.OS, p.Arch)
}

// archiveTime is every archive entry's and the gzip header's time: fixed, so that an archive depends
// only on its content.
var archiveTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// WriteArchive writes the .tar.gz krew downloads for one platform: bin (mode 0755) and LICENSE (0644)
// at its root.
func WriteArchive(file, bin string, exe, license []byte) error {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	gz.ModTime = archiveTime
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{bin, 0o755, exe}, {License, 0o644, license}} {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)),
			ModTime: archiveTime, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return os.WriteFile(file, buf.Bytes(), 0o644)
}

// WriteSums writes SumsFile in dir for the named archives and returns their sha256 by name.
func WriteSums(dir string, archives []string) (map[string]string, error) {
	sums := map[string]string{}
	var b strings.Builder
	for _, a := range archives {
		s, err := fileSha256(filepath.Join(dir, a))
		if err != nil {
			return nil, err
		}
		sums[a] = s
		fmt.Fprintf(&b, "%s  %s\n", s, a)
	}
	return sums, os.WriteFile(filepath.Join(dir, SumsFile), []byte(b.String()), 0o644)
}

func fileSha256(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// Render executes the krew template for the release tag version as krew-release-bot does: the data
// has TagName (and Version, the tag without its v), and {{addURIAndSha URL .TagName}} renders URL with
// the same data and becomes its uri and sha256 lines. The sha256 is that of the archive named by URL's
// last element in sums (the archives built here, not downloaded): an archive missing from sums is an
// error. The template's leading comment (about the template) is replaced by one about the rendering.
func Render(tmpl []byte, version string, sums map[string]string) ([]byte, error) {
	type data struct{ TagName, Version string }
	d := data{TagName: version, Version: strings.TrimPrefix(version, "v")}
	t, err := template.New("krew.yaml").Option("missingkey=error").Funcs(template.FuncMap{
		"addURIAndSha": func(url, tag string) (string, error) {
			u, err := template.New("url").Option("missingkey=error").Parse(url)
			if err != nil {
				return "", err
			}
			var b strings.Builder
			if err := u.Execute(&b, data{TagName: tag, Version: strings.TrimPrefix(tag, "v")}); err != nil {
				return "", err
			}
			sum, ok := sums[path.Base(b.String())]
			if !ok {
				return "", fmt.Errorf("no archive %s built for %s", path.Base(b.String()), b.String())
			}
			return fmt.Sprintf("uri: %s\n    sha256: %s", b.String(), sum), nil
		},
	}).Parse(string(tmpl))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return nil, err
	}
	lines := strings.SplitAfter(b.String(), "\n")
	for len(lines) > 0 && strings.HasPrefix(lines[0], "#") {
		lines = lines[1:]
	}
	head := fmt.Sprintf("# kubectl-etcd %s for krew, rendered from cmd/kubectl-etcd/krew.yaml by `make plugin-dist`\n"+
		"# with the sha256 of the archives built beside it (%s).\n", version, SumsFile)
	return []byte(head + strings.Join(lines, "")), nil
}

// Manifest is a krew Plugin (krew.googlecontainertools.github.com/v1alpha2), every field krew reads.
type Manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage,omitempty"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description,omitempty"`
		Caveats          string `json:"caveats,omitempty"`
		Platforms        []struct {
			Selector struct {
				MatchLabels      map[string]string `json:"matchLabels,omitempty"`
				MatchExpressions []any             `json:"matchExpressions,omitempty"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files,omitempty"`
		} `json:"platforms"`
	} `json:"spec"`
}

var (
	validSha256  = regexp.MustCompile(`^[a-f0-9]{64}$`)
	semver       = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	safeName     = regexp.MustCompile(`^[\w-]+$`)
	validVersion = semver.MatchString
)

// ReleaseURL is where the template says a release's archive is downloaded from.
func ReleaseURL(version string, p Platform) string {
	return "https://github.com/etcdhook/etcdhook/releases/download/" + version + "/" + ArchiveName(version, p)
}

// Verify checks a rendered manifest as krew does before installing (its ValidatePlugin: apiVersion,
// kind, a safe name, a one-line short description, a v-prefixed semantic version, and per platform a
// uri, a lowercase hex sha256, a bin, files with from and to, a selector on os and arch only), and
// against the archives in dir: every platform of Platforms exactly once, its uri the release URL of
// its archive, that archive's sha256, and the archive holding exactly the binary (executable, named as
// bin) and LICENSE, both installed by files. No field krew does not know is allowed.
func Verify(manifest []byte, dir, version string) error {
	var m Manifest
	if err := yaml.UnmarshalStrict(manifest, &m, yaml.DisallowUnknownFields); err != nil {
		return err
	}
	switch {
	case m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2":
		return fmt.Errorf("apiVersion %q", m.APIVersion)
	case m.Kind != "Plugin":
		return fmt.Errorf("kind %q", m.Kind)
	case m.Metadata.Name != "etcd" || !safeName.MatchString(m.Metadata.Name):
		return fmt.Errorf("metadata.name %q, want etcd (kubectl etcd)", m.Metadata.Name)
	case m.Spec.ShortDescription == "" || strings.ContainsAny(m.Spec.ShortDescription, "\r\n"):
		return fmt.Errorf("spec.shortDescription %q: one line wanted", m.Spec.ShortDescription)
	case !semver.MatchString(m.Spec.Version) || m.Spec.Version != version:
		return fmt.Errorf("spec.version %q, want %s", m.Spec.Version, version)
	case len(m.Spec.Platforms) != len(Platforms):
		return fmt.Errorf("%d platforms, want %d (%v)", len(m.Spec.Platforms), len(Platforms), Platforms)
	}
	for i, pl := range m.Spec.Platforms {
		labels := pl.Selector.MatchLabels
		p := Platform{OS: labels["os"], Arch: labels["arch"]}
		where := fmt.Sprintf("platform %d (%s/%s)", i, p.OS, p.Arch)
		if len(labels) != 2 || len(pl.Selector.MatchExpressions) != 0 || !slices.Contains(Platforms, p) {
			return fmt.Errorf("%s: selector %+v, want matchLabels {os, arch} of one of %v", where, pl.Selector, Platforms)
		}
		for _, q := range m.Spec.Platforms[:i] {
			if q.Selector.MatchLabels["os"] == p.OS && q.Selector.MatchLabels["arch"] == p.Arch {
				return fmt.Errorf("%s: listed twice", where)
			}
		}
		if pl.URI != ReleaseURL(version, p) {
			return fmt.Errorf("%s: uri %q, want %q", where, pl.URI, ReleaseURL(version, p))
		}
		if !validSha256.MatchString(pl.Sha256) {
			return fmt.Errorf("%s: sha256 %q is not 64 lowercase hex digits", where, pl.Sha256)
		}
		archive := filepath.Join(dir, path.Base(pl.URI))
		sum, err := fileSha256(archive)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if pl.Sha256 != sum {
			return fmt.Errorf("%s: sha256 %s, but %s has %s", where, pl.Sha256, archive, sum)
		}
		if pl.Bin != p.Bin() {
			return fmt.Errorf("%s: bin %q, want %q", where, pl.Bin, p.Bin())
		}
		entries, err := ArchiveEntries(archive)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if len(entries) != 2 || entries[pl.Bin] == nil || entries[License] == nil {
			return fmt.Errorf("%s: %s holds %v, want %s and %s", where, archive, slices.Sorted(maps.Keys(entries)), pl.Bin, License)
		}
		if p.OS != "windows" && entries[pl.Bin].Mode&0o111 == 0 {
			return fmt.Errorf("%s: %s in %s is not executable", where, pl.Bin, archive)
		}
		// krew moves each file matching from (a glob in the extracted archive) into to; bin and the
		// licence must both be installed (krew-index asks for the licence).
		if len(pl.Files) == 0 {
			return fmt.Errorf("%s: no files: list %s and %s", where, pl.Bin, License)
		}
		installed := map[string]bool{}
		for _, f := range pl.Files {
			if f.From == "" || f.To == "" {
				return fmt.Errorf("%s: files entry %+v lacks from or to", where, f)
			}
			matched := false
			for name := range entries {
				if ok, err := path.Match(f.From, name); err != nil {
					return fmt.Errorf("%s: files from %q: %w", where, f.From, err)
				} else if ok {
					matched = true
					installed[path.Join(f.To, name)] = true
				}
			}
			if !matched {
				return fmt.Errorf("%s: files from %q matches nothing in %s", where, f.From, archive)
			}
		}
		if !installed[pl.Bin] || !installed[License] {
			return fmt.Errorf("%s: files install %v, want %s and %s at the root", where, slices.Sorted(maps.Keys(installed)), pl.Bin, License)
		}
	}
	return nil
}

// ArchiveEntries reads a .tar.gz: its regular files by name. Anything else (a directory, a link, a
// name with a directory) is an error: the archives hold two files at their root.
func ArchiveEntries(file string) (map[string]*tar.Header, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	entries := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return entries, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg || strings.Contains(h.Name, "/") || entries[h.Name] != nil {
			return nil, fmt.Errorf("%s: unexpected entry %q (type %c)", file, h.Name, h.Typeflag)
		}
		entries[h.Name] = h
	}
}
