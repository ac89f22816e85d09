package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/runflags"
)

// The command line a newcomer meets (issue 22, item 7), in-process.

// An interpreter running a script is named after the script: two Python
// agents get two state dirs, not one named python3.
func TestDefaultNameIsTheScript(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	t.Chdir(t.TempDir())
	if err := os.WriteFile("my-agent.sh", []byte("exit 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := call(t, "--", "sh", "my-agent.sh"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(state, "supervise", "my-agent", "journal.db")); err != nil {
		t.Errorf("no state dir named after the script: %v", err)
	}
}

// status and resume say how they find the state dir, not "base name of
// AGENT", which they have none of.
func TestLookupHelp(t *testing.T) {
	for _, cmd := range []string{"status", "resume"} {
		code, out, _ := call(t, cmd, "-h")
		if code != 0 || strings.Contains(out, "base name of AGENT") || !strings.Contains(out, "as given to supervise run --state-dir") ||
			!strings.Contains(out, "its --name, else the base name of its AGENT") {
			t.Errorf("%s -h: exit %d, help:\n%s", cmd, code, out)
		}
	}
	// Run flags' help is wrapped: the phrase may span lines.
	if _, out, _ := call(t, "run", "-h"); !strings.Contains(strings.Join(strings.Fields(out), " "), "python3 agent.py, node agent.js and uv run agent.py are named agent") {
		t.Errorf("run -h does not say how an interpreter's agent is named:\n%s", out)
	}
}

// supervise --version, -version and version print the build's version.
func TestVersion(t *testing.T) {
	want := "supervise " + runflags.Version() + "\n"
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		if code, out, errs := call(t, args...); code != 0 || out != want || errs != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0 and %q", args, code, out, errs, want)
		}
	}
}

// The top-level usage lists status --session and words the resumable
// states as the README does.
func TestUsageCommands(t *testing.T) {
	_, out, _ := call(t, "--help")
	for _, want := range []string{"supervise status [--json] [--all | --session ID]", "resume a parked, stopped or pending session", "supervise version"} {
		if !strings.Contains(out, want) {
			t.Errorf("usage lacks %q:\n%s", want, out)
		}
	}
}

// An agent that cannot be started ends supervise with 127, and the death's
// line says so: not "relaunch in 231ms" before the exit.
func TestAgentNotFoundEnds(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	code, _, errs := call(t, "--", "/nonexistent/agent")
	if code != 127 || !strings.Contains(errs, `next=end`) || strings.Contains(errs, "relaunch") {
		t.Errorf("exit %d, stderr:\n%s\nwant 127 and next=end", code, errs)
	}
}

// resume on a state dir supervise never ran with says so, not a raw open
// error.
func TestResumeNoJournal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "never")
	code, _, errs := call(t, "resume", "--state-dir", dir, "s1")
	want := "supervise resume: no journal in " + dir + ": supervise has not run with this state dir (check --name or --state-dir)\n"
	if code != 1 || errs != want {
		t.Errorf("exit %d, stderr %q; want 1 and %q", code, errs, want)
	}
}
