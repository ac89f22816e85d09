package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
	"github.com/supervise-dev/supervise/profile"
)

// TestRealLimitWords runs each pinned CLI headless, set up as its example
// says, against its provider's usage-limit answer with the reset 90 s
// ahead (mockapi.UsageLimit), and a plain rate limit far ahead where the CLI
// gives up on one, and checks what docs/limits.md records: the
// CLI gives up after its one request, exits 1, and the profile's words read its
// words as a limit, with the reset where the CLI names one (Codex's "try
// again at" to the minute, Gemini's "Please retry in"; Claude Code with an
// API key names none). Claude Code writes its words on stdout, the others
// on stderr. The CLI runs alone here (no supervise): the words are the
// CLI's.
func TestRealLimitWords(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cli     realCLI
		rate    bool          // a plain rate limit (mockapi.Limit), not a usage limit
		resetIn time.Duration // when the limit lifts
		stdout  bool
		within  time.Duration // the reset read, around the real one; 0: none named
	}{
		{claudeCodeCLI(), false, 90 * time.Second, true, 0},
		{codexCLI(), false, 90 * time.Second, false, time.Minute},
		{geminiCLI(), false, 90 * time.Second, false, 5 * time.Second},
		// Rate limits far ahead: Claude Code (beyond a minute) and Gemini
		// CLI (beyond its retryable delay) give up on them as on a usage
		// limit; Codex waits (TestRealLimitRetrying).
		{claudeCodeCLI(), true, 90 * time.Second, true, 0},
		{geminiCLI(), true, 5 * time.Hour, false, 5 * time.Second},
	} {
		name := c.cli.bin
		if c.rate {
			name += "-rate"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newRealEnv(t, c.cli)
			reset := time.Now().Add(c.resetIn).Truncate(time.Second)
			r.answer(mockapi.Until(reset, func(mockapi.Request) mockapi.Reply { return mockapi.Reply{Kind: mockapi.Text, Text: "Done."} }))
			if c.rate {
				r.answer(func(q mockapi.Request) mockapi.Reply {
					if q.Agent && q.Time.Before(reset) {
						return mockapi.Reply{Kind: mockapi.Limit, RetryAfter: reset.Sub(q.Time)}
					}
					return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
				})
			}
			argv := append(append([]string(nil), c.cli.task...), realPrompt)
			cmd := exec.Command(filepath.Join(realCLIDir(), argv[0]), argv[1:]...)
			// TMPDIR: Gemini CLI writes an error report there at each failure.
			cmd.Env, cmd.Dir = append(append(os.Environ(), r.vars...), "TMPDIR="+t.TempDir()), r.proj
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			end := time.Now()
			if code := cmd.ProcessState.ExitCode(); code != 1 || err == nil {
				t.Fatalf("%s exited %d (%v), want 1\nstdout: %s\nstderr: %s", argv[0], code, err, stdout.Bytes(), stderr.Bytes())
			}
			if !end.Before(reset) {
				t.Fatalf("%s ran until the limit lifted: it waited, which docs/limits.md says it does not", argv[0])
			}
			if n := len(r.api.AgentRequests()); n != 1 {
				t.Errorf("%s sent %d agent requests, want 1 (no retry of a limit so far ahead)", argv[0], n)
			}
			words := stderr.Bytes()
			if c.stdout {
				words = stdout.Bytes()
			}
			if len(words) > 4096 {
				words = words[len(words)-4096:] // what supervise's tail keeps
			}
			cli := profile.CLIOf(argv[0])
			lim, ok := profile.LimitOf(words, cli, end)
			if !ok {
				t.Fatalf("the profile's words read no limit in %q", words)
			}
			switch {
			case c.within == 0 && !lim.Reset.IsZero():
				t.Errorf("reset %v read, but the CLI names none: %q", lim.Reset, lim.Line)
			case c.within != 0 && (lim.Reset.Sub(reset) > c.within || reset.Sub(lim.Reset) > c.within):
				t.Errorf("reset %v read from %q, the limit lifts at %v", lim.Reset, lim.Line, reset)
			}
			line := profile.TellingLine(words, cli, nil)
			if line != lim.Line || strings.Contains(line, "WARN") || strings.Contains(line, "[STARTUP]") {
				t.Errorf("telling line %q, the limit's line %q", line, lim.Line)
			}
			t.Logf("%s: exit 1 after %d request(s); said %q; reset %v (real %v)", argv[0], len(r.api.AgentRequests()), lim.Line,
				lim.Reset.Format(time.TimeOnly), reset.Format(time.TimeOnly))
		})
	}
}

// TestRealLimitRetrying: Codex waits a plain rate limit's retry-after
// however long, silent but for one WARN record as it starts to wait; the
// record, read live from its stderr, says until when. A silence deadline
// reads it so as not to take the wait for a hang.
func TestRealLimitRetrying(t *testing.T) {
	t.Parallel()
	r := newRealEnv(t, codexCLI())
	reset := time.Now().Add(5 * time.Hour).Truncate(time.Second)
	r.answer(func(q mockapi.Request) mockapi.Reply {
		if q.Agent {
			return mockapi.Reply{Kind: mockapi.Limit, RetryAfter: reset.Sub(q.Time)}
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
	})
	argv := append(append([]string(nil), codexCLI().task...), realPrompt)
	cmd := exec.Command(filepath.Join(realCLIDir(), argv[0]), argv[1:]...)
	cmd.Env, cmd.Dir = append(os.Environ(), r.vars...), r.proj
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its node wrapper and the native binary, killed together
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	defer func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-done }()
	var until time.Time
	waitFor(t, 120*time.Second, "Codex to say it waits", func() bool {
		var ok bool
		until, ok = profile.Retrying(out.Bytes(), profile.Codex, time.Now())
		return ok
	})
	if until.Sub(reset) > 5*time.Second || reset.Sub(until) > 5*time.Second {
		t.Errorf("Retrying says until %v, the retry-after ends at %v", until, reset)
	}
	select {
	case <-done:
		t.Fatalf("codex exited (%v) instead of waiting", cmd.ProcessState)
	default:
	}
	if n := len(r.api.AgentRequests()); n != 1 {
		t.Errorf("%d agent requests while waiting, want 1", n)
	}
}

// lockedBuffer is an output buffer a test reads while the process writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}
