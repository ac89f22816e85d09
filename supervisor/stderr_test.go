package supervisor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/profile"
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
	w, tail, err := startTail(out, nil, nil)
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
	if got := tail.said(profile.Unknown); got != "No conversation found with session ID: x" {
		t.Errorf("said %q", got)
	}
	b, _ := os.ReadFile(out.Name())
	if n := tail.written(); n != int64(len(b)) || n < 4096 {
		t.Errorf("written %d bytes, %d passed through", n, len(b))
	}
	if !strings.HasPrefix(string(b), "line 0 of chatter\n") || !strings.HasSuffix(string(b), "session ID: x\n") || strings.Count(string(b), "\n") != 301 {
		t.Errorf("passed through %d bytes, %d lines: not the agent's output unchanged", len(b), strings.Count(string(b), "\n"))
	}
}

// What the pinned CLIs really printed (profile's fixtures),
// through a real pipe: the quoted line is the error that ended the run,
// never Gemini's startup records or Codex's WARN records, and a usage
// limit is read with the reset the CLI named.
func TestStderrTailFixtures(t *testing.T) {
	for _, c := range []struct {
		fixture, said string
		cli           profile.CLI
		reset         bool
	}{
		{"codex-usage-90s", "ERROR: You’ve hit your usage limit. Upgrade to Pro", profile.Codex, true},
		{"gemini-usage-90s", "Error when talking to Gemini API Full report available at:", profile.Gemini, true},
		{"gemini-limit-5h", "Error when talking to Gemini API Full report available at:", profile.Gemini, true},
	} {
		path := filepath.Join("..", "profile", "testdata", c.fixture, "stderr")
		w, tail, err := startTail(devNull(t), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "-c", `cat "$1" >&2; exit 1`, "sh", path)
		cmd.Stderr = w
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		cmd.Wait()
		if got := tail.said(profile.Unknown); !strings.HasPrefix(got, c.said) {
			t.Errorf("%s: said %q, want it to begin %q", c.fixture, got, c.said)
		}
		now := time.Now()
		lim, ok := tail.limit(c.cli, now)
		if !ok || lim.Reset.IsZero() != !c.reset || !strings.HasPrefix(lim.Line, c.said) {
			t.Errorf("%s: limit %+v %v", c.fixture, lim, ok)
		}
	}
	var none *stderrTail
	if _, ok := none.limit(profile.Codex, time.Now()); ok {
		t.Error("a nil tail says a limit")
	}
	if _, ok := none.retrying(profile.Codex, time.Now()); ok {
		t.Error("a nil tail says it retries")
	}
}

// While the agent runs, the tail tells a CLI that waits out a limit
// itself (Codex's recorded 5 h wait) from one that went quiet.
func TestStderrTailRetrying(t *testing.T) {
	path := filepath.Join("..", "profile", "testdata", "codex-limit-5h", "stderr")
	w, tail, err := startTail(devNull(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `cat "$1" >&2; echo written >"$2"; exec sleep 600`, "sh", path, filepath.Join(t.TempDir(), "mark"))
	mark := cmd.Args[len(cmd.Args)-1]
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	bound := time.Now().Add(time.Minute) // a bound on a broken test, not a rule
	for {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		if time.Now().After(bound) {
			t.Fatal("the shell never wrote the fixture")
		}
		time.Sleep(10 * time.Millisecond) // the shell's own mark: an event, polled
	}
	now := time.Date(2026, 12, 1, 23, 50, 0, 0, time.UTC) // the recorded run's hour
	for {
		until, ok := tail.retrying(profile.Codex, now)
		if ok {
			if want := time.Date(2026, 12, 2, 4, 43, 50, 0, time.UTC); until.Sub(want) > 5*time.Second || want.Sub(until) > 5*time.Second {
				t.Errorf("retrying until %v, want about %v", until, want)
			}
			break
		}
		if time.Now().After(bound) {
			t.Fatal("the tail never says Codex retries")
		}
		time.Sleep(10 * time.Millisecond) // the pipe's copy catching up
	}
}

func devNull(t *testing.T) *os.File {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// tellingLine picks the line of an agent's stderr tail that says most,
// cleaned to one bounded line of printable text, as the runner does for an
// agent it does not know.
func tellingLine(tail []byte) string {
	return profile.TellingLine(tail, profile.Unknown, profile.LostConversation)
}
