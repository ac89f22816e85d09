package integration

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 22's rerun rule, end to end: with --guard-trip 1 the first kill
// mid-turn holds the session's resume and supervise exits 5; the same task
// command run again exits 5 too, saying the resume is held, and starts
// nothing (neither the task as a new session nor a resume launch).
func TestTaskRerunWhileResumeHeld(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1 fix the tests; barrier; hang")
	sv := e.task("--guard-trip", "1")
	syscall.Kill(e.waitEvent(1, "barrier-ok").pid, syscall.SIGKILL)
	if code := sv.wait(30 * time.Second); code != 5 {
		t.Fatalf("exit code %d, want 5\n%s", code, sv.stderr())
	}
	again := e.task("--guard-trip", "1")
	if code := again.wait(30 * time.Second); code != 5 {
		t.Fatalf("the rerun: exit code %d, want 5\n%s", code, again.stderr())
	}
	if !strings.Contains(again.stderr(), "session s1 of this task is owed a resume that is held (crash-loop guard open)") ||
		!strings.Contains(again.stderr(), "not starting the task again") {
		t.Errorf("the rerun's stderr:\n%s", again.stderr())
	}
	e.wantLaunches("s1", 1, 0)
}
