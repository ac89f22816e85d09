package unit_test

import (
	"strings"
	"testing"
)

// --user USER[:GROUP] is a run flag: a system unit runs supervise as root,
// and the unit passes the flag on, so the agent runs as that user. The
// user-unit switch is --user-unit.
func TestUnitPassesUser(t *testing.T) {
	out := unitGen(t, "systemd", "--user", "nobody", "--", "sh")
	exec := setting(out, "ExecStart")
	if len(exec) != 1 || !strings.Contains(exec[0], "--user=nobody") {
		t.Fatalf("ExecStart %q lacks --user=nobody", exec)
	}
	if strings.Contains(exec[0], "--user-unit") {
		t.Errorf("ExecStart %q carries the user-unit switch", exec[0])
	}
	out = unitGen(t, "systemd", "--user-unit", "--", "sh")
	if exec := setting(out, "ExecStart"); len(exec) != 1 || strings.Contains(exec[0], "--user") {
		t.Errorf("a user unit's ExecStart %q: the user-unit switch is not a run flag", exec)
	}
	if code, _, errs := call(t, "unit", "systemd", "--user", "no-such-user-here", "--", "sh"); code != 2 || !strings.Contains(errs, "unknown user") {
		t.Errorf("an unknown --user: exit %d, %q; want 2 and the reason", code, errs)
	}
}

// `supervise unit systemd --help` opens with the help itself, not a line
// telling the reader to ask for it; a bad flag gets that hint.
func TestUnitHelpOpensWithUsage(t *testing.T) {
	code, out, errs := call(t, "unit", "systemd", "--help")
	if code != 0 || errs != "" || !strings.HasPrefix(out, "Usage: supervise unit") {
		t.Errorf("unit systemd --help: exit %d, stderr %q, stdout starts %q", code, errs, out[:min(len(out), 40)])
	}
	if code, _, errs := call(t, "unit", "systemd", "--nope", "--", "sh"); code != 2 || !strings.Contains(errs, "supervise unit --help") {
		t.Errorf("a bad flag: exit %d, stderr %q; want 2 and the hint", code, errs)
	}
}
