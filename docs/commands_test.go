package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// documented are the documents whose command examples CONTRIBUTING.md lists with the tests that run
// them (paths from the repository's root, as the table names them).
var documented = []string{"README.md", "docs/backup-restore.md", "docs/tls.md", "docs/operations.md"}

// commandsSection is the heading of CONTRIBUTING.md's table of the documented commands.
const commandsSection = "## Documented commands and the tests that run them"

// tool is how an inline code span in prose starts when it is a command a user runs: the tool and an
// argument (a bare `etcdctl` names the tool, it is no example).
var tool = regexp.MustCompile(`^(kubectl|etcdctl|etcdutl|etcdhook|helm|make|curl|go|age-keygen) \S`)

// span is an inline code span; spans may wrap across lines within a paragraph.
var span = regexp.MustCompile("`([^`]+)`")

// examples returns the commands a document shows: every line of a shell code block (continuation lines
// joined, comments dropped), and every inline code span of its prose that starts with a tool. A YAML or
// JSON block is a spec or an output, not a command.
func examples(doc string) []string {
	var out []string
	var prose strings.Builder
	inBlock, shell, cont := false, false, ""
	for _, line := range strings.Split(doc, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "```") {
			if !inBlock {
				lang := strings.TrimPrefix(t, "```")
				shell = lang == "sh" || lang == "bash" || lang == "shell" || lang == ""
			}
			inBlock = !inBlock
			prose.WriteString("\n\n") // a block ends the paragraph before it
			continue
		}
		switch {
		case !inBlock:
			prose.WriteString(line + "\n")
		case shell:
			t = cont + t
			if strings.HasSuffix(t, `\`) {
				cont = strings.TrimSuffix(t, `\`)
				continue
			}
			cont = ""
			if c := normalize(trailingComment.ReplaceAllString(t, "")); c != "" && !strings.HasPrefix(c, "#") {
				out = append(out, c)
			}
		}
	}
	for _, m := range span.FindAllStringSubmatch(prose.String(), -1) {
		if c := normalize(m[1]); tool.MatchString(c) {
			out = append(out, c)
		}
	}
	return out
}

// trailingComment is a shell comment after a command (a '#' after a blank).
var trailingComment = regexp.MustCompile(`\s+#.*$`)

// normalize collapses runs of blanks (a span wrapped across lines, columns aligned for comments).
func normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

// row is one line of the table: the files it speaks of, their commands, and the tests that run them.
type row struct {
	files, commands []string
	tests           string
}

// cells splits a table line on its unescaped pipes; a command's own pipe is written \|.
func cells(line string) []string {
	const pipe = "\x00"
	line = strings.ReplaceAll(strings.Trim(strings.TrimSpace(line), "|"), `\|`, pipe)
	var out []string
	for _, c := range strings.Split(line, "|") {
		out = append(out, strings.TrimSpace(strings.ReplaceAll(c, pipe, "|")))
	}
	return out
}

// table reads the rows of CONTRIBUTING.md's section on the documented commands, up to its next heading.
func table(t *testing.T, contributing string) []row {
	_, section, ok := strings.Cut(contributing, "\n"+commandsSection+"\n")
	require.True(t, ok, "CONTRIBUTING.md has no section %q", commandsSection)
	var rows []row
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "#") {
			break
		}
		c := cells(line)
		if !strings.HasPrefix(line, "|") || len(c) != 3 || c[0] == "file" || strings.HasPrefix(c[0], "---") {
			continue
		}
		r := row{files: strings.Split(c[0], ", "), tests: c[2]}
		for _, m := range span.FindAllStringSubmatch(c[1], -1) {
			r.commands = append(r.commands, normalize(m[1]))
		}
		require.NotEmpty(t, r.commands, "a row without a command: %s", line)
		rows = append(rows, r)
	}
	require.NotEmpty(t, rows)
	return rows
}

// testKinds are how a row's test column starts: a test, a make target or a script that runs the
// command, an equivalent one, or why none does.
var testKinds = regexp.MustCompile(`^(unit: |e2e: |make: |script: |equivalent|not run)`)

// pending are tests a row names that are being written on another branch: the name may be missing
// until it lands, and its entry goes then.
var pending = map[string]bool{}

// Every command example of the user-facing documents has a row in CONTRIBUTING.md naming the test that
// runs it (or why none does); every command a row names is still shown by one of the row's files; every
// test, make target and script a row names exists, and a script named as running a command contains it.
func TestDocumentedCommandsAreListed(t *testing.T) {
	b, err := os.ReadFile("../CONTRIBUTING.md")
	require.NoError(t, err)
	rows := table(t, string(b))

	shown := map[string][]string{} // file -> its commands
	for _, f := range documented {
		doc, err := os.ReadFile(filepath.Join("..", f))
		require.NoError(t, err)
		shown[f] = examples(string(doc))
		require.NotEmpty(t, shown[f], "%s shows no command: is the extraction broken?", f)
	}
	for _, f := range documented {
		for _, c := range shown[f] {
			listed := slices.ContainsFunc(rows, func(r row) bool { return slices.Contains(r.files, f) && slices.Contains(r.commands, c) })
			require.True(t, listed, "%s shows `%s`, which CONTRIBUTING.md (%s) does not list with the test that runs it", f, c, commandsSection)
		}
	}

	tests := testFuncs(t)
	makefile, err := os.ReadFile("../Makefile")
	require.NoError(t, err)
	for _, r := range rows {
		for _, f := range r.files {
			require.Contains(t, documented, f, "a row names %s, which is not one of the documents listed", f)
		}
		for _, c := range r.commands {
			stillShown := slices.ContainsFunc(r.files, func(f string) bool { return slices.Contains(shown[f], c) })
			require.True(t, stillShown, "CONTRIBUTING.md lists `%s` for %v, which no longer show it", c, r.files)
		}
		require.Regexp(t, testKinds, r.tests, "the test column of `%s`", r.commands[0])
		for _, name := range regexp.MustCompile(`\bTest[A-Z]\w*`).FindAllString(r.tests, -1) {
			require.True(t, tests[name] || pending[name], "the row of `%s` names %s: no such test", r.commands[0], name)
		}
		for _, m := range regexp.MustCompile(`make: ([a-z][\w-]*)`).FindAllStringSubmatch(r.tests, -1) {
			require.Regexp(t, `(?m)^`+regexp.QuoteMeta(m[1])+`:`, string(makefile), "the row of `%s` names make %s: no such target", r.commands[0], m[1])
		}
		for _, m := range regexp.MustCompile(`script: (\S+)`).FindAllStringSubmatch(r.tests, -1) {
			script, err := os.ReadFile(filepath.Join("..", m[1]))
			require.NoError(t, err, "the row of `%s` names the script %s", r.commands[0], m[1])
			for _, c := range r.commands {
				require.Contains(t, normalize(string(script)), c, "%s does not run `%s` as written", m[1], c)
			}
		}
	}
}

// testFuncs are the names of the repository's test functions (e2e's build-tagged ones included).
func testFuncs(t *testing.T) map[string]bool {
	decl := regexp.MustCompile(`(?m)^func (Test[A-Z]\w*)\(t \*testing\.T\)`)
	names := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	require.NoError(t, err)
	return names
}
