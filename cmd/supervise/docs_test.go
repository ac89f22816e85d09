package main

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/internal/exitcode"
)

// repoRoot is the module root, two levels above this package.
const repoRoot = "../.."

// docFiles are the Markdown files whose links must resolve.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	for _, pattern := range []string{"docs/*.md", "examples/README.md", "examples/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(repoRoot, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(repoRoot, f)
			files = append(files, rel)
		}
	}
	return files
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	mdFence   = regexp.MustCompile("(?ms)^```.*?^```")
)

// anchors are the GitHub anchors of a Markdown file's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(mdFence.ReplaceAllString(text, ""), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ' || r == '-':
				b.WriteRune('-')
			case r == '_' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// Every relative link in the README, docs/ and the examples' READMEs
// resolves: the file exists, and so does the heading an anchor names.
// None points outside the repository.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		text := mdFence.ReplaceAllString(string(b), "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				t.Errorf("%s: link %s points outside the repository", file, link)
				continue
			}
			target, anchor, _ := strings.Cut(link, "#")
			path := filepath.Join(repoRoot, filepath.Dir(file), target)
			if target == "" {
				path = filepath.Join(repoRoot, file)
			}
			rel, err := filepath.Rel(repoRoot, path)
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s: link %s leaves the repository", file, link)
				continue
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %s: %v", file, link, err)
				continue
			}
			if anchor == "" {
				continue
			}
			tb, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s: link %s: %v", file, link, err)
				continue
			}
			if !anchors(string(tb))[anchor] {
				t.Errorf("%s: link %s: no heading for #%s in %s", file, link, anchor, rel)
			}
		}
	}
}

// codesIn reads the first column of the "Exit codes" table under heading
// in a Markdown file, with blanks removed ("126, 127" reads "126,127").
func codesIn(t *testing.T, file, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", file, heading)
	}
	var codes []string
	inTable := false
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cell := strings.TrimSpace(strings.Split(line, "|")[1])
		if cell == "code" || strings.HasPrefix(cell, "---") {
			continue
		}
		codes = append(codes, strings.ReplaceAll(cell, " ", ""))
	}
	return codes
}

// The README, docs/design.md and --help list the same exit codes, in the
// same order, as internal/exitcode.
func TestExitCodesDocumented(t *testing.T) {
	t.Parallel()
	var want []string
	for _, r := range exitcode.Table() {
		want = append(want, r.Code)
	}
	for _, doc := range []struct{ file, heading string }{
		{"docs/reference.md", "## Exit codes"},
		{"docs/design.md", "### Exit codes"},
	} {
		if got := codesIn(t, doc.file, doc.heading); !slices.Equal(got, want) {
			t.Errorf("%s lists exit codes %v, internal/exitcode has %v", doc.file, got, want)
		}
	}
	help := exitcode.Help()
	for _, c := range want {
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(c) + ` `).MatchString(help) {
			t.Errorf("--help does not list exit code %s:\n%s", c, help)
		}
	}
}

// conflictMarker reports whether line is one git writes into a file whose
// merge it could not finish: "<<<<<<< ours", "||||||| base" (diff3 and
// zdiff3 styles), exactly "=======", or ">>>>>>> theirs". The markers are
// built, not spelt out, so this file never holds one at the start of a line.
func conflictMarker(line string) bool {
	line = strings.TrimSuffix(line, "\r")
	if line == strings.Repeat("=", 7) {
		return true
	}
	for _, c := range []string{"<", "|", ">"} {
		m := strings.Repeat(c, 7)
		if line == m || strings.HasPrefix(line, m+" ") {
			return true
		}
	}
	return false
}

// trackedFiles lists the repository's files relative to repoRoot: those git
// tracks when git is at hand, else every file under repoRoot but .git.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("git"); err == nil {
		cmd := exec.Command("git", "ls-files", "-z")
		cmd.Dir = repoRoot
		if out, err := cmd.Output(); err == nil {
			return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		}
	}
	var files []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(repoRoot, path)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// The markers of an unfinished merge are in no file of the repository
// (a README was once committed with them in a table).
func TestNoConflictMarkers(t *testing.T) {
	t.Parallel()
	files := trackedFiles(t)
	if len(files) == 0 {
		t.Fatal("no files found under the repository root")
	}
	for _, file := range files {
		path := filepath.Join(repoRoot, file)
		info, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // tracked but deleted in the work tree
		}
		if err == nil && !info.Mode().IsRegular() {
			continue // a symlink or a submodule
		}
		var b []byte
		if err == nil {
			b, err = os.ReadFile(path)
		}
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if bytes.IndexByte(b, 0) >= 0 {
			continue // binary
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, len(b)+1)
		for n := 1; sc.Scan(); n++ {
			if conflictMarker(sc.Text()) {
				t.Errorf("%s:%d: merge-conflict marker %q", file, n, sc.Text())
			}
		}
	}
}
