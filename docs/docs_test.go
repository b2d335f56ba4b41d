// Package docs holds the project's documentation; this test keeps the code's citations of it true.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// citation is how code and documents cite the design: docs/design/NN-topic.md §N.M (or, from inside
// docs/, design/NN-topic.md §N.M).
var citation = regexp.MustCompile(`design/(\d\d)-[a-z-]+\.md §(\d+(?:\.\d+)*)`)

// Every citation of a design section names the file of that section, and the section is a heading
// there: the design is split one file per section, and a section that moves must take its citations
// along.
func TestDesignCitationsResolve(t *testing.T) {
	headings := map[string]string{} // file -> its headings, one per line
	var walkedSelf bool
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "bin", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".md") && !strings.HasSuffix(path, ".yaml") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		walkedSelf = walkedSelf || filepath.Base(path) == "docs_test.go"
		// The design is no longer one file: a citation of it names the section's file.
		require.NotRegexp(t, `docs/design\.md|\]\(design\.md|design\.md §`, string(b), "%s cites the design as one file", path)
		for _, m := range citation.FindAllStringSubmatchIndex(string(b), -1) {
			text := string(b)
			cited := text[m[0]:m[1]]
			file := filepath.Join("design", filepath.Base(strings.SplitN(cited, " ", 2)[0]))
			section := text[m[4]:m[5]]
			require.Equal(t, text[m[2]:m[3]], leadingNumber(section), "%s cites %q: section %s is not in that file", path, cited, section)
			h, ok := headings[file]
			if !ok {
				doc, err := os.ReadFile(file)
				require.NoError(t, err, "%s cites %q", path, cited)
				for _, l := range strings.Split(string(doc), "\n") {
					if strings.HasPrefix(l, "#") {
						h += l + "\n"
					}
				}
				headings[file] = h
			}
			require.Regexp(t, `(?m)^#+ §`+regexp.QuoteMeta(section)+`[ :.]`, h, "%s cites %q: no such heading in %s", path, cited, file)
		}
		return nil
	})
	require.NoError(t, err)
	require.True(t, walkedSelf, "the walk covers the repository")
}

// leadingNumber is "16" for "16.8.2", zero-padded to two digits as the files are named.
func leadingNumber(section string) string {
	n := strings.SplitN(section, ".", 2)[0]
	if len(n) == 1 {
		n = "0" + n
	}
	return n
}
