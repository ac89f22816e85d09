package machine

import (
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
)

// act is one event of a rule case.
type act func(r *rig) []Effect

func begin(s, turn string) act { return func(r *rig) []Effect { return r.begin(s, turn) } }
func ended(o marker.Outcome) act {
	return func(r *rig) []Effect { return r.end("s1", "t1", o) }
}
func msg(m marker.Message) act { return func(r *rig) []Effect { return r.marker(m) } }
func killed(sig int) act       { return func(r *rig) []Effect { return r.killed(sig) } }
func exited(code int) act      { return func(r *rig) []Effect { return r.die(2*time.Second, code, 0) } }
func exitedAfter(code int, life time.Duration) act {
	return func(r *rig) []Effect { return r.die(life, code, 0) }
}
func killedAfter(sig int, life time.Duration) act {
	return func(r *rig) []Effect { return r.die(life, 128+sig, sig) }
}
func stopAsked(r *rig) []Effect { return r.step(StopRequested{Signal: sigTERM, Name: "terminated"}) }
func watchdogTrigger(r *rig) []Effect {
	return r.marker(marker.Message{WatchdogTrigger: true})
}
func overMemory(r *rig) []Effect {
	return r.step(TimerFired{Timer: TimerFlush, RSS: 2 << 30, MaxRSS: 1 << 30})
}
func execFailed(r *rig) []Effect {
	return r.step(Exited{ExecFailed: true, ExecErr: "exec: not found", Code: 127, Started: r.now, Ended: r.now})
}

// play launches a run, applies the acts, and after each death launches the
// next run when the machine asked for one. It returns the effects of the
// last act.
func play(r *rig, acts []act) []Effect {
	r.launch()
	var fx []Effect
	for i, a := range acts {
		fx = a(r)
		if _, died := find[Backoff](fx); died && i < len(acts)-1 {
			r.advance(time.Second)
			r.launch()
		}
	}
	return fx
}

// The decision table of docs/design.md, row by row.
func TestRules(t *testing.T) {
	for _, c := range []struct {
		name       string
		acts       []act
		reason     record.Reason // the last run's journal reason
		dirty      bool
		relaunch   bool
		state      record.SessionState // of s1 ("" for none)
		crashCount int
		why        string // in s1's reason
	}{
		{name: "kill -9 mid-turn: resume once",
			acts:   []act{begin("s1", "t1"), killed(9)},
			reason: record.ReasonSignal, dirty: true, relaunch: true, state: record.ResumePending, crashCount: 1},
		{name: "second consecutive death mid-turn: park",
			acts: []act{begin("s1", "t1"), killed(9),
				msg(marker.Message{Session: "s1", Event: marker.EventResumed, Turn: "t1"}), killed(11)},
			reason: record.ReasonSignal, dirty: true, relaunch: true, state: record.Parked, crashCount: 2,
			why: "2 consecutive dirty deaths"},
		{name: "a completed turn resets the count",
			acts: []act{begin("s1", "t1"), killed(9),
				msg(marker.Message{Session: "s1", Event: marker.EventResumed, Turn: "t1"}), ended(marker.OutcomeCompleted),
				begin("s1", "t2"), killed(9)},
			reason: record.ReasonSignal, dirty: true, relaunch: true, state: record.ResumePending, crashCount: 1},
		{name: "a user's stop is never resumed",
			acts:   []act{begin("s1", "t1"), ended(marker.OutcomeCancelled), killed(9)},
			reason: record.ReasonSignal, dirty: true, relaunch: true, state: record.Idle},
		{name: "waiting for a human: park",
			acts:   []act{begin("s1", "t1"), msg(marker.Message{Session: "s1", Event: marker.EventWaiting, Turn: "t1"}), exited(1)},
			reason: record.ReasonExit, dirty: true, relaunch: true, state: record.Parked, crashCount: 1, why: "waiting"},
		{name: "exited while waiting on the model API (a limit): waited out, not counted",
			acts: []act{begin("s1", "t1"),
				msg(marker.Message{Session: "s1", Event: marker.EventWaiting, Wait: marker.WaitReconnect}), exited(1)},
			reason: record.ReasonLimit, dirty: false, relaunch: true, state: record.Waiting, crashCount: 0, why: "waiting out a limit"},
		{name: "killed while waiting on the model API: resumed like in_turn",
			acts: []act{begin("s1", "t1"),
				msg(marker.Message{Session: "s1", Event: marker.EventWaiting, Wait: marker.WaitReconnect}), killed(9)},
			reason: record.ReasonSignal, dirty: true, relaunch: true, state: record.ResumePending, crashCount: 1},
		{name: "waiting for approval: park",
			acts: []act{begin("s1", "t1"),
				msg(marker.Message{Session: "s1", Event: marker.EventWaiting, Wait: marker.WaitApproval}), exited(1)},
			reason: record.ReasonExit, dirty: true, relaunch: true, state: record.Parked, crashCount: 1, why: "waiting"},
		{name: "exit 0 with a turn open is dirty",
			acts:   []act{begin("s1", "t1"), exited(0)},
			reason: record.ReasonTurnOpen, dirty: true, relaunch: true, state: record.ResumePending, crashCount: 1},
		{name: "exit 0 between turns ends supervision (on-failure)",
			acts:   []act{begin("s1", "t1"), ended(marker.OutcomeCompleted), exited(0)},
			reason: record.ReasonExit, dirty: false, state: record.Idle},
		{name: "a stale turn is parked, not resumed",
			acts:   []act{begin("s1", "t1"), killedAfter(9, 2*time.Hour-time.Minute)},
			reason: record.ReasonSignal, dirty: true, relaunch: true, state: record.Parked, crashCount: 1, why: "stale"},
		{name: "idle and closed sessions: nothing",
			acts: []act{msg(marker.Message{Session: "s1", Event: marker.EventHeartbeat}),
				msg(marker.Message{Session: "s2", Event: marker.EventClosed}), killed(9)},
			reason: record.ReasonSignal, dirty: true, relaunch: true, state: record.Idle},
		{name: "a requested stop mid-turn: stopped, not counted, supervision ends",
			acts:   []act{begin("s1", "t1"), stopAsked, killed(15)},
			reason: record.ReasonStopped, dirty: false, state: record.Stopped},
		{name: "a watchdog kill mid-turn is dirty, reason watchdog",
			acts:   []act{begin("s1", "t1"), watchdogTrigger, killed(9)},
			reason: record.ReasonWatchdog, dirty: true, relaunch: true, state: record.ResumePending, crashCount: 1},
		{name: "the memory guard's kill mid-turn is dirty, reason memory",
			acts:   []act{begin("s1", "t1"), overMemory, killed(9)},
			reason: record.ReasonMemory, dirty: true, relaunch: true, state: record.ResumePending, crashCount: 1},
		{name: "the agent cannot be started: no decision, backoff",
			acts:   []act{killed(9), execFailed},
			reason: record.ReasonExecFailed, dirty: true, relaunch: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, testConfig())
			fx := play(r, c.acts)
			n := nextOf(t, fx)
			if n.relaunch != c.relaunch {
				t.Errorf("next %+v, want relaunch %v", n, c.relaunch)
			}
			last := *r.m.LastExit
			if last.Reason != c.reason || last.Dirty != c.dirty {
				t.Errorf("run %d: reason %q dirty %v, want %q %v", last.Run, last.Reason, last.Dirty, c.reason, c.dirty)
			}
			cm, ok := find[Commit](fx)
			if !ok || cm.Kind != CommitDeath || cm.Run.Reason != c.reason || cm.Run.Dirty != c.dirty {
				t.Errorf("death commit %+v (found %v), want the run with reason %q", cm, ok, c.reason)
			}
			sess := r.sess("s1")
			if c.state == "" {
				if sess != nil {
					t.Errorf("session s1 exists: %+v", sess)
				}
				return
			}
			if sess == nil || sess.State != c.state {
				t.Fatalf("session s1: %+v, want state %s", sess, c.state)
			}
			if c.state == record.ResumePending || c.state == record.Parked || c.state == record.Stopped {
				if sess.CrashCount != c.crashCount {
					t.Errorf("s1 crash count %d, want %d", sess.CrashCount, c.crashCount)
				}
				if !strings.Contains(sess.Reason, c.why) {
					t.Errorf("s1's reason %q lacks %q", sess.Reason, c.why)
				}
				// Decisions are journaled with the death, before what follows.
				if !savedBeforeCommit(fx, "s1") {
					t.Errorf("s1's decision is not saved before the death's commit: %#v", fx)
				}
			}
		})
	}
}

// Three dirty deaths chained within --guard-gap open the crash-loop guard:
// the process is still relaunched (with backoff), the resume owed is held;
// a completed turn clears it.
func TestRuleGuard(t *testing.T) {
	cfg := testConfig()
	cfg.Resume.Limit = 5 // keep resuming, so the guard is what holds it
	r := newRig(t, cfg)
	var acts []act
	for range 3 {
		acts = append(acts, begin("s1", "t1"), killedAfter(9, 300*time.Millisecond))
	}
	n := nextOf(t, play(r, acts))
	if !n.relaunch || n.delay <= 0 {
		t.Errorf("after 3 quick deaths: %+v, want a relaunch with backoff", n)
	}
	if !r.m.Guard.Open || r.m.Guard.Chain != 3 {
		t.Fatalf("guard %+v, want open at chain 3", r.m.Guard)
	}
	if r.m.Hold() == "" {
		t.Error("the guard is open but no resume is held")
	}
	if p := r.m.pending(); len(p) != 0 {
		t.Errorf("%d resumes dispatched while the guard holds them", len(p))
	}
	if r.sess("s1").State != record.ResumePending {
		t.Errorf("s1 = %s, want resume_pending (decided, shown, held)", r.sess("s1").State)
	}
	r.advance(time.Second)
	l := r.launch()
	if len(l.IDs) != 0 {
		t.Errorf("the launch under an open guard delivered %v", l.IDs)
	}
	r.begin("s2", "u")
	r.end("s2", "u", marker.OutcomeCompleted)
	if r.m.Guard.Open {
		t.Error("a completed turn did not clear the guard")
	}
	if p := r.m.pending(); len(p) != 1 {
		t.Errorf("%d resumes dispatched after the guard cleared, want 1", len(p))
	}
}

// classify's order: a supervise-made abort (watchdog, memory) beats a
// requested stop that came later; a requested stop is clean whatever the
// child's status.
func TestRuleClassify(t *testing.T) {
	m := New(testConfig())
	m.Abort = &Abort{Reason: record.ReasonWatchdog, At: t0}
	if r, dirty := classify(m, Exited{Code: 134, Signal: sigABRT}); r != record.ReasonWatchdog || !dirty {
		t.Errorf("watchdog abort: %s %v", r, dirty)
	}
	m.Abort = nil
	m.Stop = &Stop{At: t0}
	if r, dirty := classify(m, Exited{Code: 143, Signal: sigTERM}); r != record.ReasonStopped || dirty {
		t.Errorf("requested stop: %s %v", r, dirty)
	}
	// The abort began before the stop was asked for: the death is the
	// watchdog's, and dirty.
	m.Abort = &Abort{Reason: record.ReasonWatchdog, At: t0.Add(-time.Second)}
	if r, dirty := classify(m, Exited{Code: 137, Signal: sigKILL}); r != record.ReasonWatchdog || !dirty {
		t.Errorf("abort before stop: %s %v", r, dirty)
	}
}

// Task mode's end, without a process: after the deaths and markers of a
// task, what follows (a resume launch, or the end with which code), and
// what a person reads on stderr.
func TestRuleTaskEnd(t *testing.T) {
	resumed := msg(marker.Message{Session: "s1", Event: marker.EventResumed, Turn: "t1"})
	for _, c := range []struct {
		name   string
		acts   []act
		guard  int // --guard-trip; 0: the default
		code   int // -1: not done, a resume launch follows
		report []string
	}{
		{name: "the turn completed", code: 0,
			acts: []act{begin("s1", "t1"), ended(marker.OutcomeCompleted), exited(0)}},
		{name: "completed, then the process died: 0", code: 0,
			acts: []act{begin("s1", "t1"), ended(marker.OutcomeCompleted), killed(9)}},
		{name: "killed mid-turn once: a resume launch", code: -1,
			acts: []act{begin("s1", "t1"), killed(9)}},
		{name: "killed twice: parked, 5", code: ExitParked,
			acts:   []act{begin("s1", "t1"), killed(9), resumed, killed(9)},
			report: []string{"session s1 is parked: mid-turn at 2 consecutive dirty deaths", "to resume it: supervise resume --state-dir "}},
		{name: "resumed and completed: 0", code: 0,
			acts: []act{begin("s1", "t1"), killed(9), resumed, ended(marker.OutcomeCompleted), exited(0)}},
		{name: "turn-end failed on an API error: the agent's status", code: 1,
			acts: []act{begin("s1", "t1"), ended(marker.OutcomeFailed), exited(1)}},
		{name: "waiting at death: parked, 5", code: ExitParked,
			acts:   []act{begin("s1", "t1"), msg(marker.Message{Session: "s1", Event: marker.EventWaiting, Turn: "t1"}), exited(1)},
			report: []string{"session s1 is parked: was waiting for input"}},
		{name: "no marker at all: the agent's status and the warning", code: 3,
			acts:   []act{exited(3)},
			report: []string{"no turn markers arrived", "docs/adapters.md"}},
		{name: "the resume command cannot start: its status, the session still owed", code: 127,
			acts:   []act{begin("s1", "t1"), killed(9), execFailed},
			report: []string{"session s1 is still owed a resume: interrupted"}},
		{name: "the guard holds the resume: 5, not a wait", code: ExitParked, guard: 1,
			acts:   []act{begin("s1", "t1"), killed(9)},
			report: []string{"session s1 is owed a resume that is held (crash-loop guard open)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := taskConfig()
			if c.guard > 0 {
				cfg.Guard.Trip = c.guard
			}
			r := newRig(t, cfg)
			fx := play(r, c.acts)
			n := nextOf(t, fx)
			switch {
			case c.code < 0 && n.end:
				t.Fatalf("the task ended with %d, want a resume launch", n.code)
			case c.code >= 0 && (!n.end || n.code != c.code):
				t.Fatalf("task end: %+v, want the end with %d\n%s", n, c.code, reported(fx))
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

// Healthy means proven: a run that completed a turn is healthy however
// short, so the relaunch after it is immediate; a run as short that did
// not backs off.
func TestRuleProvenRun(t *testing.T) {
	r := newRig(t, testConfig())
	n := nextOf(t, play(r, []act{exitedAfter(1, 1400*time.Millisecond)}))
	if n.delay <= 0 {
		t.Errorf("a 1.4s run that completed nothing: relaunch after %v, want a backoff", n.delay)
	}
	r.advance(n.delay)
	r.launch()
	r.begin("s1", "t1")
	r.end("s1", "t1", marker.OutcomeCompleted)
	n = nextOf(t, r.die(1400*time.Millisecond, 1, 0))
	if !n.relaunch || n.delay != 0 {
		t.Errorf("a 1.4s run that completed a turn: %+v, want an immediate relaunch", n)
	}
}

// classify runs a death's first stage alone: the reason and dirtiness of
// a run that ended with e.
func classify(m *Machine, e Exited) (record.Reason, bool) {
	d := death{Machine: m, o: &out{}, e: e}
	d.classify()
	return d.r.Reason, d.r.Dirty
}
