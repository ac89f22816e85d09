package chaoscmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The command line's errors, word for word, each exit status 2 and nothing
// started: bad own flags, bad run flags (checked as supervise run would),
// --resume off from either source, an agent that cannot run.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args   []string
		env    string
		stderr string
	}{
		{nil, "", "supervise chaos: no agent to run: supervise chaos [flags] -- AGENT [ARGS...]\n"},
		{[]string{"--kills=0", "--", "true"}, "", "supervise chaos: --kills must be at least 1 and --timeout positive\n"},
		{[]string{"--timeout=0s", "--", "true"}, "", "supervise chaos: --kills must be at least 1 and --timeout positive\n"},
		{[]string{"--at=x", "--", "true"}, "", "supervise chaos: --at: unknown kill point \"x\": want turn-begin, tool, tool-end or random\n"},
		{[]string{"--", "true"}, "SUPERVISE_AT=x", "supervise chaos: SUPERVISE_AT: unknown kill point \"x\": want turn-begin, tool, tool-end or random\n"},
		{[]string{"--state-dir=/tmp/x", "--", "true"}, "", "supervise chaos: --state-dir refused: chaos runs the agent on a scratch state dir of its own and never writes into a real one; drop it\n"},
		{[]string{"--", "true"}, "SUPERVISE_STATE_DIR=/tmp/x", "supervise chaos: SUPERVISE_STATE_DIR refused: chaos runs the agent on a scratch state dir of its own and never writes into a real one; drop it\n"},
		{[]string{"--name=prod", "--", "true"}, "", "supervise chaos: --name refused: chaos runs the agent on a scratch state dir of its own and never writes into a real one; drop it\n"},
		{[]string{"--resume=off", "--", "true"}, "", "supervise chaos: --resume is off: chaos checks automatic resumes; unset it\n"},
		{[]string{"--", "true"}, "SUPERVISE_RESUME=off", "supervise chaos: SUPERVISE_RESUME is off: chaos checks automatic resumes; unset it\n"},
		{[]string{"--restart=bad", "--", "true"}, "", "supervise chaos: --restart: \"bad\": restart mode must be on-failure, always or never\n"},
		{[]string{"--log=/nonexistent/x", "--", "true"}, "", "supervise chaos: --log: open /nonexistent/x: no such file or directory\n"},
		{[]string{"--bogus"}, "", "flag provided but not defined: -bogus\nRun 'supervise chaos -h' for help.\n"},
		{[]string{"--", "true"}, "SUPERVISE_KILLS=many", "supervise: invalid value \"many\" for SUPERVISE_KILLS: parse error\n"},
	} {
		t.Run(strings.Join(c.args, " ")+" "+c.env, func(t *testing.T) {
			t.Setenv("XDG_STATE_HOME", t.TempDir())
			if c.env != "" {
				k, v, _ := strings.Cut(c.env, "=")
				t.Setenv(k, v)
			}
			var out, errb bytes.Buffer
			code := Run(context.Background(), c.args, &out, &errb)
			if code != 2 || errb.String() != c.stderr || out.Len() != 0 {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, out.String(), errb.String(), c.stderr)
			}
		})
	}
}

// An agent that cannot be started is not a usage error: exit 1, as the
// docs say ("supervise could not run"), and nothing started.
func TestAgentCannotRun(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"--", "/nonexistent/agent"}, &out, &errb)
	want := "supervise chaos: cannot run the agent: exec: \"/nonexistent/agent\": stat /nonexistent/agent: no such file or directory\n"
	if code != 1 || errb.String() != want || out.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q", code, out.String(), errb.String(), want)
	}
}

// -h prints the help once, on stdout.
func TestHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"-h"}, &out, &errb); code != 0 || errb.Len() != 0 ||
		!strings.HasPrefix(out.String(), "Usage: supervise chaos") || strings.Count(out.String(), "Usage:") != 1 ||
		!strings.Contains(out.String(), "-kills") || !strings.Contains(out.String(), "-stop-timeout") {
		t.Errorf("exit %d, stderr %q, stdout %q", code, errb.String(), out.String())
	}
}
