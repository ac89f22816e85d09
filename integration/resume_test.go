package integration

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// took lists the "took" events of run (0: any run), as "session attempt=N".
func (e *env) took(run int) []string {
	var out []string
	for _, ev := range e.events() {
		if ev.kind == "took" && ev.arg != "none" && (run == 0 || ev.run == run) {
			f := strings.Fields(ev.arg)
			out = append(out, f[0]+" "+f[1])
		}
	}
	return out
}

func (e *env) tookMessage(run int, session string) string {
	for _, ev := range e.events() {
		if ev.kind == "took" && ev.run == run && strings.HasPrefix(ev.arg, session+" ") {
			if i := strings.Index(ev.arg, "message="); i >= 0 {
				return ev.arg[i+len("message="):]
			}
		}
	}
	return ""
}

// killChild kill -9s the child of run and waits for the next run to start.
func (e *env) killChildOf(run int, waitFor string) {
	e.t.Helper()
	ev := e.waitEvent(run, waitFor)
	syscall.Kill(ev.pid, syscall.SIGKILL)
	e.waitEvent(run+1, "start")
}

func (e *env) stop(sv *proc) {
	e.t.Helper()
	sv.signal(syscall.SIGTERM)
	if code := sv.wait(30 * time.Second); code != 0 {
		e.t.Errorf("supervise exit code %d after SIGTERM", code)
	}
}

// kill -9 mid-turn once: the relaunched child receives exactly one resume
// for that session, with the message; after resumed and turn-end completed
// the crash count is 0.
func TestResumeOnceAfterKill9MidTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1 rename the parser; phase s1 tool bash; barrier; hang",
		"TESTAGENT_SCRIPT_2=take-resumes; log took-all; listen")
	sv := e.run()
	e.killChildOf(1, "barrier-ok")
	e.waitLog(2, "took-all")
	if got := e.took(0); len(got) != 1 || got[0] != "s1 attempt=1" {
		t.Fatalf("resumes taken: %v, want exactly [s1 attempt=1]", got)
	}
	msg := e.tookMessage(2, "s1")
	for _, want := range []string{"interrupted", "signal 9", `"bash"`, "check the current state", "rename the parser"} {
		if !strings.Contains(msg, want) {
			t.Errorf("continuation message lacks %q: %s", want, msg)
		}
	}
	st := e.status()
	if s, _ := st.session("s1"); s.State != "in_turn" || s.CrashCount != 1 {
		t.Errorf("after resumed: %+v, want in_turn with crash_count 1", s)
	}
	// The agent finishes the resumed turn: the count resets.
	e.tell("turn-end s1 t1 completed; barrier")
	if s, _ := e.status().session("s1"); s.State != "idle" || s.CrashCount != 0 {
		t.Errorf("after turn-end completed: %+v, want idle with crash_count 0", s)
	}
	e.stop(sv)
	e.noOverlap()
}

// kill -9 mid-turn twice in a row: the session is parked and gets no
// resume, while a second session interrupted only once is resumed.
func TestParkAfterTwoConsecutiveDeaths(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin A tA; barrier; hang",
		"TESTAGENT_SCRIPT_2=take-resumes; turn-begin B tB; barrier; log ready; hang",
		"TESTAGENT_SCRIPT_3=take-resumes; log took-all; hang")
	sv := e.run()
	e.killChildOf(1, "barrier-ok")
	ev := e.waitLog(2, "ready")
	syscall.Kill(ev.pid, syscall.SIGKILL)
	e.waitLog(3, "took-all")
	if got := e.took(3); len(got) != 1 || got[0] != "B attempt=1" {
		t.Errorf("run 3 took %v, want only B (A is parked)", got)
	}
	st := e.status()
	a, _ := st.session("A")
	if a.State != "parked" || a.CrashCount != 2 || !strings.Contains(a.Reason, "2 consecutive dirty deaths") {
		t.Errorf("A = %+v, want parked after 2 consecutive deaths", a)
	}
	for _, s := range st.Sessions {
		if s.ID == "A" && !strings.Contains(s.ResumeCommand, "supervise resume") {
			t.Errorf("parked A has no resume command: %+v", s)
		}
	}
	if text := e.statusText(); !strings.Contains(text, "A is parked; resume it with: supervise resume --state-dir") {
		t.Errorf("text status does not show how to resume A:\n%s", text)
	}
	e.stop(sv)
}

// kill -9 between turns: relaunch, no resume.
func TestNoResumeBetweenTurns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1; turn-end s1 t1 completed; barrier; hang",
		"TESTAGENT_SCRIPT=take-resumes; log took-all; hang")
	sv := e.run()
	e.killChildOf(1, "barrier-ok")
	e.waitLog(2, "took-all")
	if got := e.took(0); len(got) != 0 {
		t.Errorf("resumes %v after a death between turns", got)
	}
	if s, _ := e.statusAllSession("s1"); s != "idle" {
		t.Errorf("s1 is %q, want idle", s)
	}
	e.stop(sv)
}

// waiting at death: parked, no resume.
func TestWaitingAtDeathParks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1; waiting s1 t1; barrier; hang",
		"TESTAGENT_SCRIPT=take-resumes; log took-all; hang")
	sv := e.run()
	e.killChildOf(1, "barrier-ok")
	e.waitLog(2, "took-all")
	if got := e.took(0); len(got) != 0 {
		t.Errorf("a session waiting for input was resumed: %v", got)
	}
	if s, _ := e.status().session("s1"); s.State != "parked" || !strings.Contains(s.Reason, "waiting for input") {
		t.Errorf("s1 = %+v, want parked: was waiting for input", s)
	}
	e.stop(sv)
}

// SIGTERM to supervise mid-turn: a clean stop; the next start dispatches no
// resume and the session is stopped, one command from resuming.
func TestRequestedStopMidTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1; barrier; hang",
		"TESTAGENT_SCRIPT=take-resumes; log took-all; hang")
	sv := e.run()
	e.waitEvent(1, "barrier-ok")
	e.stop(sv)
	s, _ := e.status().session("s1")
	if s.State != "stopped" || s.CrashCount != 0 {
		t.Errorf("after SIGTERM: s1 = %+v, want stopped, uncounted", s)
	}
	sv = e.run()
	e.waitLog(2, "took-all")
	if got := e.took(0); len(got) != 0 {
		t.Errorf("a stopped session was resumed automatically: %v", got)
	}
	if s, _ := e.status().session("s1"); s.State != "stopped" {
		t.Errorf("s1 = %+v, want still stopped", s)
	}
	e.stop(sv)
}

// kill -9 of supervise mid-turn: the next start kills the orphan, counts the
// death and resumes once.
func TestSupervisorKill9MidTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1 do it; barrier; hang",
		"TESTAGENT_SCRIPT=take-resumes; log took-all; hang")
	sv := e.run()
	e.waitEvent(1, "barrier-ok")
	sv.signal(syscall.SIGKILL)
	sv.wait(10 * time.Second)
	sv = e.run()
	e.waitLog(2, "took-all")
	e.noOverlap()
	if got := e.took(0); len(got) != 1 || got[0] != "s1 attempt=1" {
		t.Errorf("took %v, want exactly one resume of s1", got)
	}
	if msg := e.tookMessage(2, "s1"); !strings.Contains(msg, "supervise itself died") || !strings.Contains(msg, "do it") {
		t.Errorf("message: %s", msg)
	}
	st := e.status()
	if s, _ := st.session("s1"); s.CrashCount != 1 {
		t.Errorf("s1 = %+v, want crash_count 1", s)
	}
	if r := st.run(t, 1); r.Reason != "supervisor-died" || !r.Dirty {
		t.Errorf("run 1 = %+v", r)
	}
	e.stop(sv)
}

// With SUPERVISE_RESUME=off nothing is dispatched; decisions are still made
// and shown.
func TestResumeOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("SUPERVISE_RESUME=off",
		"TESTAGENT_SCRIPT_1=turn-begin s1 t1; barrier; hang",
		"TESTAGENT_SCRIPT=take-resumes; log took-all; hang")
	sv := e.run()
	e.killChildOf(1, "barrier-ok")
	e.waitLog(2, "took-all")
	if got := e.took(0); len(got) != 0 {
		t.Errorf("SUPERVISE_RESUME=off dispatched %v", got)
	}
	raw := e.statusRaw()
	if !strings.Contains(raw, `"state": "resume_pending"`) || !strings.Contains(raw, `"held": "--resume off"`) {
		t.Errorf("the decision is not shown as held:\n%s", raw)
	}
	e.stop(sv)
}

// --resume-exec relaunches the agent as the template with the session id
// substituted (no shell), then ends when the resumed turn completes.
func TestResumeExec(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s-1 t1 fix it; barrier; hang",
		"TESTAGENT_SCRIPT_2=resumed s-1 t1; turn-end s-1 t1 completed; barrier; exit 0")
	sv := e.run("--resume-exec", agentBin+" --resume-session {session} --message {message}")
	e.killChildOf(1, "barrier-ok")
	if code := sv.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after the resumed run finished", code)
	}
	args := e.waitEvent(2, "args").arg
	if !strings.HasPrefix(args, "--resume-session | s-1 | --message | [supervise: automatic continuation]") || !strings.Contains(args, "fix it") {
		t.Errorf("resumed argv = %q", args)
	}
	if s, _ := e.statusAllSession("s-1"); s != "idle" {
		t.Errorf("s-1 is %q after the resumed turn completed", s)
	}
}

// supervise resume un-parks a session: delivered to the running agent at
// once with --resume-signal; offline, at the next start. Unknown sessions
// are a clear error.
func TestManualResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin A tA; waiting A tA; barrier; hang",
		"TESTAGENT_SCRIPT_2=take-on USR1; take-resumes; log took-all; listen",
		"TESTAGENT_SCRIPT=take-resumes; log took-all; hang")
	sv := e.run("--resume-signal", "SIGUSR1")
	e.killChildOf(1, "barrier-ok")
	e.waitLog(2, "took-all")
	if s, _ := e.status().session("A"); s.State != "parked" {
		t.Fatalf("A = %+v, want parked", s)
	}
	out, code := e.cli("resume", "--state-dir", e.stateDir, "A")
	if code != 0 || !strings.Contains(out, "delivered to the running agent") {
		t.Fatalf("supervise resume: %d %s", code, out)
	}
	waitFor(t, 10*time.Second, "the live resume to be taken", func() bool { return len(e.took(2)) == 1 })
	s, _ := e.status().session("A")
	if s.State != "in_turn" || s.CrashCount != 0 {
		t.Errorf("A after manual resume = %+v", s)
	}
	if out, code := e.cli("resume", "--state-dir", e.stateDir, "nosuch"); code == 0 || !strings.Contains(out, "unknown session") {
		t.Errorf("unknown session: %d %s", code, out)
	}
	if out, code := e.cli("resume", "--state-dir", e.stateDir, "A"); code == 0 || !strings.Contains(out, "no interrupted turn") {
		t.Errorf("resuming an in_turn session: %d %s", code, out)
	}

	// Offline: park it again (waiting at a death), stop supervise, resume
	// by hand, start again.
	e.tell("waiting A tA; barrier; log parked-next")
	e.killChildOf(2, "ran")
	e.waitLog(3, "took-all")
	if s, _ := e.status().session("A"); s.State != "parked" {
		t.Fatalf("A = %+v, want parked again", s)
	}
	e.stop(sv)
	out, code = e.cli("resume", "--state-dir", e.stateDir, "A")
	if code != 0 || !strings.Contains(out, "next start") {
		t.Fatalf("offline resume: %d %s", code, out)
	}
	sv = e.run()
	waitFor(t, 20*time.Second, "the resume at the next start", func() bool {
		for _, ev := range e.events() {
			if ev.kind == "took" && strings.HasPrefix(ev.arg, "A attempt=") && ev.run > 2 {
				return true
			}
		}
		return false
	})
	e.stop(sv)
}

// The crash-loop guard: chained dirty deaths hold automatic resumes while
// the agent keeps being relaunched; the hold survives kill -9 of supervise;
// a completed turn clears it and the held resume is delivered.
func TestCrashLoopGuardHoldsResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin A tA; barrier; hang",
		"TESTAGENT_SCRIPT_2=take-resumes; turn-begin B tB; barrier; log ready; hang",
		"TESTAGENT_SCRIPT=take-on USR1; take-resumes; log took-all; listen")
	sv := e.run("--guard-trip", "2", "--guard-gap", "1m", "--resume-signal", "SIGUSR1")
	e.killChildOf(1, "barrier-ok")
	ev := e.waitLog(2, "ready")
	syscall.Kill(ev.pid, syscall.SIGKILL)
	e.waitLog(3, "took-all")
	if got := e.took(3); len(got) != 0 {
		t.Errorf("run 3 took %v while the guard should hold resumes", got)
	}
	raw := e.statusRaw()
	if !strings.Contains(raw, `"open": true`) || !strings.Contains(raw, `"held": "crash-loop guard open"`) {
		t.Fatalf("guard not open or B not held:\n%s", raw)
	}
	// The hold survives kill -9 of supervise.
	sv.signal(syscall.SIGKILL)
	sv.wait(10 * time.Second)
	sv = e.run("--guard-trip", "2", "--guard-gap", "1m", "--resume-signal", "SIGUSR1")
	e.waitLog(4, "took-all")
	if got := e.took(4); len(got) != 0 {
		t.Errorf("after kill -9 of supervise the held resume was dispatched: %v", got)
	}
	// A completed turn proves the agent healthy: the guard clears and the
	// held resume of B is delivered to the running agent.
	e.tell("turn-begin C tC; turn-end C tC completed; barrier")
	waitFor(t, 20*time.Second, "B delivered after the guard cleared", func() bool { return len(e.took(4)) == 1 })
	if got := e.took(4); got[0] != "B attempt=1" {
		t.Errorf("took %v, want B", got)
	}
	if raw := e.statusRaw(); !strings.Contains(raw, `"open": false`) {
		t.Errorf("guard still open:\n%s", raw)
	}
	e.stop(sv)
}

// cli runs supervise with args and returns combined output and exit code.
func (e *env) cli(args ...string) (string, int) {
	e.t.Helper()
	out, err := exec.Command(superviseBin, args...).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return string(out), code
}

func (e *env) statusText() string {
	out, _ := e.cli("status", "--state-dir", e.stateDir)
	return out
}

// statusAllSession returns a session's state from status --all.
func (e *env) statusAllSession(id string) (string, bool) {
	raw := e.statusAll()
	i := strings.Index(raw, `"id": "`+id+`"`)
	if i < 0 {
		return "", false
	}
	rest := raw[i:]
	j := strings.Index(rest, `"state": "`)
	rest = rest[j+len(`"state": "`):]
	return rest[:strings.IndexByte(rest, '"')], true
}

// Exit 0 with a turn still open is a dirty death: the session is resumed.
func TestExitZeroMidTurnIsDirty(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1; barrier; exit 0",
		"TESTAGENT_SCRIPT=take-resumes; log took-all; hang")
	sv := e.run()
	e.waitLog(2, "took-all")
	if r := e.status().run(t, 1); !r.Dirty || r.Reason != "turn-open" || r.ExitCode != 0 {
		t.Errorf("run 1 = %+v, want dirty with reason turn-open", r)
	}
	if got := e.took(2); len(got) != 1 {
		t.Errorf("took %v, want the open turn resumed", got)
	}
	if msg := e.tookMessage(2, "s1"); !strings.Contains(msg, "status 0 in the middle of the turn") {
		t.Errorf("message: %s", msg)
	}
	e.stop(sv)
}

// A run that stays healthy longer than --guard-gap clears an open guard.
// The two deaths are chained by a supervise with the default gap (5m), so
// no pace of the machine can spread them too far apart, and its guard
// cannot clear before it is read. The guard is journaled: a second
// supervise with a gap shorter than its once-a-second check finds it
// open and clears it at the first check its run outlives the gap.
func TestGuardClearedByAHealthyRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin A tA; barrier; exit 1",
		"TESTAGENT_SCRIPT_2=turn-begin B tB; barrier; exit 1",
		"TESTAGENT_SCRIPT=hang")
	sv := e.run("--guard-trip", "2")
	e.waitEvent(3, "hang")
	if raw := e.statusRaw(); !strings.Contains(raw, `"open": true`) {
		t.Fatalf("guard not open after two chained deaths:\n%s", raw)
	}
	e.stop(sv)
	sv = e.run("--guard-trip", "2", "--guard-gap", "100ms")
	e.waitEvent(4, "hang")
	waitFor(t, 10*time.Second, "the guard to clear after 100ms of health", func() bool {
		return strings.Contains(e.statusRaw(), `"open": false`)
	})
	if !strings.Contains(sv.stderr(), "outlived --guard-gap") {
		t.Errorf("log does not say why the guard cleared:\n%s", sv.stderr())
	}
	e.stop(sv)
}

// The memory guard stops an agent whose tree exceeds --max-rss; the death's
// reason is memory, and the turn is resumed with a message that says so.
func TestMemoryGuard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1; barrier; alloc 120; hang",
		"TESTAGENT_SCRIPT=take-resumes; log took-all; hang")
	sv := e.run("--max-rss", "64M", "--stop-timeout", "300ms")
	e.waitLog(2, "took-all")
	if r := e.status().run(t, 1); r.Reason != "memory" || !r.Dirty {
		t.Errorf("run 1 = %+v, want a dirty death by the memory guard", r)
	}
	if msg := e.tookMessage(2, "s1"); !strings.Contains(msg, "memory guard") {
		t.Errorf("message: %s", msg)
	}
	e.stop(sv)
}

// A resume handed to a run that exits cleanly without taking it (its hooks
// never reported resumed) is parked, not handed to every later run.
func TestUntakenResumeParkedAfterCleanExit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1; barrier; hang",
		"TESTAGENT_SCRIPT_2=resume-file; exit 0",
		"TESTAGENT_SCRIPT=resume-file; hang")
	sv := e.run("--restart", "always")
	e.killChildOf(1, "barrier-ok")
	e.waitEvent(3, "resume-file")
	for _, ev := range e.events() {
		if ev.kind == "resume-file" && ev.run == 3 && ev.arg != "none" {
			t.Errorf("run 3 was handed the resume again: %s", ev.arg)
		}
	}
	s, _ := e.status().session("s1")
	if s.State != "parked" || !strings.Contains(s.Reason, "exited without taking it") || s.CrashCount != 1 {
		t.Errorf("s1 = %+v, want parked (not taken), crash_count 1", s)
	}
	e.stop(sv)
}
