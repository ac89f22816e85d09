package supervisor

import (
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/notify"
	"github.com/supervise-dev/supervise/resume"
)

// The loop's rules without a process: each case feeds the loop's own
// methods a sequence of notify markers (apply, with the time passed in)
// and fabricated deaths (died, with a child.Exit that no process made),
// then checks the run record, the session and the decision, as the
// journal has them. the decision table of docs/design.md, row by row.

// newTestSupervisorWith is a Supervisor over cfg with a real journal in a
// temp dir (cfg.StateDir), but no reaper, no socket served and no child.
func newTestSupervisorWith(t *testing.T, cfg Config) *Supervisor {
	t.Helper()
	cfg.StateDir = t.TempDir()
	db, err := journal.Open(StatePath(cfg.StateDir), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := New(cfg, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.CloseNotify)
	s.cs = commitState{w: startWriter(db, 0), dirty: map[string]bool{}}
	t.Cleanup(s.stopWriter)
	return s
}

// newRuleSupervisor is a test Supervisor with the documented defaults
// (without jitter, so delays are exact).
func newRuleSupervisor(t *testing.T) *Supervisor {
	t.Helper()
	policy := crashloop.DefaultPolicy()
	policy.Jitter = 0
	return newTestSupervisorWith(t, Config{Name: "t", Argv: []string{"true"}, Policy: policy,
		Guard: crashloop.DefaultGuard(), Resume: resume.DefaultPolicy(), KeepRuns: 100})
}

// step is one event of a rule case: a marker, a stop asked of supervise,
// an abort supervise made (watchdog, memory guard), or a death.
type step struct {
	msg   *notify.Message
	stop  bool
	abort string      // the abort's journal reason
	exit  *child.Exit // the run dies so
	at    time.Duration
}

var stopAsked = step{stop: true}

func aborted(reason string) step { return step{abort: reason} }

func marker(session string, ev notify.Event, turn string) step {
	return step{msg: &notify.Message{PID: 100, Session: session, Event: ev, Turn: turn}}
}

func ended(outcome notify.Outcome) step {
	return step{msg: &notify.Message{PID: 100, Session: "s1", Event: notify.EventTurnEnd, Turn: "t1", Outcome: outcome}}
}

func killed(sig syscall.Signal) step {
	return step{exit: &child.Exit{Code: 128 + int(sig), Signal: sig}}
}

func exited(code int) step { return step{exit: &child.Exit{Code: code}} }

func (st step) after(d time.Duration) step { st.at = d; return st }

// play runs the steps; every run lives 2 s unless a step says otherwise
// (at: the time since the run started), and the first starts at t0.
func play(t *testing.T, s *Supervisor, t0 time.Time, steps []step) (last crashloop.Decision) {
	t.Helper()
	now := t0
	s.run = journal.Run{Run: 1, Started: now, Reason: journal.ReasonRunning}
	for _, st := range steps {
		switch {
		case st.msg != nil:
			s.apply(*st.msg, now)
			continue
		case st.stop:
			s.stop = &stopRequest{sig: syscall.SIGTERM, at: now}
			continue
		case st.abort != "":
			s.abort = &abortState{reason: st.abort, at: now}
			continue
		}
		life := 2 * time.Second
		if st.at > 0 {
			life = st.at
		}
		exit := *st.exit
		exit.PID, exit.Started, exit.Ended = 1000+int(s.run.Run), s.run.Started, s.run.Started.Add(life)
		last = s.died(exit)
		now = exit.Ended.Add(time.Second)
		s.run = journal.Run{Run: s.run.Run + 1, Started: now, Reason: journal.ReasonRunning}
	}
	return last
}

func TestRules(t *testing.T) {
	t.Parallel()
	now := time.Now() // resume.Decide in died reads the wall clock: stay near it
	for _, c := range []struct {
		name       string
		steps      []step
		t0         time.Time
		reason     string // the last run's journal reason
		dirty      bool
		action     crashloop.Action
		state      journal.SessionState // of s1 ("" for none)
		crashCount int
		why        string // in s1's reason
	}{
		{name: "kill -9 mid-turn: resume once",
			steps:  []step{marker("s1", notify.EventTurnBegin, "t1"), killed(syscall.SIGKILL)},
			reason: journal.ReasonSignal, dirty: true, action: crashloop.Relaunch,
			state: journal.ResumePending, crashCount: 1},
		{name: "second consecutive death mid-turn: park",
			steps: []step{marker("s1", notify.EventTurnBegin, "t1"), killed(syscall.SIGKILL),
				marker("s1", notify.EventResumed, "t1"), killed(syscall.SIGSEGV)},
			reason: journal.ReasonSignal, dirty: true, action: crashloop.Relaunch,
			state: journal.Parked, crashCount: 2, why: "2 consecutive dirty deaths"},
		{name: "a completed turn resets the count",
			steps: []step{marker("s1", notify.EventTurnBegin, "t1"), killed(syscall.SIGKILL),
				marker("s1", notify.EventResumed, "t1"), ended(notify.OutcomeCompleted),
				marker("s1", notify.EventTurnBegin, "t2"), killed(syscall.SIGKILL)},
			reason: journal.ReasonSignal, dirty: true, action: crashloop.Relaunch,
			state: journal.ResumePending, crashCount: 1},
		{name: "a user's stop is never resumed",
			steps:  []step{marker("s1", notify.EventTurnBegin, "t1"), ended(notify.OutcomeCancelled), killed(syscall.SIGKILL)},
			reason: journal.ReasonSignal, dirty: true, action: crashloop.Relaunch,
			state: journal.Idle},
		{name: "waiting for a human: park",
			steps:  []step{marker("s1", notify.EventTurnBegin, "t1"), marker("s1", notify.EventWaiting, "t1"), exited(1)},
			reason: journal.ReasonExit, dirty: true, action: crashloop.Relaunch,
			state: journal.Parked, crashCount: 1, why: "waiting"},
		{name: "waiting for reconnect (an outage): resumed like in_turn",
			steps: []step{marker("s1", notify.EventTurnBegin, "t1"),
				{msg: &notify.Message{PID: 100, Session: "s1", Event: notify.EventWaiting, Wait: notify.WaitReconnect}}, exited(1)},
			reason: journal.ReasonExit, dirty: true, action: crashloop.Relaunch,
			state: journal.ResumePending, crashCount: 1},
		{name: "waiting for approval: park",
			steps: []step{marker("s1", notify.EventTurnBegin, "t1"),
				{msg: &notify.Message{PID: 100, Session: "s1", Event: notify.EventWaiting, Wait: notify.WaitApproval}}, exited(1)},
			reason: journal.ReasonExit, dirty: true, action: crashloop.Relaunch,
			state: journal.Parked, crashCount: 1, why: "waiting"},
		{name: "exit 0 with a turn open is dirty",
			steps:  []step{marker("s1", notify.EventTurnBegin, "t1"), exited(0)},
			reason: journal.ReasonTurnOpen, dirty: true, action: crashloop.Relaunch,
			state: journal.ResumePending, crashCount: 1},
		{name: "exit 0 between turns ends supervision (on-failure)",
			steps:  []step{marker("s1", notify.EventTurnBegin, "t1"), ended(notify.OutcomeCompleted), exited(0)},
			reason: journal.ReasonExit, dirty: false, action: crashloop.Exit,
			state: journal.Idle},
		{name: "a stale turn is parked, not resumed",
			t0:     now.Add(-2 * time.Hour),
			steps:  []step{marker("s1", notify.EventTurnBegin, "t1"), killed(syscall.SIGKILL).after(2*time.Hour - time.Minute)},
			reason: journal.ReasonSignal, dirty: true, action: crashloop.Relaunch,
			state: journal.Parked, crashCount: 1, why: "stale"},
		{name: "idle and closed sessions: nothing",
			steps:  []step{marker("s1", notify.EventHeartbeat, ""), marker("s2", notify.EventClosed, ""), killed(syscall.SIGKILL)},
			reason: journal.ReasonSignal, dirty: true, action: crashloop.Relaunch,
			state: journal.Idle},
		{name: "a requested stop mid-turn: stopped, not counted, supervision ends",
			steps:  []step{marker("s1", notify.EventTurnBegin, "t1"), stopAsked, killed(syscall.SIGTERM)},
			reason: journal.ReasonStopped, dirty: false, action: crashloop.Exit,
			state: journal.Stopped},
		{name: "a watchdog kill mid-turn is dirty, reason watchdog",
			steps:  []step{marker("s1", notify.EventTurnBegin, "t1"), aborted(journal.ReasonWatchdog), killed(syscall.SIGKILL)},
			reason: journal.ReasonWatchdog, dirty: true, action: crashloop.Relaunch,
			state: journal.ResumePending, crashCount: 1},
		{name: "the memory guard's kill mid-turn is dirty, reason memory",
			steps:  []step{marker("s1", notify.EventTurnBegin, "t1"), aborted(journal.ReasonMemory), killed(syscall.SIGKILL)},
			reason: journal.ReasonMemory, dirty: true, action: crashloop.Relaunch,
			state: journal.ResumePending, crashCount: 1},
		{name: "the agent cannot be started: no decision, backoff",
			steps:  []step{{exit: &child.Exit{Code: 127, ExecErr: &child.StartError{Path: "x", Err: os.ErrNotExist}}}},
			reason: journal.ReasonExecFailed, dirty: true, action: crashloop.Relaunch},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newRuleSupervisor(t)
			t0 := c.t0
			if t0.IsZero() {
				t0 = now.Add(-time.Minute)
			}
			dec := play(t, s, t0, c.steps)
			if dec.Action != c.action {
				t.Errorf("decision %v, want %v", dec.Action, c.action)
			}
			r := *s.lastExit
			if r.Reason != c.reason || r.Dirty != c.dirty {
				t.Errorf("run %d: reason %q dirty %v, want %q %v", r.Run, r.Reason, r.Dirty, c.reason, c.dirty)
			}
			// What the journal holds, not only memory: the death was
			// committed before died returned.
			var got journal.Session
			var ok bool
			var jr journal.Run
			s.db.View(func(tx *journal.Tx) error {
				got, ok, _ = tx.Session("s1")
				jr, _, _ = tx.Run(r.Run)
				return nil
			})
			if jr.Reason != c.reason || jr.Dirty != c.dirty {
				t.Errorf("journaled run %d: reason %q dirty %v, want %q %v", r.Run, jr.Reason, jr.Dirty, c.reason, c.dirty)
			}
			if c.state == "" {
				if mem, inMem := s.sessions["s1"]; inMem || ok {
					t.Errorf("session s1 exists: %+v", mem)
				}
				return
			}
			if mem := s.sessions["s1"]; mem == nil || mem.State != c.state {
				t.Errorf("session s1 in memory: %+v, want state %s", mem, c.state)
			}
			if c.state == journal.ResumePending || c.state == journal.Parked || c.state == journal.Stopped {
				// Decisions are journaled with the death.
				if !ok || got.State != c.state || got.CrashCount != c.crashCount {
					t.Errorf("journaled s1 = %+v (found %v), want %s with crash count %d", got, ok, c.state, c.crashCount)
				}
				if !strings.Contains(got.Reason, c.why) {
					t.Errorf("s1's reason %q lacks %q", got.Reason, c.why)
				}
			}
		})
	}
}

// Three dirty deaths chained within --guard-gap open the crash-loop guard:
// the process is still relaunched (with backoff), the resume owed is held;
// a completed turn clears it.
func TestRuleGuard(t *testing.T) {
	t.Parallel()
	s := newRuleSupervisor(t)
	var steps []step
	for range 3 {
		steps = append(steps, marker("s1", notify.EventTurnBegin, "t1"), killed(syscall.SIGKILL).after(300*time.Millisecond))
	}
	s.cfg.Resume.Limit = 5 // keep resuming, so the guard is what holds it
	dec := play(t, s, time.Now().Add(-time.Minute), steps)
	if dec.Action != crashloop.Relaunch || dec.Delay <= 0 {
		t.Errorf("after 3 quick deaths: %v after %v, want a relaunch with backoff", dec.Action, dec.Delay)
	}
	if !s.guard.Open || s.guard.Chain != 3 {
		t.Fatalf("guard %+v, want open at chain 3", s.guard)
	}
	if held := s.held(); held == "" {
		t.Error("the guard is open but no resume is held")
	}
	if p := s.pending(); len(p) != 0 {
		t.Errorf("%d resumes dispatched while the guard holds them", len(p))
	}
	if s.sessions["s1"].State != journal.ResumePending {
		t.Errorf("s1 = %s, want resume_pending (decided, shown, held)", s.sessions["s1"].State)
	}
	s.apply(notify.Message{PID: 100, Session: "s2", Event: notify.EventTurnBegin, Turn: "u"}, time.Now())
	s.apply(notify.Message{PID: 100, Session: "s2", Event: notify.EventTurnEnd, Turn: "u", Outcome: notify.OutcomeCompleted}, time.Now())
	if s.guard.Open {
		t.Error("a completed turn did not clear the guard")
	}
	if p := s.pending(); len(p) != 1 {
		t.Errorf("%d resumes dispatched after the guard cleared, want 1", len(p))
	}
}

// classify's order: a supervise-made abort (watchdog, memory) beats a
// requested stop that came later; a requested stop is clean whatever the
// child's status.
func TestRuleClassify(t *testing.T) {
	t.Parallel()
	s := newRuleSupervisor(t)
	now := time.Now()
	s.abort = &abortState{reason: journal.ReasonWatchdog, at: now}
	if r, dirty := s.classify(child.Exit{Code: 134, Signal: syscall.SIGABRT}); r != journal.ReasonWatchdog || !dirty {
		t.Errorf("watchdog abort: %s %v", r, dirty)
	}
	s.abort = nil
	s.stop = &stopRequest{at: now}
	if r, dirty := s.classify(child.Exit{Code: 143, Signal: syscall.SIGTERM}); r != journal.ReasonStopped || dirty {
		t.Errorf("requested stop: %s %v", r, dirty)
	}
	// The abort began before the stop was asked for: the death is the
	// watchdog's, and dirty.
	s.abort = &abortState{reason: journal.ReasonWatchdog, at: now.Add(-time.Second)}
	if r, dirty := s.classify(child.Exit{Code: 137, Signal: syscall.SIGKILL}); r != journal.ReasonWatchdog || !dirty {
		t.Errorf("abort before stop: %s %v", r, dirty)
	}
}

// Task mode's end, without a process: after the deaths and markers of a
// task, what follows (a resume launch, or the end with which code), and
// what a person reads on stderr.
func TestRuleTaskEnd(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		steps  []step
		guard  int // --guard-trip; 0: the default
		code   int // -1: not done, a resume launch follows
		report []string
	}{
		{name: "the turn completed", code: 0,
			steps: []step{marker("s1", notify.EventTurnBegin, "t1"), ended(notify.OutcomeCompleted), exited(0)}},
		{name: "completed, then the process died: 0", code: 0,
			steps: []step{marker("s1", notify.EventTurnBegin, "t1"), ended(notify.OutcomeCompleted), killed(syscall.SIGKILL)}},
		{name: "killed mid-turn once: a resume launch", code: -1,
			steps: []step{marker("s1", notify.EventTurnBegin, "t1"), killed(syscall.SIGKILL)}},
		{name: "killed twice: parked, 5", code: ExitParked,
			steps: []step{marker("s1", notify.EventTurnBegin, "t1"), killed(syscall.SIGKILL),
				marker("s1", notify.EventResumed, "t1"), killed(syscall.SIGKILL)},
			report: []string{"session s1 is parked: mid-turn at 2 consecutive dirty deaths", "to resume it: supervise resume --state-dir "}},
		{name: "resumed and completed: 0", code: 0,
			steps: []step{marker("s1", notify.EventTurnBegin, "t1"), killed(syscall.SIGKILL),
				marker("s1", notify.EventResumed, "t1"), ended(notify.OutcomeCompleted), exited(0)}},
		{name: "turn-end failed on an API error: the agent's status", code: 1,
			steps: []step{marker("s1", notify.EventTurnBegin, "t1"), ended(notify.OutcomeFailed), exited(1)}},
		{name: "waiting at death: parked, 5", code: ExitParked,
			steps:  []step{marker("s1", notify.EventTurnBegin, "t1"), marker("s1", notify.EventWaiting, "t1"), exited(1)},
			report: []string{"session s1 is parked: was waiting for input"}},
		{name: "no marker at all: the agent's status and the warning", code: 3,
			steps:  []step{exited(3)},
			report: []string{"no turn markers arrived", "docs/adapters.md"}},
		{name: "the resume command cannot start: its status, the session still owed", code: 127,
			steps: []step{marker("s1", notify.EventTurnBegin, "t1"), killed(syscall.SIGKILL),
				{exit: &child.Exit{Code: 127, ExecErr: &child.StartError{Path: "agent", Err: os.ErrNotExist}}}},
			report: []string{"session s1 is still owed a resume: interrupted"}},
		{name: "the guard holds the resume: 5, not a wait", code: ExitParked, guard: 1,
			steps:  []step{marker("s1", notify.EventTurnBegin, "t1"), killed(syscall.SIGKILL)},
			report: []string{"session s1 is owed a resume that is held (crash-loop guard open)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newRuleSupervisor(t)
			var out strings.Builder
			s.cfg.ResumeExec = []string{"agent", "-r", "{session}", "{message}"}
			s.cfg.Report = &out
			if c.guard > 0 {
				s.cfg.Guard.Trip = c.guard
			}
			play(t, s, time.Now().Add(-time.Minute), c.steps)
			last := c.steps[len(c.steps)-1].exit
			code, done := s.taskNext(*last)
			switch {
			case c.code < 0 && done:
				t.Fatalf("the task ended with %d, want a resume launch", code)
			case c.code >= 0 && (!done || code != c.code):
				t.Fatalf("task end: done %v code %d, want done with %d\n%s", done, code, c.code, out.String())
			}
			for _, want := range c.report {
				if !strings.Contains(out.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, out.String())
				}
			}
			if len(c.report) == 0 && out.Len() > 0 {
				t.Errorf("unexpected report:\n%s", out.String())
			}
		})
	}
}

// Healthy means proven: a run that completed a turn is healthy however
// short, so the relaunch after it is immediate; a run as short that did
// not backs off.
func TestRuleProvenRun(t *testing.T) {
	t.Parallel()
	s := newRuleSupervisor(t)
	dec := play(t, s, time.Now().Add(-time.Minute), []step{exited(1).after(1400 * time.Millisecond)})
	if dec.Delay <= 0 {
		t.Errorf("a 1.4s run that completed nothing: relaunch after %v, want a backoff", dec.Delay)
	}
	s.turnDone = false
	dec = play(t, s, time.Now().Add(-time.Minute), []step{marker("s1", notify.EventTurnBegin, "t1"),
		ended(notify.OutcomeCompleted), exited(1).after(1400 * time.Millisecond)})
	if dec.Action != crashloop.Relaunch || dec.Delay != 0 {
		t.Errorf("a 1.4s run that completed a turn: %v after %v, want an immediate relaunch", dec.Action, dec.Delay)
	}
}

// In task mode a resume file that cannot be written does not turn the
// resume launch into a second run of the task: the continuation is in the
// argv.
func TestRuleTaskResumeFileFails(t *testing.T) {
	t.Parallel()
	s := newRuleSupervisor(t)
	s.cfg.ResumeExec = []string{"agent", "-r", "{session}", "{message}"}
	s.cfg.Report = io.Discard
	play(t, s, time.Now().Add(-time.Minute), []step{marker("s1", notify.EventTurnBegin, "t1"), killed(syscall.SIGKILL)})
	// A directory where the file goes: the rename onto it fails.
	if err := os.Mkdir(ResumePath(s.cfg.StateDir), 0o700); err != nil {
		t.Fatal(err)
	}
	argv, env := s.prepareDelivery(s.run.Run)
	if len(argv) != 4 || argv[0] != "agent" || argv[2] != "s1" || !strings.Contains(argv[3], "interrupted") {
		t.Errorf("argv %q, want the resume launch of s1", argv)
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "SUPERVISE_RESUME_FILE=") {
			t.Errorf("%s given although the file was not written", kv)
		}
	}
	if r := s.sessions["s1"].Resume; r == nil || r.Delivered != 1 {
		t.Errorf("the delivery was not recorded: %+v", r)
	}
}
