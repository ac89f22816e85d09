package integration

import (
	"testing"
)

// One Ctrl-C to an agent that ignores SIGINT (issue 12, finding 5): it never
// saw the Ctrl-C, so when it is still running --stop-timeout (2s here)
// after it, supervise stops it as for any requested stop: the stop signal,
// then SIGKILL after the grace period if it ignores that too. The death is
// a requested stop: exit 0, a clean run, the open turn stopped (not
// resumed), nothing left of the tree.
func TestTerminalCtrlCIgnoredEscalates(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		signal int
	}{
		{"stop signal", "ignore-int; turn-begin s1 t1; barrier; hang", 15},
		{"then SIGKILL", "ignore-int; ignore-term; turn-begin s1 t1; barrier; hang", 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ts := newTmux(t, e, tc.script)
			e.waitEvent(1, "barrier-ok")
			ts.ctrlC()
			if code := ts.exitCode(); code != "0" {
				t.Errorf("supervise exit %s after one Ctrl-C to an agent ignoring SIGINT, want 0 (a requested stop)", code)
			}
			st := e.status()
			if r := st.run(t, 1); r.Dirty || r.Reason != "stopped" || r.Signal != tc.signal {
				t.Errorf("run 1 = %+v, want a clean stop by signal %d", r, tc.signal)
			}
			if s, _ := st.session("s1"); s.State != "stopped" {
				t.Errorf("s1 = %+v, want stopped", s)
			}
			if n := e.count("start"); n != 1 {
				t.Errorf("the agent was relaunched (%d starts)", n)
			}
		})
	}
}
