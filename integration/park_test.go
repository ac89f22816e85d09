package integration

import (
	"strings"
	"syscall"
	"testing"
)

// A park holds until a person lifts it: the agent's own turn-begin in a
// session the breaker parked is refused (its barrier does not answer 1),
// the session stays parked with its reason, and the refusal is logged
// with the command that lifts the park. Then `supervise resume` from
// outside the tree lifts it, and the agent's next turn is taken.
func TestParkHoldsAgainstTheAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin A tA; barrier; hang",
		"TESTAGENT_SCRIPT_2=take-resumes; barrier; log took; hang",
		"TESTAGENT_SCRIPT_3=turn-begin A tB; barrier; log tried; listen")
	sv := e.run()
	e.killChildOf(1, "barrier-ok")
	ev := e.waitLog(2, "took")
	syscall.Kill(ev.pid, syscall.SIGKILL)
	e.waitLog(3, "tried")
	for _, ev := range e.events() {
		if ev.run == 3 && ev.kind == "barrier-ok" {
			t.Errorf("the agent's turn-begin in its parked session was acknowledged: %+v", ev)
		}
	}
	if e.count("barrier-err") == 0 {
		t.Error("the refused turn-begin's barrier did not fail")
	}
	st := e.status()
	a, _ := st.session("A")
	if a.State != "parked" || !strings.Contains(a.Reason, "2 consecutive dirty deaths") || a.Turn != "tA" {
		t.Fatalf("A = %+v, want still parked in turn tA with the breaker's reason", a)
	}
	if err := sv.stderr(); !strings.Contains(err, "only a person lifts a park") ||
		!strings.Contains(err, "supervise resume --state-dir") {
		t.Errorf("the refusal is not logged with the resume command:\n%s", err)
	}
	if n := strings.Count(sv.stderr(), "only a person lifts a park"); n != 1 {
		t.Errorf("the refusal was logged %d times, want once", n)
	}
	// A second try is refused as well, and said no more.
	e.tell("turn-begin A tC; barrier")
	if s, _ := e.status().session("A"); s.State != "parked" {
		t.Fatalf("A = %+v after a second turn-begin, want parked", s)
	}
	if n := strings.Count(sv.stderr(), "only a person lifts a park"); n != 1 {
		t.Errorf("the refusal was logged %d times, want once", n)
	}
	e.stop(sv)
}
