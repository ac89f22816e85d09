package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's quickstart, followed word for word in a fresh clone, works.
// The commands are read from the clone's own README, between the
// quickstart markers, and run with bash in the clone, with a private HOME
// and state dir.
func TestReadmeQuickstart(t *testing.T) {
	if portableBackend {
		t.Skip("the quickstart builds supervise as the README says, with the default backend: the default run covers it")
	}
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not on PATH: the quickstart's example agent needs it")
	}
	root, _ := filepath.Abs("..")
	dir := t.TempDir()
	clone := filepath.Join(dir, "clone")
	if out, err := exec.Command("git", "clone", "--quiet", root, clone).CombinedOutput(); err != nil {
		t.Skipf("cannot clone the repository (%v): %s", err, out)
	}
	readme, err := os.ReadFile(filepath.Join(clone, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- quickstart.*?-->\\s*```sh\\n(.*?)```\\s*<!-- /quickstart -->").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no quickstart block between <!-- quickstart --> markers")
	}
	script := string(m[1])
	// Then the crash survived: kill -9 mid-turn, the relaunch, status, logs, stop.
	crash := regexp.MustCompile("(?s)<!-- crash.*?-->\\s*```sh\\n(.*?)```\\s*<!-- /crash -->").FindSubmatch(readme)
	if crash == nil {
		t.Fatal("README.md has no crash block between <!-- crash --> markers")
	}
	script += string(crash[1])
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = clone
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(dir, "home"), "XDG_STATE_HOME="+filepath.Join(dir, "state"))
	// A private HOME would move Go's default module and build caches into
	// it: keep the ones this test run uses, so that the quickstart's go
	// commands neither download modules nor rebuild cold.
	for _, name := range []string{"GOMODCACHE", "GOCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", name).Output()
		if v := strings.TrimSpace(string(out)); err == nil && v != "" {
			cmd.Env = append(cmd.Env, name+"="+v)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the quickstart failed: %v\n--- commands:\n%s--- output:\n%s", err, script, out)
	}
	for _, want := range []string{`supervise "quickstart"`, "demo", "idle", "recent runs", "exit",
		`supervise "loop"`, "killed by signal 9", " run=", "stopped: the supervise of"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("quickstart output lacks %q:\n%s", want, out)
		}
	}
}
