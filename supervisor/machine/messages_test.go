package machine

import (
	"github.com/supervise-dev/supervise/crashloop"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/record"
)

// logArg returns the value of key in the first log line whose message is
// msg, and whether there is such a line.
func logArg(fx []Effect, msg, key string) (any, bool) {
	for _, l := range all[Log](fx) {
		if l.Msg != msg {
			continue
		}
		for i := 0; i+1 < len(l.Args); i += 2 {
			if l.Args[i] == key {
				return l.Args[i+1], true
			}
		}
		return nil, true
	}
	return nil, false
}

const (
	willResume = "session interrupted mid-turn: it will be resumed"
	owedHeld   = "session interrupted mid-turn: it is owed a resume, held"
)

// A death whose resume is held says so: never "it will be resumed" for a
// session whose resume the guard (opened by that very death), --resume off
// or the journal check holds.
func TestRuleDecisionLogHeld(t *testing.T) {
	for _, c := range []struct {
		name      string
		trip      int // --guard-trip; 0: the default
		resumeOff bool
		held      string // "": "it will be resumed"
	}{
		{name: "resumed: will be resumed"},
		{name: "the death opens the guard", trip: 1, held: "crash-loop guard open"},
		{name: "--resume off", resumeOff: true, held: "--resume off"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.ResumeOff = c.resumeOff
			if c.trip > 0 {
				cfg.Guard.Trip = c.trip
			}
			r := newRig(t, cfg)
			r.launch()
			r.begin("s1", "t1")
			fx := r.killed(9)
			checkHeldLog(t, fx, c.held)
		})
	}
	// The run a dead supervise left behind, decided at boot: supervise's
	// own death never opens the guard (it is not the agent's), but a guard
	// the journal holds open, or the journal check under way, holds the
	// resume.
	for _, c := range []struct {
		name      string
		trip      int
		verifying bool
		guardOpen bool
		held      string
	}{
		{name: "boot: resumed", held: ""},
		{name: "boot: supervise's own death does not open the guard", trip: 1, held: ""},
		{name: "boot: a guard the journal holds open", guardOpen: true, held: "crash-loop guard open"},
		{name: "boot: the journal check runs", verifying: true, held: "checking the journal after an unclean stop"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			if c.trip > 0 {
				cfg.Guard.Trip = c.trip
			}
			m := New(cfg)
			sess := record.Session{ID: "s1", State: record.InTurn, Turn: "t1", TurnStarted: t0.Add(-time.Minute), Run: 4}
			orphan := record.Run{Run: 4, PID: 99, Started: t0.Add(-time.Minute), Ended: t0, Reason: record.ReasonSupervisorDied, Dirty: true}
			guard := crashloop.GuardState{Open: c.guardOpen, Chain: 3, Last: t0.Add(-time.Minute)}
			if !c.guardOpen {
				guard = crashloop.GuardState{}
			}
			fx := m.Step(Booted{NextRun: 5, Sessions: []record.Session{sess}, Orphan: &orphan, Verifying: c.verifying, Guard: guard}, t0)
			if m.Guard.Chain > guard.Chain {
				t.Errorf("supervise's own death chained in the guard: %+v, was %+v", m.Guard, guard)
			}
			checkHeldLog(t, fx, c.held)
		})
	}
}

func checkHeldLog(t *testing.T, fx []Effect, held string) {
	t.Helper()
	_, will := logArg(fx, willResume, "session")
	why, owed := logArg(fx, owedHeld, "held")
	switch {
	case held == "" && (!will || owed):
		t.Errorf("a resume not held: %q %v, %q %v", willResume, will, owedHeld, owed)
	case held != "" && (will || !owed || why != held):
		t.Errorf("a resume held by %q: %q %v, %q %v (held %v)", held, willResume, will, owedHeld, owed, why)
	}
}

// A requested stop stops the sessions that were running: mid-turn, or
// resuming (their resume handed to the stopped run). A session whose
// resume was never handed to that run was not running: it stays owed its
// resume, and nothing calls it stopped mid-turn.
func TestRuleStopOwedNotRunning(t *testing.T) {
	const stoppedLog = "session stopped mid-turn by the requested stop; not resumed automatically"
	for _, c := range []struct {
		name   string
		task   bool
		trip   int          // --guard-trip; 0: the default
		setup  func(r *rig) // leaves a run going, s1 resume_pending and not handed to it
		report []string
	}{
		{name: "held by the guard, another session's turn running", trip: 1, setup: func(r *rig) {
			r.launch()
			r.begin("s1", "t1")
			r.killed(9) // opens the guard: s1's resume is held
			r.advance(time.Second)
			r.launch()
			r.begin("s2", "u1")
		}},
		{name: "task mode: the resume launch of another session", task: true, setup: func(r *rig) {
			r.launch()
			r.begin("s0", "t0")
			r.begin("s1", "t1")
			r.killed(9) // both owed; the next launch resumes s0, the oldest by id
			r.advance(time.Second)
			if l := r.launch(); len(l.IDs) != 1 || l.IDs[0] != "s0" {
				r.t.Fatalf("resume launch of %v, want s0", l.IDs)
			}
		}, report: []string{"session s1 is still owed a resume (the stop came before its resume launch); to resume it: "}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			if c.task {
				cfg = taskConfig()
			}
			if c.trip > 0 {
				cfg.Guard.Trip = c.trip
			}
			r := newRig(t, cfg)
			c.setup(r)
			r.step(StopRequested{Signal: sigTERM, Name: "terminated"})
			fx := r.killed(sigTERM)
			if n := nextOf(t, fx); !n.end || n.code != 0 {
				t.Fatalf("after the stop: %+v, want the end with 0", n)
			}
			if s := r.sess("s1"); s.State != record.ResumePending || s.Resume == nil {
				t.Errorf("s1 = %s %+v, want still resume_pending with its resume", s.State, s.Resume)
			}
			for _, l := range all[Log](fx) {
				if l.Msg == stoppedLog && len(l.Args) > 1 && l.Args[1] == "s1" {
					t.Errorf("s1 logged as stopped mid-turn: %v", l.Args)
				}
			}
			out := reported(fx)
			if strings.Contains(out, "session s1 was stopped mid-turn") {
				t.Errorf("report calls s1 stopped mid-turn:\n%s", out)
			}
			for _, want := range c.report {
				if !strings.Contains(out, want) {
					t.Errorf("report lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// The death's log line says what follows as next decides it: a first
// launch that cannot start ends supervise (`supervise -- /nonexistent`
// said "relaunch in 231ms" and exited 127), a later one backs off, and a
// task's resume launch that cannot start ends the task.
func TestRuleExecFailedNext(t *testing.T) {
	for _, c := range []struct {
		name  string
		task  bool
		first bool  // the first launch fails (no Started)
		acts  []act // otherwise: played after a started first launch
		next  string
		end   bool
	}{
		{name: "the first launch cannot start: end", first: true, next: "end", end: true},
		{name: "the first launch in task mode cannot start: end", task: true, first: true, next: "end", end: true},
		{name: "a relaunch cannot start: backoff", acts: []act{exited(1), execFailed}, next: "relaunch in "},
		{name: "a task's resume launch cannot start: end of task", task: true,
			acts: []act{begin("s1", "t1"), killed(9), execFailed}, next: "end of task", end: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			if c.task {
				cfg = taskConfig()
			}
			r := newRig(t, cfg)
			var fx []Effect
			if c.first {
				if _, ok := find[Launch](r.step(LaunchDue{})); !ok {
					t.Fatal("no launch")
				}
				fx = execFailed(r)
			} else {
				fx = play(r, c.acts)
			}
			got, ok := logArg(fx, "child exited", "next")
			if s, _ := got.(string); !ok || !strings.HasPrefix(s, c.next) {
				t.Errorf("child exited next=%v, want %q", got, c.next)
			}
			if n := nextOf(t, fx); n.end != c.end || (c.end && n.code != 127) {
				t.Errorf("next %+v, want end %v with 127", n, c.end)
			}
		})
	}
}
