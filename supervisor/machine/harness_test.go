package machine

import (
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
)

// The rules as event tables: each case feeds Step a sequence of events at
// times of a fixed clock (no journal, no socket, no process, no sleep) and
// checks the state and the effects. A "journaled" decision is one the
// effects Save before the Commit that precedes any Launch or Backoff.

// t0 is the fixed clock's origin.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// rig is a machine under test with its clock and what it emitted.
type rig struct {
	t   *testing.T
	m   *Machine
	now time.Time
	fx  []Effect // every effect so far
	run uint64   // the run the harness started last
}

func testConfig() Config {
	policy := crashloop.DefaultPolicy()
	policy.Jitter = 0
	return Config{Policy: policy, Guard: crashloop.DefaultGuard(), Resume: resume.DefaultPolicy(),
		StopSignal: sigTERM, StopSignalName: "SIGTERM", StopTimeout: 10 * time.Second,
		Argv: []string{"agent"}, StateDir: "/state"}
}

func taskConfig() Config {
	cfg := testConfig()
	cfg.Task = TaskConfig{On: true, ID: "task1", Exec: []string{"agent", "-r", "{session}", "{message}"}}
	return cfg
}

func newRig(t *testing.T, cfg Config) *rig {
	t.Helper()
	r := &rig{t: t, m: New(cfg), now: t0}
	r.step(Booted{NextRun: 1})
	return r
}

// step feeds one event at the rig's clock and returns its effects.
func (r *rig) step(ev Event) []Effect {
	fx := r.m.Step(ev, r.now)
	r.fx = append(r.fx, fx...)
	return fx
}

// advance moves the clock.
func (r *rig) advance(d time.Duration) { r.now = r.now.Add(d) }

// launch asks for the next launch and reports the child started; it
// returns the Launch effect.
func (r *rig) launch() Launch {
	r.t.Helper()
	fx := r.step(LaunchDue{})
	l, ok := find[Launch](fx)
	if !ok {
		r.t.Fatalf("LaunchDue gave no Launch: %#v", fx)
	}
	if len(l.IDs) > 0 {
		r.step(Delivered{Run: l.Run, IDs: l.IDs, Via: l.Via})
	}
	r.step(Started{Run: l.Run, PID: 1000 + int(l.Run), At: r.now, Argv: l.Argv})
	r.run = l.Run
	return l
}

// marker applies a datagram from the child.
func (r *rig) marker(msg marker.Message) []Effect {
	if msg.PID == 0 {
		msg.PID = 100
	}
	return r.step(Marker{Msg: msg})
}

func (r *rig) begin(session, turn string) []Effect {
	return r.marker(marker.Message{Session: session, Event: marker.EventTurnBegin, Turn: turn})
}

func (r *rig) end(session, turn string, outcome marker.Outcome) []Effect {
	return r.marker(marker.Message{Session: session, Event: marker.EventTurnEnd, Turn: turn, Outcome: outcome})
}

// die ends the current run with code and signal, life after it started
// (or now, if the clock is past that).
func (r *rig) die(life time.Duration, code, sig int) []Effect {
	started := r.m.Run.Started
	if end := started.Add(life); end.After(r.now) {
		r.now = end
	}
	return r.step(Exited{PID: 1000 + int(r.run), Code: code, Signal: sig, Started: started, Ended: r.now})
}

func (r *rig) killed(sig int) []Effect { return r.die(2*time.Second, 128+sig, sig) }

func (r *rig) sess(id string) *record.Session { return r.m.Sessions[id] }

// find returns the first effect of type T.
func find[T Effect](fx []Effect) (T, bool) {
	for _, e := range fx {
		if v, ok := e.(T); ok {
			return v, true
		}
	}
	var zero T
	return zero, false
}

// all returns every effect of type T.
func all[T Effect](fx []Effect) []T {
	var out []T
	for _, e := range fx {
		if v, ok := e.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// next says what a death's effects decided: a relaunch after a delay, or
// the end with a code.
type next struct {
	relaunch bool
	delay    time.Duration
	end      bool
	code     int
}

func nextOf(t *testing.T, fx []Effect) next {
	t.Helper()
	if b, ok := find[Backoff](fx); ok {
		return next{relaunch: true, delay: b.Delay}
	}
	if e, ok := find[End](fx); ok {
		return next{end: true, code: e.Code}
	}
	t.Fatalf("no Backoff nor End in %#v", fx)
	return next{}
}

// savedBeforeCommit reports whether session id was saved, and a Commit
// came after that save and before any Launch or Backoff.
func savedBeforeCommit(fx []Effect, id string) bool {
	saved := false
	for _, e := range fx {
		switch e := e.(type) {
		case Save:
			for _, x := range e.IDs {
				saved = saved || x == id
			}
		case Commit:
			if saved {
				return true
			}
		case Launch, Backoff:
			return false
		}
	}
	return false
}

// logged reports whether a log line's message contains text.
func logged(fx []Effect, text string) bool {
	for _, l := range all[Log](fx) {
		if strings.Contains(l.Msg, text) {
			return true
		}
	}
	return false
}

// reported is every Report line.
func reported(fx []Effect) string {
	var b strings.Builder
	for _, r := range all[Report](fx) {
		for _, l := range r.Lines {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// armed returns the Arm of timer k among fx.
func armed(fx []Effect, k Timer) (Arm, bool) {
	for _, a := range all[Arm](fx) {
		if a.Timer == k && !a.Disarm {
			return a, true
		}
	}
	return Arm{}, false
}
