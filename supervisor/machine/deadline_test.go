package machine

import (
	"testing"
	"time"

	"github.com/supervise-dev/supervise/record"
)

func TestSessionDeadline(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	min := func(n int) time.Duration { return time.Duration(n) * time.Minute }
	at := func(n int) time.Time { return t0.Add(min(n)) }
	all := Deadlines{Turn: min(30), Model: min(10), Tool: min(5)}
	tests := []struct {
		name     string
		sess     record.Session
		d        Deadlines
		ok       bool
		kind     string
		at       time.Time
		extended bool
	}{
		{name: "off", sess: record.Session{State: record.InTurn, ClockFrom: t0}, d: Deadlines{}},
		{name: "idle has none", sess: record.Session{State: record.Idle, ClockFrom: t0}, d: all},
		{name: "parked has none", sess: record.Session{State: record.Parked, ClockFrom: t0}, d: all},
		{name: "turn only", sess: record.Session{State: record.InTurn, ClockFrom: t0}, d: all,
			ok: true, kind: DeadlineTurn, at: at(30)},
		{name: "tool phase is sooner", sess: record.Session{State: record.InTurn, ClockFrom: t0, Phase: "tool", PhaseStarted: at(20)},
			d: all, ok: true, kind: DeadlineTool, at: at(25)},
		{name: "model phase later than turn", sess: record.Session{State: record.InTurn, ClockFrom: t0, Phase: "model", PhaseStarted: at(25)},
			d: all, ok: true, kind: DeadlineTurn, at: at(30)},
		{name: "phase deadline without turn deadline", sess: record.Session{State: record.InTurn, ClockFrom: t0, Phase: "model", PhaseStarted: at(1)},
			d: Deadlines{Model: min(10)}, ok: true, kind: DeadlineModel, at: at(11)},
		{name: "tool flag does not apply to a model phase", sess: record.Session{State: record.InTurn, ClockFrom: t0, Phase: "model", PhaseStarted: at(1)},
			d: Deadlines{Tool: min(1)}},
		{name: "idle phase has no phase deadline", sess: record.Session{State: record.InTurn, ClockFrom: t0, Phase: "idle", PhaseStarted: at(1)},
			d: Deadlines{Model: min(1), Tool: min(1)}},
		{name: "phase without start (after resumed) waits for its marker", sess: record.Session{State: record.InTurn, ClockFrom: t0, Phase: "tool"},
			d: Deadlines{Tool: min(1)}},
		{name: "waiting for a person pauses", sess: record.Session{State: record.Waiting, Wait: "approval", ClockFrom: t0}, d: all},
		{name: "waiting for input pauses", sess: record.Session{State: record.Waiting, Wait: "input", ClockFrom: t0}, d: all},
		{name: "waiting for reconnect runs", sess: record.Session{State: record.Waiting, Wait: "reconnect", ClockFrom: t0}, d: all,
			ok: true, kind: DeadlineTurn, at: at(30)},
		{name: "extension moves it", sess: record.Session{State: record.InTurn, ClockFrom: t0, TurnExtended: at(40)}, d: all,
			ok: true, kind: DeadlineTurn, at: at(40), extended: true},
		{name: "extension capped at twice the flag", sess: record.Session{State: record.InTurn, ClockFrom: t0, TurnExtended: at(90)}, d: all,
			ok: true, kind: DeadlineTurn, at: at(60), extended: true},
		{name: "extension inside the flag changes nothing", sess: record.Session{State: record.InTurn, ClockFrom: t0, TurnExtended: at(10)}, d: all,
			ok: true, kind: DeadlineTurn, at: at(30)},
		{name: "phase extension capped", sess: record.Session{State: record.InTurn, Phase: "tool", PhaseStarted: t0, PhaseExtended: at(100)},
			d: Deadlines{Tool: min(5)}, ok: true, kind: DeadlineTool, at: at(10), extended: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dl, ok := SessionDeadline(&tt.sess, tt.d)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tt.ok, dl)
			}
			if !ok {
				return
			}
			if dl.Kind != tt.kind || !dl.At.Equal(tt.at) || dl.Extended != tt.extended {
				t.Errorf("got %s at %s extended %v, want %s at %s extended %v", dl.Kind, dl.At, dl.Extended, tt.kind, tt.at, tt.extended)
			}
		})
	}
}

func TestExtendDeadlines(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d := Deadlines{Turn: 10 * time.Second, Tool: 4 * time.Second}
	sess := record.Session{State: record.InTurn, ClockFrom: t0, Phase: "tool", PhaseStarted: t0.Add(2 * time.Second)}

	// Inside the deadline: asking for less than is left moves nothing.
	if extendDeadlines(&sess, d, time.Second, t0.Add(time.Second)) {
		t.Fatalf("a short extension moved a deadline: %+v", sess)
	}
	// now+by past the flag: the turn's deadline moves to now+by, the tool's
	// to its cap (start+2*4s).
	if !extendDeadlines(&sess, d, 9*time.Second, t0.Add(5*time.Second)) {
		t.Fatal("extension did not move anything")
	}
	if want := t0.Add(14 * time.Second); !sess.TurnExtended.Equal(want) {
		t.Errorf("turn extended to %s, want %s", sess.TurnExtended, want)
	}
	if want := t0.Add(10 * time.Second); !sess.PhaseExtended.Equal(want) {
		t.Errorf("tool phase extended to %s, want its cap %s", sess.PhaseExtended, want)
	}
	// Repeated extensions never pass twice the flag.
	for i := range 10 {
		extendDeadlines(&sess, d, time.Hour, t0.Add(time.Duration(6+i)*time.Second))
	}
	dl, _ := SessionDeadline(&sess, d)
	if want := t0.Add(10 * time.Second); !dl.At.Equal(want) || dl.Kind != DeadlineTool {
		t.Errorf("after repeated extensions the deadline is %s %s, want tool phase at %s", dl.Kind, dl.At, want)
	}
	sess.Phase = "model"
	dl, _ = SessionDeadline(&sess, d)
	if want := t0.Add(20 * time.Second); !dl.At.Equal(want) {
		t.Errorf("turn deadline %s, want its cap %s", dl.At, want)
	}
	// A session waiting for a person is not extended.
	w := record.Session{State: record.Waiting, Wait: "input", ClockFrom: t0}
	if extendDeadlines(&w, d, time.Hour, t0) {
		t.Error("a session waiting for input was extended")
	}
}

// TestDeadlineAfterRestart: a turn journaled by an earlier supervise (wall
// clock only, no monotonic reading) keeps its deadline: the time left is
// computed from the journaled start.
func TestDeadlineAfterRestart(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	start := now.Add(-7 * time.Second) // journaled: no monotonic reading, as JSON has none
	sess := record.Session{State: record.InTurn, ClockFrom: start}
	dl, ok := SessionDeadline(&sess, Deadlines{Turn: 10 * time.Second})
	if !ok {
		t.Fatal("no deadline")
	}
	if left := dl.At.Sub(now); left != 3*time.Second {
		t.Errorf("time left %s, want about 3s (10s from a start 7s ago)", left)
	}
}
