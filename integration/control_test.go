package integration

import (
	"strings"
	"testing"
	"time"
)

// supervise restart and supervise stop, a person's, through the control
// socket. restart: the running agent gets its stop signal and is
// relaunched at once, a new pid; the turn it was in is resumed by the new
// run, no crash counted, the guard's chain at 0. The agent asking for a
// restart of itself, from inside its tree, is refused. stop: that
// supervise ends 0 within its --stop-timeout.
func TestControlRestartAndStop(t *testing.T) {
	t.Parallel()
	requireLinuxBackend(t, "the control socket's peer credentials (SO_PEERCRED)")
	e := newEnv(t)
	e.set("SV="+superviseBin,
		"TESTAGENT_SCRIPT_1=turn-begin s1 t1; barrier; hang",
		`TESTAGENT_SCRIPT_2=resumed s1 t1; turn-end s1 t1 completed; barrier; sh "$SV" restart --state-dir "$SUPERVISE_STATE_DIR"; log tried; hang`)
	sv := e.run("--stop-timeout", "5s")
	first := e.waitEvent(1, "barrier-ok")
	out, code := e.cli("restart", "--state-dir", e.stateDir)
	if code != 0 || !strings.Contains(out, "restarted: run 2") {
		t.Fatalf("supervise restart: %d %s", code, out)
	}
	second := e.waitEvent(2, "barrier-ok")
	if second.pid == first.pid {
		t.Errorf("the restart kept pid %d", first.pid)
	}
	e.waitLog(2, "tried")
	if e.count("sh-ok") != 0 {
		t.Error("supervise restart from inside the agent's tree succeeded")
	}
	if !strings.Contains(sv.stderr(), "refused a restart asked from inside the agent's tree") {
		t.Errorf("the agent's own restart is not refused in the log:\n%s", sv.stderr())
	}
	st := e.status()
	if r := st.run(t, 1); r.Reason != "stopped" || r.Dirty {
		t.Errorf("run 1 = %+v, want stopped, not dirty", r)
	}
	for _, s := range st.Sessions {
		if s.ID == "s1" && (s.State != "idle" || s.CrashCount != 0) {
			t.Errorf("s1 %s crash count %d after its resume by the restarted run, want idle at 0", s.State, s.CrashCount)
		}
	}
	if st.Guard.Chain != 0 || st.Guard.Open {
		t.Errorf("the restart moved the guard: %+v", st.Guard)
	}
	if n := e.count("start"); n != 2 {
		t.Errorf("%d runs, want 2 (the agent's own restart was refused)", n)
	}
	begin := time.Now()
	out, code = e.cli("stop", "--state-dir", e.stateDir)
	if code != 0 || !strings.Contains(out, "stopped") {
		t.Fatalf("supervise stop: %d %s", code, out)
	}
	if c := sv.wait(10 * time.Second); c != 0 {
		t.Errorf("supervise exited %d after supervise stop, want 0", c)
	}
	if d := time.Since(begin); d > 15*time.Second {
		t.Errorf("supervise stop took %s, past --stop-timeout 5s and the margin", d)
	}
	if _, code := e.cli("stop", "--state-dir", e.stateDir); code == 0 {
		t.Error("supervise stop with no supervise running succeeded")
	}
}
