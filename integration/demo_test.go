package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// supervise demo tells its story and exits 0 well under a minute: one
// automatic resume, A parked after two consecutive dirty deaths while B
// completes a turn, a manual resume that finishes A, the summary table.
// Its stdout is not a terminal, so it does not pause. SUPERVISE_* settings
// from the environment (a test suite's SUPERVISE_RESUME=off) must not
// change the story, and no process of the demo may outlive it.
func TestDemo(t *testing.T) {
	e := newEnv(t) // every process of the demo carries the test's id
	e.set("SUPERVISE_RESUME=off", "SUPERVISE_RESUME_LIMIT=5")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, superviseBin, "demo")
	cmd.Env = append(os.Environ(), e.vars...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	out := stdout.String()
	if err != nil {
		t.Fatalf("supervise demo: %v after %v\nstdout:\n%s\nstderr:\n%s", err, took, out, stderr.String())
	}
	t.Logf("supervise demo took %v", took)
	if took > 30*time.Second {
		t.Errorf("supervise demo took %v, want well under a minute", took)
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr is not empty:\n%s", stderr.String())
	}

	mustMatch := func(what, pattern string) {
		t.Helper()
		if !regexp.MustCompile(pattern).MatchString(out) {
			t.Errorf("output lacks %s (/%s/)", what, pattern)
		}
	}
	// The story, step by step.
	mustMatch("B's first turn", `session B: "summarise yesterday's changelog": turn completed`)
	mustMatch("A's turn in a tool", `session A: "add retries to the HTTP client and write client.go": running\s+the tool write_file`)
	mustMatch("the kill -9", `\$ kill -9 \d+`)
	mustMatch("the relaunch with A's resume", `run 2, pid \d+\) with\s+\$SUPERVISE_RESUME_FILE`)
	if n := strings.Count(out, "[supervise: automatic continuation]"); n != 1 {
		t.Errorf("%d automatic continuations shown, want exactly 1", n)
	}
	mustMatch("the interrupted request in the continuation", `> add retries to the HTTP client and write client.go`)
	mustMatch("A parked with the consecutive-deaths reason", `Session A is now parked, reason:\n\s+mid-turn at 2 consecutive dirty deaths`)
	mustMatch("the journal's record of the kill -9", `journal: run 1, pid \d+: killed by SIGKILL \(a dirty death\)`)
	mustMatch("the journal's record of the second death", `journal: run 2, pid \d+: killed by SIGKILL \(a dirty death\)`)
	mustMatch("B's turn after the park", `session B: "run the unit tests": turn completed \(run 3\)`)
	mustMatch("the status text with A parked", `(?m)^\s+A\s+parked\s+2\s+a1\s+.*mid-turn at 2 consecutive dirty deaths`)
	mustMatch("the resume command in the status", `A is parked; resume it with: supervise resume --state-dir \S+ A`)
	mustMatch("the manual resume delivered live", `session A will be resumed: delivered to the running agent`)
	mustMatch("the manual resume's reason", `reason is "manual resume"`)
	mustMatch("A finished after the manual resume", `session A: "add retries to the HTTP client and write client.go": turn\s+completed \(run 3\)`)
	mustMatch("the note on ignored settings", `ignores[A-Z_,\s]*\bSUPERVISE_RESUME\b`)

	// The summary table.
	summary := out[strings.Index(out, "\nSummary\n")+1:]
	if !strings.HasPrefix(summary, "Summary\n") {
		t.Fatalf("no summary table:\n%s", out)
	}
	out = summary
	mustMatch("the run count", `(?m)^\s+runs\s+3$`)
	mustMatch("the dirty deaths", `(?m)^\s+dirty deaths\s+2$`)
	mustMatch("exactly one automatic resume dispatched", `(?m)^\s+resumes dispatched\s+2\s+\(1 automatic, 1 by hand\)$`)
	mustMatch("one session parked", `(?m)^\s+sessions parked\s+1\s+\(A\)$`)
	mustMatch("run 1 killed", `(?m)^\s+1\s+\d+\s+yes\s+killed by SIGKILL`)
	mustMatch("run 2 killed", `(?m)^\s+2\s+\d+\s+yes\s+killed by SIGKILL`)
	mustMatch("run 3 stopped cleanly", `(?m)^\s+3\s+\d+\s+no\s+exited 0, a requested stop`)
	mustMatch("A's final row", `(?m)^\s+A\s+idle\s+0\s+1\s+automatic, by hand$`)
	mustMatch("B's final row", `(?m)^\s+B\s+idle\s+0\s+2\s+-$`)

	// Nothing is left behind: no process, no state dir.
	if left := e.tagged(); len(left) > 0 {
		t.Errorf("processes of the demo still alive after it exited: %v", left)
	}
	if m := regexp.MustCompile(`--state-dir (\S+)`).FindStringSubmatch(stdout.String()); m == nil {
		t.Errorf("the output does not name the state dir")
	} else if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("the demo's state dir %s is still there (%v)", m[1], err)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s", stdout.String())
	}
}
