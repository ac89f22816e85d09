package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
	"github.com/supervise-dev/supervise/internal/agentsaid"
)

// TestRealLimitWords runs each pinned CLI headless, set up as its example
// says, against its provider's usage-limit answer with the reset 90 s
// ahead (mockapi.UsageLimit), and checks what docs/limits.md records: the
// CLI gives up after its one request, exits 1, and agentsaid reads its
// words as a limit, with the reset where the CLI names one (Codex's "try
// again at" to the minute, Gemini's "Please retry in"; Claude Code with an
// API key names none). Claude Code writes its words on stdout, the others
// on stderr. The CLI runs alone here (no supervise): the words are the
// CLI's.
func TestRealLimitWords(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cli    realCLI
		stdout bool
		within time.Duration // the reset read, around the real one; 0: none named
	}{
		{claudeCodeCLI(), true, 0},
		{codexCLI(), false, time.Minute},
		{geminiCLI(), false, 5 * time.Second},
	} {
		t.Run(c.cli.bin, func(t *testing.T) {
			t.Parallel()
			r := newRealEnv(t, c.cli)
			reset := time.Now().Add(90 * time.Second).Truncate(time.Second)
			r.answer(mockapi.Until(reset, func(mockapi.Request) mockapi.Reply { return mockapi.Reply{Kind: mockapi.Text, Text: "Done."} }))
			argv := append(append([]string(nil), c.cli.task...), realPrompt)
			cmd := exec.Command(filepath.Join(realCLIDir(), argv[0]), argv[1:]...)
			cmd.Env, cmd.Dir = append(os.Environ(), r.vars...), r.proj
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
				t.Errorf("%s sent %d agent requests, want 1 (no retry of a usage limit)", argv[0], n)
			}
			words := stderr.Bytes()
			if c.stdout {
				words = stdout.Bytes()
			}
			if len(words) > 4096 {
				words = words[len(words)-4096:] // what supervise's tail keeps
			}
			cli := agentsaid.CLIOf(argv[0])
			lim, ok := agentsaid.LimitOf(words, cli, end)
			if !ok {
				t.Fatalf("agentsaid reads no limit in %q", words)
			}
			switch {
			case c.within == 0 && !lim.Reset.IsZero():
				t.Errorf("reset %v read, but the CLI names none: %q", lim.Reset, lim.Line)
			case c.within != 0 && (lim.Reset.Sub(reset) > c.within || reset.Sub(lim.Reset) > c.within):
				t.Errorf("reset %v read from %q, the limit lifts at %v", lim.Reset, lim.Line, reset)
			}
			line := agentsaid.TellingLine(words, cli, nil)
			if line != lim.Line || strings.Contains(line, "WARN") || strings.Contains(line, "[STARTUP]") {
				t.Errorf("telling line %q, the limit's line %q", line, lim.Line)
			}
			t.Logf("%s: exit 1 after %d request(s); said %q; reset %v (real %v)", argv[0], len(r.api.AgentRequests()), lim.Line,
				lim.Reset.Format(time.TimeOnly), reset.Format(time.TimeOnly))
		})
	}
}
