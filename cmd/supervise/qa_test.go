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
