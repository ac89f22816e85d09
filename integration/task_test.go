package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Task mode (--resume-exec): the agent argv is a task that runs once; every
// later launch is a resume launch; supervise ends when nothing is pending
// with 0 (last turn completed), 5 (a session parked or held) or the agent's
// own status. These tests count launches by argv in the agent log.

// taskTemplate is the --resume-exec template of these tests, in the shape
// of `claude -p -r {session} {message}`.
func taskTemplate() string { return agentBin + " --resume-session {session} --message {message}" }

// task starts supervise in task mode on the task `testagent --task fix-it`.
func (e *env) task(flags ...string) *proc {
	args := append([]string{"run", "--resume-exec", taskTemplate()}, flags...)
	return e.start(append(args, "--", agentBin, "--task", "fix-it")...)
}

// launches counts the agent's starts by kind: the task argv and resume
// launches of session.
func (e *env) launches(session string) (task, resumes int) {
	for _, ev := range e.events() {
		if ev.kind != "args" {
			continue
		}
		switch {
		case ev.arg == "--task | fix-it":
			task++
		case strings.HasPrefix(ev.arg, "--resume-session | "+session+" | --message | "):
			resumes++
		default:
			e.t.Errorf("run %d launched with unexpected argv %q", ev.run, ev.arg)
		}
	}
	return task, resumes
}

func (e *env) wantLaunches(session string, task, resumes int) {
	e.t.Helper()
	if gt, gr := e.launches(session); gt != task || gr != resumes {
		e.t.Errorf("launches: task argv %d, resume launches %d; want %d, %d", gt, gr, task, resumes)
	}
	if n := e.count("start"); n != task+resumes {
		e.t.Errorf("%d agent starts, want %d", n, task+resumes)
	}
}

// kill -9 mid-turn once: one resume launch with the template filled in;
// it completes the turn and supervise exits 0.
func TestTaskKill9OnceResumesThenExits0(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1 fix the tests; phase s1 tool Bash; barrier; hang",
		"TESTAGENT_SCRIPT_2=resumed s1 t1; turn-end s1 t1 completed; barrier; exit 0")
	sv := e.task()
	e.killChildOf(1, "barrier-ok")
	if code := sv.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after the resumed turn completed, want 0\n%s", code, sv.stderr())
	}
	args := e.waitEvent(2, "args").arg
	if !strings.HasPrefix(args, "--resume-session | s1 | --message | [supervise: automatic continuation]") ||
		!strings.Contains(args, "fix the tests") {
		t.Errorf("resume launch argv = %q", args)
	}
	e.wantLaunches("s1", 1, 1)
	if st, _ := e.statusAllSession("s1"); st != "idle" {
		t.Errorf("s1 is %q after the task, want idle", st)
	}
	if strings.Contains(sv.stderr(), "no turn markers") {
		t.Errorf("no-markers warning although markers arrived:\n%s", sv.stderr())
	}
}

// kill -9 twice: the session is parked and supervise exits 5, naming it,
// why, and the exact command that resumes it; the task argv ran once.
// That command (supervise resume, then the same supervise again) resumes
// the session without starting the task again.
func TestTaskTwoKillsParkExit5(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1 fix the tests; barrier; hang",
		"TESTAGENT_SCRIPT_2=resumed s1 t1; barrier; hang",
		"TESTAGENT_SCRIPT_3=resumed s1 t1; turn-end s1 t1 completed; barrier; exit 0")
	sv := e.task()
	e.killChildOf(1, "barrier-ok")
	syscall.Kill(e.waitEvent(2, "barrier-ok").pid, syscall.SIGKILL)
	if code := sv.wait(30 * time.Second); code != 5 {
		t.Fatalf("exit code %d after two kills, want 5\n%s", code, sv.stderr())
	}
	e.wantLaunches("s1", 1, 1)
	stderr := sv.stderr()
	if !strings.Contains(stderr, "session s1 is parked: mid-turn at 2 consecutive dirty deaths") {
		t.Errorf("stderr does not say which session is parked and why:\n%s", stderr)
	}
	cmdline := ""
	for _, line := range strings.Split(stderr, "\n") {
		if c, ok := strings.CutPrefix(line, "supervise: to resume it: "); ok {
			cmdline = c
		}
	}
	want := superviseBin + " resume --state-dir " + e.stateDir + " s1 && " + superviseBin + " run --resume-exec "
	if !strings.HasPrefix(cmdline, want) {
		t.Fatalf("resume command = %q, want it to start with %q", cmdline, want)
	}
	// Status after the exit reads the journal.
	st := e.status()
	if s, _ := st.session("s1"); s.State != "parked" || s.CrashCount != 2 {
		t.Errorf("status after exit: s1 = %+v, want parked with crash_count 2", s)
	}
	if r := st.run(t, 2); !r.Dirty || r.Signal != 9 {
		t.Errorf("run 2 = %+v, want a dirty death by signal 9", r)
	}

	// The same task command again, as a shell loop or a cron job would run
	// it after exit 5: it must not open a new session beside the parked one.
	again := e.task()
	if code := again.wait(30 * time.Second); code != 5 {
		t.Fatalf("the same task rerun exited %d, want 5\n%s", code, again.stderr())
	}
	e.wantLaunches("s1", 1, 1)
	if !strings.Contains(again.stderr(), "session s1 of this task is parked") ||
		!strings.Contains(again.stderr(), "not starting the task again") {
		t.Errorf("the refused rerun does not say why:\n%s", again.stderr())
	}

	// The printed command, run as printed.
	c := exec.Command("sh", "-c", cmdline)
	c.Env = append(os.Environ(), e.vars...)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("the printed resume command failed: %v\n%s", err, out)
	}
	e.wantLaunches("s1", 1, 2)
	if got := e.waitEvent(3, "args").arg; !strings.Contains(got, "[supervise: resumed by hand]") {
		t.Errorf("run 3 argv = %q, want the manual continuation", got)
	}
	if s, _ := e.statusAllSession("s1"); s != "idle" {
		t.Errorf("s1 is %q after the manual resume completed, want idle", s)
	}
}

// An agent that exits 1 quickly mid-turn every time (claude -p on an API
// error without a StopFailure hook): at most one resume, then exit 5, no
// relaunch loop. With the failure reported (turn-end failed): no resume at
// all, and the agent's own status.
func TestTaskAPIErrorNoLoop(t *testing.T) {
	t.Run("turn left open", func(t *testing.T) {
		e := newEnv(t)
		e.set("TESTAGENT_SCRIPT=turn-begin s1 t1 fix the tests; barrier; sleep 50ms; exit 1")
		sv := e.task()
		if code := sv.wait(30 * time.Second); code != 5 {
			t.Fatalf("exit code %d, want 5\n%s", code, sv.stderr())
		}
		e.wantLaunches("s1", 1, 1)
		if !strings.Contains(sv.stderr(), "session s1 is parked") {
			t.Errorf("stderr:\n%s", sv.stderr())
		}
	})
	t.Run("turn-end failed", func(t *testing.T) {
		e := newEnv(t)
		e.set("TESTAGENT_SCRIPT=turn-begin s1 t1 fix the tests; turn-end s1 t1 failed; barrier; exit 1")
		sv := e.task()
		if code := sv.wait(30 * time.Second); code != 1 {
			t.Fatalf("exit code %d, want the agent's own 1\n%s", code, sv.stderr())
		}
		e.wantLaunches("s1", 1, 0)
	})
}

// A death before any marker arrived: the agent's own status and one
// warning pointing at docs/adapters.md; never a relaunch.
func TestTaskNoMarkers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		kill   bool
		want   int
	}{
		{"exit 3", "exit 3", false, 3},
		{"kill -9", "hang", true, 128 + 9},
		{"clean exit", "exit 0", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.set("TESTAGENT_SCRIPT=" + tc.script)
			sv := e.task()
			if tc.kill {
				syscall.Kill(e.waitEvent(1, "hang").pid, syscall.SIGKILL)
			}
			if code := sv.wait(30 * time.Second); code != tc.want {
				t.Fatalf("exit code %d, want %d\n%s", code, tc.want, sv.stderr())
			}
			e.wantLaunches("none", 1, 0)
			stderr := sv.stderr()
			if n := strings.Count(stderr, "no turn markers arrived"); n != 1 {
				t.Errorf("the no-markers warning appears %d times, want once:\n%s", n, stderr)
			}
			if !strings.Contains(stderr, "docs/adapters.md") {
				t.Errorf("the warning does not point at docs/adapters.md:\n%s", stderr)
			}
		})
	}
}

// A task that completes its turn: exit 0, one launch, nothing else.
func TestTaskCleanCompletion(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=turn-begin s1 t1 fix the tests; phase s1 model; turn-end s1 t1 completed; barrier; exit 0")
	for _, restart := range []string{"on-failure", "always"} {
		sv := e.task("--restart", restart)
		if code := sv.wait(30 * time.Second); code != 0 {
			t.Fatalf("--restart %s: exit code %d, want 0\n%s", restart, code, sv.stderr())
		}
		if strings.Contains(sv.stderr(), "warning") {
			t.Errorf("--restart %s: unexpected warning:\n%s", restart, sv.stderr())
		}
	}
	// Two invocations, one launch each: --restart always does not re-run
	// the task.
	e.wantLaunches("s1", 2, 0)
}

// SIGTERM during a task: the turn is stopped, not resumed; exit 0.
func TestTaskSIGTERM(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=turn-begin s1 t1 fix the tests; barrier; hang")
	sv := e.task()
	e.waitEvent(1, "barrier-ok")
	sv.signal(syscall.SIGTERM)
	if code := sv.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0\n%s", code, sv.stderr())
	}
	e.wantLaunches("s1", 1, 0)
	if s, _ := e.status().session("s1"); s.State != "stopped" {
		t.Errorf("s1 = %+v, want stopped", s)
	}
	if !strings.Contains(sv.stderr(), "supervise: session s1 was stopped mid-turn; to resume it: "+superviseBin+" resume --state-dir ") {
		t.Errorf("stderr does not say how to continue the stopped task:\n%s", sv.stderr())
	}
}

// A resume launch that exits 0 without taking the resume (the resume
// command does not resume, or its hooks are missing): parked, exit 5.
func TestTaskResumeNotTaken(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1 fix the tests; barrier; hang",
		"TESTAGENT_SCRIPT_2=exit 0")
	sv := e.task()
	e.killChildOf(1, "barrier-ok")
	if code := sv.wait(30 * time.Second); code != 5 {
		t.Fatalf("exit code %d, want 5\n%s", code, sv.stderr())
	}
	e.wantLaunches("s1", 1, 1)
	if !strings.Contains(sv.stderr(), "session s1 is parked: its resume was handed to run 2, which exited without taking it") {
		t.Errorf("stderr:\n%s", sv.stderr())
	}
}

// The crash-loop guard holding the resume in task mode: supervise does not
// wait or spin, it exits 5 and says the resume is held; the printed command
// resumes it (a manual resume passes the guard).
func TestTaskGuardHeldExit5(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1 fix the tests; barrier; hang",
		"TESTAGENT_SCRIPT_2=resumed s1 t1; turn-end s1 t1 completed; barrier; exit 0")
	sv := e.task("--guard-trip", "1")
	syscall.Kill(e.waitEvent(1, "barrier-ok").pid, syscall.SIGKILL)
	if code := sv.wait(30 * time.Second); code != 5 {
		t.Fatalf("exit code %d, want 5\n%s", code, sv.stderr())
	}
	e.wantLaunches("s1", 1, 0)
	stderr := sv.stderr()
	if !strings.Contains(stderr, "session s1 is owed a resume that is held (crash-loop guard open)") {
		t.Fatalf("stderr:\n%s", stderr)
	}
	_, cmdline, _ := strings.Cut(stderr, "supervise: to resume it: ")
	cmdline, _, _ = strings.Cut(cmdline, "\n")
	c := exec.Command("sh", "-c", cmdline)
	c.Env = append(os.Environ(), e.vars...)
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("the printed resume command failed: %v\n%s", err, out)
	}
	e.wantLaunches("s1", 1, 1)
}

// Healthy means proven: a daemon agent that fails its first API call and
// dies after about a second (longer than the old 1s --healthy-after) backs
// off, 250ms doubling; a run that completed a turn is healthy however
// short, and the backoff starts over after it. Asserted on the decisions
// supervise logged and on the journal's run records, not on timing windows.
func TestQuickDeathsBackOffUntilProven(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=sleep 1100ms; exit 1",
		"TESTAGENT_SCRIPT_4=turn-begin s1 t1; turn-end s1 t1 completed; barrier; exit 1")
	sv := e.run("--log-format", "json")
	e.waitEvent(6, "start")
	sv.signal(syscall.SIGTERM)
	if code := sv.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	// The decision logged with each death: "relaunch in D" or "relaunch now".
	next := map[int]string{}
	for _, line := range strings.Split(sv.stderr(), "\n") {
		var rec struct {
			Msg  string `json:"msg"`
			Run  int    `json:"run"`
			Next string `json:"next"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "child exited" {
			next[rec.Run] = rec.Next
		}
	}
	delay := func(run int) time.Duration {
		d, err := time.ParseDuration(strings.TrimPrefix(next[run], "relaunch in "))
		if err != nil || !strings.HasPrefix(next[run], "relaunch in ") {
			t.Fatalf("run %d: decision %q, want a backoff", run, next[run])
		}
		return d
	}
	d1, d2, d3 := delay(1), delay(2), delay(3)
	t.Logf("decided after deaths at ~1.1s uptime: %v, %v, %v; after the proven run: %s; then %s", d1, d2, d3, next[4], next[5])
	// 250ms, 500ms, 1s, each ±10% jitter: strictly growing, about doubling.
	if d1 < 225*time.Millisecond || d1 > 275*time.Millisecond || d2 < d1*3/2 || d3 < d2*3/2 {
		t.Errorf("backoff after quick deaths: %v, %v, %v; want 250ms doubling", d1, d2, d3)
	}
	if next[4] != "relaunch now" {
		t.Errorf("after a run that completed a turn: %q, want relaunch now", next[4])
	}
	if d5 := delay(5); d5 > 275*time.Millisecond {
		t.Errorf("after the proven run the backoff did not start over: %v", d5)
	}
	// The journal agrees: each relaunch came no sooner than decided.
	var st struct {
		Runs []struct {
			Run     int       `json:"run"`
			Started time.Time `json:"started"`
			Ended   time.Time `json:"ended"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(e.statusRaw()), &st); err != nil {
		t.Fatal(err)
	}
	byRun := map[int]int{}
	for i, r := range st.Runs {
		byRun[r.Run] = i
	}
	for run, d := range map[int]time.Duration{1: d1, 2: d2, 3: d3} {
		a, okA := byRun[run]
		b, okB := byRun[run+1]
		if !okA || !okB {
			t.Fatalf("runs %d and %d not both in status", run, run+1)
		}
		if gap := st.Runs[b].Started.Sub(st.Runs[a].Ended); gap < d {
			t.Errorf("run %d started %v after run %d ended, before its %v backoff", run+1, gap, run, d)
		}
	}
}

// What was running: a hook reports the tool and its command with
// `supervise notify phase --tool Bash --detail ...`; status shows it, the
// resume file carries it in "detail", and the continuation names it.
func TestToolDetailNamedInContinuation(t *testing.T) {
	e := newEnv(t)
	e.set("SUPERVISE_BIN="+superviseBin,
		`TESTAGENT_SCRIPT_1=turn-begin s1 t1 fix the tests; sh "$SUPERVISE_BIN" notify phase --session s1 --tool Bash --detail 'npm test
  --grep parser'; hang`,
		"TESTAGENT_SCRIPT_2=resume-file; resumed s1 t1; turn-end s1 t1 completed; barrier; exit 0")
	sv := e.task()
	e.waitEvent(1, "sh-ok")
	raw := e.statusRaw()
	if !strings.Contains(raw, `"detail": "npm test   --grep parser"`) || !strings.Contains(raw, `"tool": "Bash"`) {
		t.Fatalf("status does not show the tool's detail:\n%s", raw)
	}
	syscall.Kill(e.waitEvent(1, "hang").pid, syscall.SIGKILL)
	if code := sv.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d\n%s", code, sv.stderr())
	}
	if args := e.waitEvent(2, "args").arg; !strings.Contains(args, "while the tool \"Bash\" was running `npm test   --grep parser`.") {
		t.Errorf("the continuation does not name what was running: %q", args)
	}
	file := e.waitEvent(2, "resume-file").arg
	for _, want := range []string{`"tool": "Bash"`, `"detail": "npm test   --grep parser"`, `"phase": "tool"`, `"prompt": "fix the tests"`} {
		if !strings.Contains(file, want) {
			t.Errorf("resume file lacks %s: %s", want, file)
		}
	}
}

// --rerun-task starts the same task again beside its parked session, as
// asked: a new session, the task argv launched a second time.
func TestTaskRerunTaskFlag(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1 fix the tests; barrier; hang",
		"TESTAGENT_SCRIPT_2=resumed s1 t1; barrier; hang",
		"TESTAGENT_SCRIPT_3=turn-begin s2 t1 fix the tests; turn-end s2 t1 completed; barrier; exit 0")
	sv := e.task()
	e.killChildOf(1, "barrier-ok")
	syscall.Kill(e.waitEvent(2, "barrier-ok").pid, syscall.SIGKILL)
	if code := sv.wait(30 * time.Second); code != 5 {
		t.Fatalf("exit code %d after two kills, want 5\n%s", code, sv.stderr())
	}
	again := e.task("--rerun-task")
	if code := again.wait(30 * time.Second); code != 0 {
		t.Fatalf("the rerun with --rerun-task exited %d, want 0\n%s", code, again.stderr())
	}
	if task, _ := e.launches("s1"); task != 2 {
		t.Errorf("task argv launched %d times, want 2 (the rerun was asked for)", task)
	}
	if s, _ := e.status().session("s1"); s.State != "parked" {
		t.Errorf("s1 = %+v, want still parked", s)
	}
}

// The agent's words only delay: an agent whose session s1 is mid-turn and
// whose session victim waits for a person prints a quota line (Gemini
// CLI's words, a reset 2 s away) and exits 1. s1 waits out the limit and is
// resumed at the reset; victim is parked as at any dirty death, the words
// notwithstanding, and the task ends 5. Before, the words made the death a
// limit for every session: victim was left waiting and the task ended 0.
// Without the line the same agent parks victim too.
func TestTaskQuotaWordsDoNotSkipAPark(t *testing.T) {
	for _, words := range []bool{true, false} {
		e := newEnv(t)
		say := ""
		if words {
			say = "say TerminalQuotaError: You have exhausted your capacity on this model. Your quota will reset after 2s.; say Please retry in 2s.; "
		}
		e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1 fix the tests; wait-for victim input; barrier; "+say+"exit 1",
			"TESTAGENT_SCRIPT_2=resumed s1 t1; turn-end s1 t1 completed; barrier; exit 0")
		sv := e.task()
		if code := sv.wait(60 * time.Second); code != 5 {
			t.Fatalf("words %v: exit code %d, want 5 (victim parked)\n%s", words, code, sv.stderr())
		}
		if st, _ := e.statusAllSession("victim"); st != "parked" {
			t.Errorf("words %v: victim is %q, want parked", words, st)
		}
		if !words {
			continue
		}
		if st, _ := e.statusAllSession("s1"); st != "idle" {
			t.Errorf("s1 is %q after its resume at the reset, want idle", st)
		}
		if r := e.status().run(t, 1); r.Reason != "limit" || r.Dirty {
			t.Errorf("run 1 = %+v, want a limit, not dirty", r)
		}
	}
}
