package machine

import (
	"testing"
	"time"

	"github.com/supervise-dev/supervise/journal"
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
	// The run a dead supervise left behind, decided at boot: the guard it
	// opens, or the journal check under way, holds the resume.
	for _, c := range []struct {
		name      string
		trip      int
		verifying bool
		held      string
	}{
		{name: "boot: resumed", held: ""},
		{name: "boot: the orphan's death opens the guard", trip: 1, held: "crash-loop guard open"},
		{name: "boot: the journal check runs", verifying: true, held: "checking the journal after an unclean stop"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			if c.trip > 0 {
				cfg.Guard.Trip = c.trip
			}
			m := New(cfg)
			sess := journal.Session{ID: "s1", State: journal.InTurn, Turn: "t1", TurnStarted: t0.Add(-time.Minute), Run: 4}
			orphan := journal.Run{Run: 4, PID: 99, Started: t0.Add(-time.Minute), Ended: t0, Reason: journal.ReasonSupervisorDied, Dirty: true}
			fx := m.Step(Booted{NextRun: 5, Sessions: []journal.Session{sess}, Orphan: &orphan, Verifying: c.verifying}, t0)
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
