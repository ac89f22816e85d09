package supervisor

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The line a death quotes is the one that says most: what each pinned CLI
// printed when asked to resume a conversation it does not have (Codex
// follows its error with a stack dump), an error over chatter, printable
// and bounded.
func TestTellingLine(t *testing.T) {
	for _, c := range []struct{ tail, want string }{
		{"No conversation found with session ID: 7a0e\n", "No conversation found with session ID: 7a0e"},
		{"Error resuming session: No previous sessions found for this project.\n", "Error resuming session: No previous sessions found for this project."},
		{"WARNING: proceeding\nError: thread/resume: thread/resume failed: no rollout found for thread id 7a (code -32600)\n\nStack backtrace:\n   0: <unknown>\n   1: <unknown>\n",
			"Error: thread/resume: thread/resume failed: no rollout found for thread id 7a (code -32600)"},
		{"loading\nAPI Error: 500 overloaded\nretrying later\n", "API Error: 500 overloaded"},
		{"one\ntwo\n\n", "two"},
		{"\x1b[31mred alert\x1b[0m\x00\n", "red alert"},
		{"", ""},
	} {
		if got := tellingLine([]byte(c.tail)); got != c.want {
			t.Errorf("tellingLine(%q) = %q, want %q", c.tail, got, c.want)
		}
	}
	if got := tellingLine([]byte(strings.Repeat("é", 400))); len(got) > 304 || !strings.HasSuffix(got, "...") {
		t.Errorf("a long line is kept at %d bytes: %q", len(got), got[:20])
	}
}

// The tail passes the agent's stderr through unchanged and keeps its end,
// from a real process writing to the pipe.
func TestStderrTail(t *testing.T) {
	out, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	w, tail, err := startTail(out)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `i=0; while [ $i -lt 300 ]; do echo "line $i of chatter"; i=$((i+1)); done; echo "No conversation found with session ID: x" >&2; exit 1`)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	cmd.Wait()
	if got := tail.said(); got != "No conversation found with session ID: x" {
		t.Errorf("said %q", got)
	}
	b, _ := os.ReadFile(out.Name())
	if !strings.HasPrefix(string(b), "line 0 of chatter\n") || !strings.HasSuffix(string(b), "session ID: x\n") || strings.Count(string(b), "\n") != 301 {
		t.Errorf("passed through %d bytes, %d lines: not the agent's output unchanged", len(b), strings.Count(string(b), "\n"))
	}
}
