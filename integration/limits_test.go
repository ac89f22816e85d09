package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/profile"
)

// The stand-in CLIs' limit mode ends the turn with the pinned CLIs' own
// words and a reset ahead, which the profile's words read back to the second (to
// the minute for Codex, whose words name a clock time).
func TestFakeCLILimitWords(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		bin    string
		stdout bool
		within time.Duration
	}{{"claude", true, time.Minute}, {"codex", false, time.Minute}, {"gemini", false, 2 * time.Second}} {
		t.Run(c.bin, func(t *testing.T) {
			a := newAdapterEnv(t)
			cmd := exec.Command(filepath.Join(a.bins.dir, c.bin), "-p", "rename the parser")
			if c.bin == "codex" {
				cmd.Args = []string{c.bin, "exec", "rename the parser"}
			}
			cmd.Env = append(os.Environ(), append(a.vars, "SUPERVISE_RUN=1", "FAKECLI_LIMIT_RUN=1", "FAKECLI_LIMIT_RESET=2h")...)
			cmd.Dir = a.dir
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.Run()
			end := time.Now()
			if code := cmd.ProcessState.ExitCode(); code != 1 {
				t.Fatalf("exit %d, want 1; stderr %s", code, stderr.Bytes())
			}
			ev := a.waitEvent(1, "limit")
			reset, err := time.Parse(time.RFC3339, ev.arg)
			if err != nil {
				t.Fatal(err)
			}
			words := stderr.Bytes()
			if c.stdout {
				words = stdout.Bytes()
			}
			lim, ok := profile.LimitOf(words, profile.CLIOf(c.bin), end)
			if !ok || lim.Reset.Sub(reset) > c.within || reset.Sub(lim.Reset) > c.within {
				t.Errorf("read %+v, %v from %q; the fake's reset %v", lim, ok, words, reset)
			}
		})
	}
}

// The stand-ins hang where a start or silence deadline must catch them:
// at start, before any hook or output; mid-turn, after the prompt's hook
// and before any tool. Each stays until killed.
func TestFakeCLIHangs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ mode, event string }{{"FAKECLI_HANG_START_RUN", "hang-start"}, {"FAKECLI_SILENT_RUN", "silent"}} {
		t.Run(c.event, func(t *testing.T) {
			a := newAdapterEnv(t)
			a.install("claude-code/settings.json", ".claude/settings.json")
			cmd := exec.Command(filepath.Join(a.bins.dir, "claude"), "-p", "rename the parser")
			cmd.Env = append(os.Environ(), append(a.vars, "SUPERVISE_RUN=1", c.mode+"=1")...)
			cmd.Dir = a.dir
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			a.waitEvent(1, c.event)
			select {
			case <-done:
				t.Fatalf("it exited (%v) instead of hanging", cmd.ProcessState)
			default:
			}
			cmd.Process.Kill()
			<-done
			var kinds []string
			for _, ev := range a.events() {
				kinds = append(kinds, ev.kind)
			}
			got := strings.Join(kinds, " ")
			switch c.event {
			case "hang-start":
				if got != "start hang-start" {
					t.Errorf("events %q: something before the hang", got)
				}
			case "silent":
				if !strings.Contains(got, "session") || strings.Contains(got, "tool-running") || !strings.HasSuffix(got, "silent") {
					t.Errorf("events %q, want the turn open and no tool", got)
				}
			}
			if out.Len() != 0 {
				t.Errorf("output %q while hanging", out.Bytes())
			}
		})
	}
}
