package machine

import (
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
)

// Stops as event tables: signals to supervise, Ctrl-C in a terminal, the
// grace period, a stop between runs.
func TestRuleStops(t *testing.T) {
	term := StopRequested{Signal: sigTERM, Name: "terminated"}
	intr := StopRequested{Signal: sigINT, Name: "interrupt"}
	for _, c := range []struct {
		name       string
		foreground bool
		run        func(r *rig) []Effect // after a launch and a turn-begin of s1
		code       int
		reason     record.Reason
		state      record.SessionState
	}{
		{name: "SIGTERM: stop signal, grace, a clean stop, exit 0", code: 0, reason: record.ReasonStopped, state: record.Stopped,
			run: func(r *rig) []Effect {
				fx := r.step(term)
				if s, ok := find[Signal](fx); !ok || s.Sig != sigTERM || s.Kill {
					r.t.Errorf("SIGTERM sent %+v, want the stop signal", s)
				}
				if a, ok := armed(fx, TimerGrace); !ok || !a.At.Equal(r.now.Add(10*time.Second)) {
					r.t.Errorf("grace armed %+v, want at now+10s", a)
				}
				return r.killed(sigTERM)
			}},
		{name: "the same signal twice at once is one request", code: 0, reason: record.ReasonStopped, state: record.Stopped,
			run: func(r *rig) []Effect {
				r.step(term)
				r.advance(50 * time.Millisecond)
				if s, ok := find[Signal](r.step(term)); ok {
					r.t.Errorf("a duplicate signal sent %+v", s)
				}
				return r.killed(sigTERM)
			}},
		{name: "a second signal later forces: SIGKILL, 128+N", code: 128 + sigTERM, reason: record.ReasonStopped, state: record.Stopped,
			run: func(r *rig) []Effect {
				r.step(term)
				r.advance(time.Second)
				if s, _ := find[Signal](r.step(term)); !s.Kill {
					r.t.Errorf("the second signal sent %+v, want a kill", s)
				}
				return r.killed(sigKILL)
			}},
		{name: "the grace period runs out: SIGKILL to the tree", code: 0, reason: record.ReasonStopped, state: record.Stopped,
			run: func(r *rig) []Effect {
				r.step(term)
				r.advance(10 * time.Second)
				if s, _ := find[Signal](r.step(TimerFired{Timer: TimerGrace})); !s.Kill {
					r.t.Errorf("grace expiry sent %+v, want a kill", s)
				}
				return r.killed(sigKILL)
			}},
		{name: "Ctrl-C reaches the agent, which exits: a stop", foreground: true, code: 0, reason: record.ReasonStopped, state: record.Stopped,
			run: func(r *rig) []Effect {
				if s, ok := find[Signal](r.step(intr)); ok {
					r.t.Errorf("Ctrl-C forwarded %+v: the terminal delivered it", s)
				}
				r.advance(time.Second)
				return r.killed(sigINT)
			}},
		{name: "Ctrl-C twice within 2s force-quits: 130", foreground: true, code: 130, reason: record.ReasonStopped, state: record.Stopped,
			run: func(r *rig) []Effect {
				r.step(intr)
				r.advance(time.Second)
				if s, _ := find[Signal](r.step(intr)); !s.Kill {
					r.t.Errorf("second Ctrl-C sent %+v, want a kill", s)
				}
				return r.killed(sigKILL)
			}},
		{name: "Ctrl-C handled, the agent carries on; a later crash is a crash", foreground: true, code: -1,
			reason: record.ReasonSignal, state: record.ResumePending,
			run: func(r *rig) []Effect {
				r.step(intr)
				r.advance(10 * time.Second)
				fx := r.step(TimerFired{Timer: TimerGrace})
				if _, ok := find[Signal](fx); ok || !logged(fx, "handled Ctrl-C") {
					r.t.Errorf("grace after a handled Ctrl-C: %#v", fx)
				}
				r.advance(time.Minute)
				return r.killed(sigKILL)
			}},
		{name: "Ctrl-C ignored: stopped as any stop after --stop-timeout", foreground: true, code: 0,
			reason: record.ReasonStopped, state: record.Stopped,
			run: func(r *rig) []Effect {
				r.step(intr)
				r.advance(10 * time.Second)
				if s, _ := find[Signal](r.step(TimerFired{Timer: TimerGrace, IgnoresSIGINT: true})); s.Sig != sigTERM {
					r.t.Errorf("an agent that ignores SIGINT got %+v, want the stop signal", s)
				}
				return r.killed(sigTERM)
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Foreground = c.foreground
			r := newRig(t, cfg)
			r.launch()
			r.begin("s1", "t1")
			r.advance(time.Second)
			fx := c.run(r)
			n := nextOf(t, fx)
			if c.code >= 0 && (!n.end || n.code != c.code) {
				t.Errorf("next %+v, want the end with %d", n, c.code)
			}
			if c.code < 0 && !n.relaunch {
				t.Errorf("next %+v, want a relaunch", n)
			}
			if got := r.m.LastExit.Reason; got != c.reason {
				t.Errorf("reason %q, want %q", got, c.reason)
			}
			if got := r.sess("s1").State; got != c.state {
				t.Errorf("s1 %s, want %s", got, c.state)
			}
		})
	}
}

// A stop during the backoff ends at once, with 0; in task mode it says how
// to continue the session still owed its resume.
func TestRuleStopDuringBackoff(t *testing.T) {
	r := newRig(t, taskConfig())
	r.launch()
	r.begin("s1", "t1")
	r.die(100*time.Millisecond, 1, 0) // quick: a backoff
	fx := r.step(StopRequested{Signal: sigTERM, Name: "terminated"})
	if n := nextOf(t, fx); !n.end || n.code != 0 {
		t.Fatalf("stop during backoff: %+v, want the end with 0", n)
	}
	if out := reported(fx); !strings.Contains(out, "session s1 is still owed a resume") {
		t.Errorf("report %q lacks the session owed a resume", out)
	}
}

// Timers: the watchdog, turn and phase deadlines, extensions.
func TestRuleTimers(t *testing.T) {
	t.Run("watchdog: silent past the period: SIGABRT, reason watchdog, resumed", func(t *testing.T) {
		cfg := testConfig()
		cfg.Watchdog = time.Second
		r := newRig(t, cfg)
		r.launch()
		if a, ok := armed(r.fx, TimerWatchdog); !ok || !a.At.Equal(t0.Add(time.Second)) {
			t.Fatalf("watchdog armed %+v, want at launch+1s", a)
		}
		r.begin("s1", "t1")
		r.advance(500 * time.Millisecond)
		fx := r.step(TimerFired{Timer: TimerWatchdog, SincePing: 500 * time.Millisecond})
		if a, _ := armed(fx, TimerWatchdog); !a.At.Equal(r.now.Add(500 * time.Millisecond)) {
			t.Errorf("pinged in time: re-armed %+v, want when the period runs out", a)
		}
		r.advance(time.Second)
		fx = r.step(TimerFired{Timer: TimerWatchdog, SincePing: 1500 * time.Millisecond, Queued: true})
		if _, ok := find[Signal](fx); ok {
			t.Error("killed while datagrams were queued: a ping may be among them")
		}
		r.advance(20 * time.Millisecond)
		fx = r.step(TimerFired{Timer: TimerWatchdog, SincePing: 1520 * time.Millisecond})
		if s, _ := find[Signal](fx); s.Sig != sigABRT {
			t.Fatalf("silent agent: %+v, want SIGABRT", s)
		}
		n := nextOf(t, r.killed(sigABRT))
		if r.m.LastExit.Reason != record.ReasonWatchdog || !n.relaunch || r.sess("s1").State != record.ResumePending {
			t.Errorf("after the watchdog kill: %+v %+v %s", r.m.LastExit, n, r.sess("s1").State)
		}
	})
	t.Run("turn deadline: stop signal, reason turn-timeout; paused while a person is awaited", func(t *testing.T) {
		cfg := testConfig()
		cfg.Deadlines = Deadlines{Turn: time.Minute}
		r := newRig(t, cfg)
		r.launch()
		fx := r.begin("s1", "t1")
		if a, ok := armed(fx, TimerDeadline); !ok || !a.At.Equal(r.now.Add(time.Minute)) {
			t.Fatalf("deadline armed %+v, want turn-begin+1m", a)
		}
		r.marker(marker.Message{Session: "s1", Event: marker.EventWaiting, Wait: marker.WaitApproval})
		r.advance(2 * time.Minute)
		if _, ok := find[Signal](r.step(TimerFired{Timer: TimerDeadline})); ok {
			t.Fatal("a turn waiting for approval was stopped")
		}
		r.marker(marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseTool, Tool: "Bash"})
		r.advance(time.Minute)
		fx = r.step(TimerFired{Timer: TimerDeadline})
		if s, _ := find[Signal](fx); s.Sig != sigTERM {
			t.Fatalf("past the deadline: %+v, want the stop signal", s)
		}
		r.killed(sigTERM)
		if r.m.LastExit.Reason != record.ReasonTurnTimeout || !r.m.LastExit.Dirty {
			t.Errorf("run %+v, want a dirty turn-timeout", r.m.LastExit)
		}
	})
	t.Run("EXTEND_TIMEOUT_USEC moves a turn deadline, capped at twice the flag", func(t *testing.T) {
		cfg := testConfig()
		cfg.Deadlines = Deadlines{Turn: time.Minute}
		r := newRig(t, cfg)
		r.launch()
		r.begin("s1", "t1")
		r.advance(50 * time.Second)
		r.marker(marker.Message{Session: "s1", ExtendTimeoutUSec: uint64(time.Hour / time.Microsecond)})
		dl, _ := SessionDeadline(r.sess("s1"), cfg.Deadlines)
		if !dl.At.Equal(t0.Add(2*time.Minute)) || !dl.Extended {
			t.Errorf("deadline %+v, want capped at turn-begin+2m", dl)
		}
	})
}

// Task mode before the first launch. A resume that may be dispatched now
// is delivered instead of the task. Otherwise the same task command whose
// earlier session is parked, stopped, or owed a resume that is held (the
// guard, --resume off) is not started again: exit 5, which session and why,
// and the command that resumes it; --rerun-task starts it anyway.
func TestRuleTaskRerun(t *testing.T) {
	parked := record.Session{ID: "s1", State: record.Parked, Task: "task1", Reason: "mid-turn at 2 consecutive dirty deaths"}
	stopped := record.Session{ID: "s1", State: record.Stopped, Task: "task1", Reason: "stopped by a requested stop of supervise while mid-turn"}
	owed := record.Session{ID: "s1", State: record.ResumePending, Task: "task1", CrashCount: 1, Reason: "interrupted: killed",
		Resume: &record.Resume{Attempt: 1, Interrupted: 1, Reason: "killed", Since: t0, Message: "continue"}}
	manual := owed
	manual.Resume = &record.Resume{Attempt: 1, Reason: "manual resume", Since: t0, Message: "continue", Manual: true}
	other := owed
	other.Task = "another task"
	open := crashloop.GuardState{Open: true, Chain: 1}
	for _, c := range []struct {
		name      string
		sess      record.Session
		guard     crashloop.GuardState
		resumeOff bool
		rerun     bool
		want      string // "task", "resume" (s1 delivered) or "end" (exit 5)
		report    []string
	}{
		{name: "parked: not started, 5", sess: parked, want: "end",
			report: []string{"session s1 of this task is parked: mid-turn at 2", "to resume it: supervise resume --state-dir /state s1", "add --rerun-task"}},
		{name: "parked, --rerun-task: started", sess: parked, rerun: true, want: "task"},
		{name: "stopped mid-turn: not started, 5", sess: stopped, want: "end",
			report: []string{"session s1 of this task was stopped mid-turn", "to resume it: supervise resume --state-dir /state s1"}},
		{name: "owed a resume, not held: delivered instead of the task", sess: owed, want: "resume"},
		{name: "owed a resume held by the guard: not started, 5", sess: owed, guard: open, want: "end",
			report: []string{"session s1 of this task is owed a resume that is held (crash-loop guard open): interrupted: killed",
				"to resume it: supervise resume --state-dir /state s1"}},
		{name: "owed a resume held by --resume off: not started, 5", sess: owed, resumeOff: true, want: "end",
			report: []string{"session s1 of this task is owed a resume that is held (--resume off)"}},
		{name: "owed a held resume, --rerun-task: started", sess: owed, guard: open, rerun: true, want: "task"},
		{name: "a manual resume is dispatched under the guard: delivered", sess: manual, guard: open, want: "resume"},
		{name: "a held resume of another task: this one starts", sess: other, guard: open, want: "task"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := taskConfig()
			cfg.Task.Rerun, cfg.ResumeOff = c.rerun, c.resumeOff
			m := New(cfg)
			m.Step(Booted{NextRun: 3, Sessions: []record.Session{c.sess}, Guard: c.guard}, t0)
			fx := m.Step(LaunchDue{}, t0)
			l, launched := find[Launch](fx)
			e, ended := find[End](fx)
			switch c.want {
			case "end":
				if launched || !ended || e.Code != ExitParked {
					t.Fatalf("launch %v end %+v, want the end with 5 and no launch: %#v", launched, e, fx)
				}
			case "task":
				if !launched || l.Argv[0] != "agent" || len(l.Argv) != 1 || len(l.IDs) != 0 {
					t.Fatalf("%#v, want the task launched", fx)
				}
			case "resume":
				if !launched || len(l.IDs) != 1 || l.IDs[0] != "s1" || l.Argv[1] != "-r" {
					t.Fatalf("%#v, want the resume launch of s1", fx)
				}
			}
			out := reported(fx)
			for _, want := range c.report {
				if !strings.Contains(out, want) {
					t.Errorf("stderr lacks %q:\n%s", want, out)
				}
			}
			if len(c.report) == 0 && out != "" {
				t.Errorf("unexpected report:\n%s", out)
			}
		})
	}
}

// The case: with --guard-trip 1 the first kill mid-turn holds the
// resume and the task ends with 5; the same command run again (a new
// supervise on the same journal) ends with 5 too, without starting the task.
func TestRuleTaskRerunAfterHeldResume(t *testing.T) {
	cfg := taskConfig()
	cfg.Guard.Trip = 1
	r := newRig(t, cfg)
	r.launch()
	r.begin("s1", "t1")
	if n := nextOf(t, r.killed(9)); !n.end || n.code != ExitParked {
		t.Fatalf("first invocation: %+v, want the end with 5", n)
	}
	var sessions []record.Session
	for _, sess := range r.m.Sessions {
		sessions = append(sessions, *sess)
	}
	again := New(cfg)
	again.Step(Booted{NextRun: 2, Sessions: sessions, Guard: r.m.Guard, LastExit: r.m.LastExit}, r.now)
	fx := again.Step(LaunchDue{}, r.now.Add(time.Second))
	if l, ok := find[Launch](fx); ok {
		t.Fatalf("the rerun launched %v", l.Argv)
	}
	if e, _ := find[End](fx); e.Code != ExitParked {
		t.Errorf("the rerun ended %+v, want 5", e)
	}
	if out := reported(fx); !strings.Contains(out, "session s1 of this task is owed a resume that is held (crash-loop guard open)") {
		t.Errorf("the rerun's report:\n%s", out)
	}
}

// A park by the breaker lifts once when the agent's fingerprint changed;
// the lift is committed before the launch.
func TestRuleFingerprintLift(t *testing.T) {
	cfg := testConfig()
	cfg.Fingerprint = true
	old := &record.Fingerprint{Sum: "aaaa"}
	parked := record.Session{ID: "s1", State: record.Parked, ParkedBy: record.ParkedByBreaker, Fingerprint: old,
		CrashCount: 2, Turn: "t1"}
	m := New(cfg)
	m.Step(Booted{NextRun: 1, Sessions: []record.Session{parked}}, t0)
	if !m.NeedFingerprint() {
		t.Fatal("a breaker park with a fingerprint needs the agent's")
	}
	m.Step(LaunchDue{Fingerprint: old}, t0)
	if m.Sessions["s1"].State != record.Parked {
		t.Fatalf("the same agent lifted the park: %+v", m.Sessions["s1"])
	}
	m2 := New(cfg)
	m2.Step(Booted{NextRun: 1, Sessions: []record.Session{parked}}, t0)
	fx := m2.Step(LaunchDue{Fingerprint: &record.Fingerprint{Sum: "bbbb"}}, t0)
	s := m2.Sessions["s1"]
	if s.State != record.ResumePending || s.CrashCount != 0 || s.Fingerprint != nil {
		t.Fatalf("a changed agent: %+v, want resume_pending once", s)
	}
	if !savedBeforeCommit(fx, "s1") {
		t.Errorf("the lift is not committed before the launch: %#v", fx)
	}
	if l, _ := find[Launch](fx); len(l.IDs) != 1 || l.IDs[0] != "s1" {
		t.Errorf("launch %+v, want s1 delivered", l)
	}
}

// The first marker of a run is applied like any other; a marker for a
// new session past the ceiling is refused and its sender's barrier says so.
func TestRuleMarkerRefused(t *testing.T) {
	r := newRig(t, testConfig())
	r.launch()
	for i := range MaxSessions {
		id := "open" + string(rune('a'+i%26)) + strings.Repeat("x", i/26%4) + itoa(i)
		r.m.Sessions[id] = &record.Session{ID: id, State: record.InTurn}
	}
	fx := r.begin("new", "t1")
	if ref, ok := find[Refuse](fx); !ok || ref.PID != 100 {
		t.Errorf("marker past the ceiling: %#v, want refused", fx)
	}
	if r.sess("new") != nil {
		t.Error("a refused session was created")
	}
}

func itoa(i int) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		i /= 10
		if i == 0 {
			return string(b)
		}
	}
}

// --max-open-sessions: a turn that would open one session more is refused
// (the sender's barrier says so), nothing is created; once one closes, a
// new one opens; one run is handed at most that many resumes.
func TestRuleOpenSessionCap(t *testing.T) {
	cfg := testConfig()
	cfg.MaxOpenSessions = 3
	r := newRig(t, cfg)
	r.launch()
	for _, id := range []string{"a", "b", "c"} {
		if _, refused := find[Refuse](r.begin(id, "t1")); refused {
			t.Fatalf("session %s refused under the cap", id)
		}
	}
	fx := r.begin("d", "t1")
	if ref, ok := find[Refuse](fx); !ok || ref.PID != 100 || r.sess("d") != nil {
		t.Fatalf("the fourth open session: %#v, want refused and not created", fx)
	}
	if _, again := find[Refuse](r.begin("a", "t2")); again {
		t.Error("a new turn of an open session was refused: it opens nothing")
	}
	r.end("a", "t2", marker.OutcomeCompleted)
	if _, refused := find[Refuse](r.begin("d", "t1")); refused || r.sess("d") == nil {
		t.Error("with a session closed, a new one was still refused")
	}
	if r.m.Refused != 1 || r.m.OpenSessions() != 3 {
		t.Errorf("refused %d open %d, want 1 and 3", r.m.Refused, r.m.OpenSessions())
	}
	r.killed(sigKILL)
	r.advance(time.Second)
	if l := r.launch(); len(l.IDs) != 3 {
		t.Errorf("the relaunch was handed %d resumes, want the 3 open sessions", len(l.IDs))
	}
	// Booted with more owed than the cap (the flag lowered): one run is
	// handed at most the cap.
	cfg.MaxOpenSessions = 2
	m := New(cfg)
	var owed []record.Session
	for _, id := range []string{"x1", "x2", "x3", "x4"} {
		owed = append(owed, record.Session{ID: id, State: record.ResumePending, Resume: &record.Resume{Attempt: 1, Since: t0}})
	}
	m.Step(Booted{NextRun: 1, Sessions: owed}, t0)
	if l, _ := find[Launch](m.Step(LaunchDue{}, t0)); len(l.IDs) != 2 {
		t.Errorf("a run was handed %d resumes, want at most --max-open-sessions (2)", len(l.IDs))
	}
}

// OpenSessions is how many sessions are open.
func (b *Book) OpenSessions() int { return len(b.open) }
