package supervisor

import (
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/marker"

	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// The runner's side of the rules, without a process: the rules themselves
// are event tables over machine.Step (supervisor/machine); these tests
// check what the runner does with the effects (the journal, the resume
// file, the barriers), driving it with the machine's events on a fake
// clock.

// fakeClock is a Clock a test moves by hand; its timers never fire.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) NewTimer(time.Duration) Timer { return &fakeTimer{c: make(chan time.Time)} }

type fakeTimer struct{ c chan time.Time }

func (t *fakeTimer) C() <-chan time.Time        { return t.c }
func (t *fakeTimer) Stop() bool                 { return true }
func (t *fakeTimer) Reset(d time.Duration) bool { return true }

// newTestSupervisorWith is a Supervisor over cfg with a real journal in a
// temp dir (cfg.StateDir) and a fake clock, but no reaper, no socket served
// and no child.
func newTestSupervisorWith(t *testing.T, cfg Config) *Supervisor {
	t.Helper()
	cfg.StateDir = t.TempDir()
	if cfg.Clock == nil {
		cfg.Clock = &fakeClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	}
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
	// The event sink writes events.jsonl on a goroutine of its own: done
	// before the state dir is removed (else its cleanup may meet a file
	// written after the test).
	t.Cleanup(func() { s.met.events.close(2 * time.Second) })
	t.Cleanup(func() { s.cs.answers.Close() })
	s.cs = commitState{w: startWriter(db, 0), dirty: map[string]bool{}}
	t.Cleanup(s.stopWriter)
	s.step(machine.Booted{NextRun: 1})
	return s
}

func newTestSupervisor(t *testing.T) *Supervisor {
	t.Helper()
	return newTestSupervisorWith(t, Config{Name: "t", Argv: []string{"true"}})
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

// prepare runs LaunchDue and returns its Launch, performing every other
// effect (no child is forked).
func (s *Supervisor) prepare(t *testing.T) machine.Launch {
	t.Helper()
	var launch *machine.Launch
	var rest []machine.Effect
	for _, e := range s.m.Step(machine.LaunchDue{Fingerprint: s.fingerprintIfNeeded()}, s.clock.Now()) {
		if l, ok := e.(machine.Launch); ok {
			launch = &l
			continue
		}
		rest = append(rest, e)
	}
	s.perform(rest)
	if launch == nil {
		t.Fatal("LaunchDue gave no Launch")
	}
	return *launch
}

// started records a run as started without a process: the machine is told,
// and the run's commit written as the runner would (its child record aside).
func (s *Supervisor) started(t *testing.T, l machine.Launch) {
	t.Helper()
	now := s.clock.Now()
	for _, e := range s.m.Step(machine.Started{Run: l.Run, PID: 1000 + int(l.Run), At: now, Argv: l.Argv}, now) {
		if c, ok := e.(machine.Commit); ok {
			s.commitSync(func(tx *journal.Tx) error { return tx.PutRun(c.Run) })
		}
	}
	s.root.Store(&treeRoot{pid: 1 << 30, run: l.Run})
}

type step struct {
	msg  *marker.Message
	exit *machine.Exited
}

func mark(session string, ev marker.Event, turn string) step {
	return step{msg: &marker.Message{PID: 100, Session: session, Event: ev, Turn: turn}}
}

func killed(sig syscall.Signal) step {
	return step{exit: &machine.Exited{Code: 128 + int(sig), Signal: int(sig)}}
}

// play launches a run, applies the steps through the runner (markers as
// datagrams from the run's tree, deaths as the reaper reports them), and
// relaunches after each death; every run lives 2 s.
func play(t *testing.T, s *Supervisor, steps []step) {
	t.Helper()
	launch := func() {
		l := s.prepare(t)
		s.deliver(l)
		s.started(t, l)
	}
	launch()
	clock := s.clock.(*fakeClock)
	for _, st := range steps {
		if st.msg != nil {
			s.take(inMsg{Message: *st.msg, run: s.m.Run.Run})
			continue
		}
		clock.advance(2 * time.Second)
		e := *st.exit
		e.PID, e.Started, e.Ended = s.m.Run.PID, s.m.Run.Started, s.clock.Now()
		s.root.Store(nil)
		s.step(e)
		clock.advance(time.Second)
		launch()
	}
}

// In task mode a resume file that cannot be written does not turn the
// resume launch into a second run of the task: the continuation is in the
// argv.
func TestRuleTaskResumeFileFails(t *testing.T) {
	s := newTestSupervisorWith(t, Config{Name: "t", Argv: []string{"true"}, Policy: crashloop.DefaultPolicy(),
		Guard: crashloop.DefaultGuard(), Resume: resume.DefaultPolicy(), KeepRuns: 100,
		ResumeExec: []string{"agent", "-r", "{session}", "{message}"}, Report: io.Discard})
	s.started(t, s.prepare(t))
	s.take(inMsg{Message: marker.Message{PID: 100, Session: "s1", Event: marker.EventTurnBegin, Turn: "t1"}, run: 1})
	s.root.Store(nil)
	s.step(machine.Exited{PID: 1001, Code: 137, Signal: 9, Started: s.m.Run.Started, Ended: s.clock.Now()})
	// A directory where the file goes: the rename onto it fails.
	if err := os.Mkdir(ResumePath(s.cfg.StateDir), 0o700); err != nil {
		t.Fatal(err)
	}
	argv, env := s.deliver(s.prepare(t))
	if len(argv) != 4 || argv[0] != "agent" || argv[2] != "s1" || !strings.Contains(argv[3], "interrupted") {
		t.Errorf("argv %q, want the resume launch of s1", argv)
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "SUPERVISE_RESUME_FILE=") {
			t.Errorf("%s given although the file was not written", kv)
		}
	}
	if r := s.m.Sessions["s1"].Resume; r == nil || r.Delivered != 1 {
		t.Errorf("the delivery was not recorded: %+v", r)
	}
	var got record.Session
	s.db.View(func(tx *journal.Tx) error { got, _, _ = tx.Session("s1"); return nil })
	if got.Resume == nil || got.Resume.Delivered != 1 {
		t.Errorf("the delivery was not journaled before the launch: %+v", got.Resume)
	}
}

// A death's decisions are in the journal once the death's step returns,
// before anything is launched: commit before launch is an ordering of the
// machine's effects, and the runner keeps it.
func TestRuleDeathCommittedBeforeLaunch(t *testing.T) {
	s := newRuleSupervisor(t)
	play(t, s, []step{mark("s1", marker.EventTurnBegin, "t1"), killed(syscall.SIGKILL)})
	var got record.Session
	var run record.Run
	s.db.View(func(tx *journal.Tx) error {
		got, _, _ = tx.Session("s1")
		run, _, _ = tx.Run(1)
		return nil
	})
	if got.State != record.ResumePending || got.CrashCount != 1 || got.Resume == nil || got.Resume.Run != 2 {
		t.Errorf("journaled s1 = %+v, want resume_pending, delivered to run 2", got)
	}
	if run.Reason != record.ReasonSignal || !run.Dirty {
		t.Errorf("journaled run 1 = %+v, want a dirty signal death", run)
	}
}
