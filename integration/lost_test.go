package integration

import (
	"strings"
	"testing"
	"time"
)

// Issue 22 item 2, end to end with a stand-in for Claude Code's early
// kill: the task is killed mid-turn before anything ran; its resume launch
// exits 1 at once saying what `claude -p -r` says for a conversation it
// never wrote down. supervise starts the task again once, as a new
// session; it completes and supervise exits 0, blaming nothing on hooks.
func TestTaskLostConversationRerunsOnce(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1 fix the tests; barrier; hang",
		"TESTAGENT_SCRIPT_2=say No conversation found with session ID: s1; exit 1",
		"TESTAGENT_SCRIPT_3=turn-begin s2 t1 fix the tests; turn-end s2 t1 completed; barrier; exit 0")
	sv := e.task()
	e.killChildOf(1, "barrier-ok")
	if code := sv.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0\n%s", code, sv.stderr())
	}
	e.wantLaunches("s1", 2, 1)
	errs := sv.stderr()
	for _, want := range []string{"starting the task again once, as a new session",
		`agent_said="No conversation found with session ID: s1"`, "task ended: its last turn completed"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if strings.Contains(errs, "hooks are not wired") {
		t.Errorf("stderr blames the hooks:\n%s", errs)
	}
	if st, _ := e.statusAllSession("s1"); st != "closed" {
		t.Errorf("the lost session is %q, want closed", st)
	}
	if raw := e.statusAll(); !strings.Contains(raw, `"last_outcome": "completed"`) {
		t.Errorf("status does not say the rerun's turn completed:\n%s", raw)
	}
}

// The same, but a tool had run in the interrupted turn: parked, exit 5,
// with the CLI's words and both ways on; nothing started again.
func TestTaskLostConversationAfterToolParks(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1 fix the tests; phase s1 tool Bash; barrier; hang",
		"TESTAGENT_SCRIPT_2=say No conversation found with session ID: s1; exit 1")
	sv := e.task()
	e.killChildOf(1, "barrier-ok")
	if code := sv.wait(30 * time.Second); code != 5 {
		t.Fatalf("exit code %d, want 5\n%s", code, sv.stderr())
	}
	e.wantLaunches("s1", 1, 1)
	errs := sv.stderr()
	for _, want := range []string{"session s1 is parked: its conversation is lost",
		`"No conversation found with session ID: s1" (exit status 1)`, "--rerun-task", "supervise resume"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if strings.Contains(errs, "hooks are not wired") || strings.Contains(errs, "may be what kills") {
		t.Errorf("stderr misleads:\n%s", errs)
	}
}
