package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// fakeDist does what `make plugin-dist` does with the real template and LICENSE, but packs a small
// fake binary per platform instead of cross-building kubectl-etcd (four builds are minutes on two
// cores): it returns the directory and the rendered manifest.
func fakeDist(t *testing.T, version string) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	tmpl, err := os.ReadFile("../krew.yaml")
	require.NoError(t, err)
	license, err := os.ReadFile("../../../LICENSE")
	require.NoError(t, err)
	var names []string
	for _, p := range Platforms {
		name := ArchiveName(version, p)
		require.NoError(t, WriteArchive(filepath.Join(dir, name), p.Bin(), fakeBinary(p), license))
		names = append(names, name)
	}
	sums, err := WriteSums(dir, names)
	require.NoError(t, err)
	manifest, err := Render(tmpl, version, sums)
	require.NoError(t, err)
	return dir, manifest
}

func fakeBinary(p Platform) []byte {
	return []byte("#!/bin/sh\necho kubectl-etcd " + p.OS + "/" + p.Arch + "\n")
}

func sha256Hex(t *testing.T, file string) string {
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// The rendered manifest is a krew Plugin whose every platform points, by its release URL and sha256,
// at the archive built for it, which holds the binary named bin and LICENSE, both installed by files.
// Checked here field by field, independently of Verify, which must accept it too.
func TestRenderedManifest(t *testing.T) {
	dir, manifest := fakeDist(t, "v0.1.0")
	require.NoError(t, Verify(manifest, dir, "v0.1.0"), string(manifest))

	var m Manifest
	require.NoError(t, yaml.UnmarshalStrict(manifest, &m, yaml.DisallowUnknownFields), string(manifest))
	require.Equal(t, "krew.googlecontainertools.github.com/v1alpha2", m.APIVersion)
	require.Equal(t, "Plugin", m.Kind)
	require.Equal(t, "etcd", m.Metadata.Name)
	require.Equal(t, "v0.1.0", m.Spec.Version)
	require.NotContains(t, string(manifest), "{{", "every template action rendered")
	require.True(t, strings.HasPrefix(string(manifest), "# kubectl-etcd v0.1.0 for krew, rendered"), "the template's own comment is replaced")
	require.Len(t, m.Spec.Platforms, len(Platforms))

	sums, err := os.ReadFile(filepath.Join(dir, SumsFile))
	require.NoError(t, err)
	for i, p := range Platforms {
		pl := m.Spec.Platforms[i]
		require.Equal(t, map[string]string{"os": p.OS, "arch": p.Arch}, pl.Selector.MatchLabels)
		name := "kubectl-etcd_v0.1.0_" + p.OS + "_" + p.Arch + ".tar.gz"
		require.Equal(t, "https://github.com/etcdhook/etcdhook/releases/download/v0.1.0/"+name, pl.URI)
		sum := sha256Hex(t, filepath.Join(dir, name))
		require.Equal(t, sum, pl.Sha256, p)
		require.Contains(t, string(sums), sum+"  "+name+"\n", "sha256sum -c format")
		bin := "kubectl-etcd"
		if p.OS == "windows" {
			bin = "kubectl-etcd.exe"
		}
		require.Equal(t, bin, pl.Bin)
		require.Len(t, pl.Files, 2)
		require.Equal(t, bin, pl.Files[0].From)
		require.Equal(t, ".", pl.Files[0].To)
		require.Equal(t, "LICENSE", pl.Files[1].From)
		require.Equal(t, ".", pl.Files[1].To)

		// The archive as tar(1) and krew read it: two regular files at the root.
		f, err := os.Open(filepath.Join(dir, name))
		require.NoError(t, err)
		gz, err := gzip.NewReader(f)
		require.NoError(t, err)
		tr := tar.NewReader(gz)
		got := map[string]string{}
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			require.Equal(t, byte(tar.TypeReg), h.Typeflag)
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			got[h.Name] = string(b)
			if h.Name == bin {
				require.Equal(t, int64(0o755), h.Mode)
			}
		}
		f.Close()
		require.Len(t, got, 2)
		require.Equal(t, string(fakeBinary(p)), got[bin])
		require.Contains(t, got["LICENSE"], "Apache License\n                           Version 2.0, January 2004")
	}
}

// The same inputs give the same archives (the sha256 in a manifest stays right if the archives are
// built again), and Render follows the version into spec.version, the URLs and the archive names.
func TestReproducibleAndVersioned(t *testing.T) {
	dir1, m1 := fakeDist(t, "v1.2.3")
	dir2, m2 := fakeDist(t, "v1.2.3")
	require.Equal(t, string(m1), string(m2))
	require.NoError(t, Verify(m1, dir2, "v1.2.3"))
	require.Contains(t, string(m1), `version: "v1.2.3"`)
	require.Contains(t, string(m1), "/releases/download/v1.2.3/kubectl-etcd_v1.2.3_darwin_arm64.tar.gz")
	require.Error(t, Verify(m1, dir1, "v0.1.0"), "spec.version is the asked one")
}

// Verify refuses what krew or the archives would refuse.
func TestVerifyRefuses(t *testing.T) {
	dir, manifest := fakeDist(t, "v0.1.0")
	s := string(manifest)
	linux := filepath.Join(dir, ArchiveName("v0.1.0", Platforms[0]))
	for _, c := range []struct{ name, manifest, want string }{
		{"wrong apiVersion", strings.Replace(s, "v1alpha2", "v1alpha1", 1), "apiVersion"},
		{"unknown field", strings.Replace(s, "  homepage:", "  license: Apache-2.0\n  homepage:", 1), "unknown field"},
		{"no sha256", strings.Replace(s, "    sha256: ", "    sha: ", 1), "unknown field"},
		{"wrong bin", strings.Replace(s, "bin: kubectl-etcd.exe", "bin: kubectl-etcd", 1), "bin"},
		{"licence not installed", strings.Replace(s, "    - {from: LICENSE, to: .}\n", "", 1), "want kubectl-etcd and LICENSE"},
		{"files missing", strings.Replace(s, "    files:\n    - {from: kubectl-etcd, to: .}\n    - {from: LICENSE, to: .}\n", "", 1), "no files"},
		{"from matches nothing", strings.Replace(s, "{from: kubectl-etcd, to: .}", "{from: bin/kubectl-etcd, to: .}", 1), "matches nothing"},
		{"platform missing", s[:strings.LastIndex(s, "  - selector:")], "platforms"},
		{"selector key", strings.Replace(s, "{os: linux, arch: amd64}", "{os: linux, arch: amd64, distro: debian}", 1), "selector"},
		{"uri elsewhere", strings.Replace(s, "releases/download/v0.1.0/kubectl-etcd_v0.1.0_linux_amd64", "releases/download/v0.1.0/kubectl-etcd_linux_amd64", 1), "uri"},
		{"not semver", strings.Replace(s, `version: "v0.1.0"`, `version: "0.1.0"`, 1), "spec.version"},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NotEqual(t, s, c.manifest, "the case changes the manifest")
			err := Verify([]byte(c.manifest), dir, "v0.1.0")
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
		})
	}

	// An archive rebuilt with other content after the manifest was rendered.
	require.NoError(t, WriteArchive(linux, "kubectl-etcd", []byte("other"), []byte("LICENSE")))
	err := Verify(manifest, dir, "v0.1.0")
	require.ErrorContains(t, err, "sha256")

	// Archives whose manifest was rendered for them but which do not hold what it installs: the
	// licence missing, the binary not executable, a directory.
	tmpl, err := os.ReadFile("../krew.yaml")
	require.NoError(t, err)
	for _, c := range []struct {
		name    string
		entries []*tar.Header
		want    string
	}{
		{"no licence", []*tar.Header{{Name: "kubectl-etcd", Mode: 0o755}}, "want kubectl-etcd and LICENSE"},
		{"not executable", []*tar.Header{{Name: "kubectl-etcd", Mode: 0o644}, {Name: "LICENSE", Mode: 0o644}}, "not executable"},
		{"in a directory", []*tar.Header{{Name: "bin/kubectl-etcd", Mode: 0o755}, {Name: "LICENSE", Mode: 0o644}}, "unexpected entry"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := os.Create(linux)
			require.NoError(t, err)
			gz := gzip.NewWriter(f)
			tw := tar.NewWriter(gz)
			for _, h := range c.entries {
				h.Typeflag, h.Size = tar.TypeReg, 1
				require.NoError(t, tw.WriteHeader(h))
				_, err := tw.Write([]byte("x"))
				require.NoError(t, err)
			}
			require.NoError(t, tw.Close())
			require.NoError(t, gz.Close())
			require.NoError(t, f.Close())
			var names []string
			for _, p := range Platforms {
				names = append(names, ArchiveName("v0.1.0", p))
			}
			sums, err := WriteSums(dir, names)
			require.NoError(t, err)
			m, err := Render(tmpl, "v0.1.0", sums)
			require.NoError(t, err)
			require.ErrorContains(t, Verify(m, dir, "v0.1.0"), c.want)
		})
	}
}

// Render fails rather than write a manifest naming an archive that was not built, or a version
// placeholder it does not know.
func TestRenderRefuses(t *testing.T) {
	tmpl, err := os.ReadFile("../krew.yaml")
	require.NoError(t, err)
	_, err = Render(tmpl, "v0.1.0", map[string]string{})
	require.ErrorContains(t, err, "no archive kubectl-etcd_v0.1.0_linux_amd64.tar.gz built")
	_, err = Render([]byte("spec:\n  version: {{ .Tag }}\n"), "v0.1.0", nil)
	require.Error(t, err)
}
