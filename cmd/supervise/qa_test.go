package main

import (
	"strings"
	"testing"
)

// A subcommand that finds its arguments wrong after parsing prints its
// usage: parseFlags silences the flag package's own usage only while it
// parses.
func TestUsagePrintedAfterParse(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	t.Setenv("NOTIFY_SOCKET", "/nonexistent/notify.sock")
	for _, args := range [][]string{{"resume"}, {"resume", "a", "b"}, {"notify", "--barrier=false"}} {
		code, _, errs := call(t, args...)
		if code != exitUsage || !strings.Contains(errs, "Usage: supervise "+args[0]) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and the usage", args, code, errs)
		}
	}
}

// A resume signal must be one the agent can catch: SIGKILL would kill the
// agent at every manual resume, SIGSTOP would freeze it.
func TestResumeSignalMustBeCatchable(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	for _, sig := range []string{"SIGKILL", "KILL", "9", "SIGSTOP", "19"} {
		code, _, errs := call(t, "--resume-signal", sig, "--", "true")
		if code != exitUsage || !strings.Contains(errs, "--resume-signal") {
			t.Errorf("--resume-signal %s: exit %d, stderr %q; want 2 naming the flag", sig, code, errs)
		}
	}
}
