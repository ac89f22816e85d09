package resume

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/record"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func sess(state record.SessionState, count int) record.Session {
	return record.Session{ID: "s", State: state, CrashCount: count, Turn: "t1", TurnStarted: now.Add(-time.Minute),
		Phase: "tool", Tool: "bash", Prompt: "rename the package"}
}

func waitingFor(w string, count int) record.Session {
	s := sess(record.Waiting, count)
	s.Wait = w
	return s
}

var kill9 = Death{Reason: record.ReasonSignal, Signal: 9, ExitCode: 137, Run: 7, At: now}

// TestDecisionTable covers every row of the decision table in docs/design.md and the
// rules around it.
func TestDecisionTable(t *testing.T) {
	delivered := func(s record.Session, run uint64) record.Session {
		s.Resume = &record.Resume{Attempt: 1, Run: run, Delivered: 1}
		return s
	}
	stale := sess(record.InTurn, 0)
	stale.TurnStarted = now.Add(-2 * time.Hour)
	cancelled := sess(record.Idle, 0)
	cancelled.Outcome = "cancelled"
	for _, tc := range []struct {
		name      string
		in        record.Session
		death     Death
		policy    Policy
		action    Action
		state     record.SessionState
		count     int
		reasonHas string
	}{
		{"idle: nothing", sess(record.Idle, 0), kill9, DefaultPolicy(), Keep, record.Idle, 0, ""},
		{"closed: nothing", sess(record.Closed, 0), kill9, DefaultPolicy(), Keep, record.Closed, 0, ""},
		{"turn ended cancelled, then died: nothing", cancelled, kill9, DefaultPolicy(), Keep, record.Idle, 0, ""},
		{"waiting: parked, never resumed", sess(record.Waiting, 0), kill9, DefaultPolicy(), Park, record.Parked, 1, "waiting for input"},
		{"waiting for approval: parked", waitingFor("approval", 0), kill9, DefaultPolicy(), Park, record.Parked, 1, "waiting for input"},
		{"waiting for reconnect: resumed like in_turn", waitingFor("reconnect", 0), kill9, DefaultPolicy(), Resume, record.ResumePending, 1, "signal 9"},
		{"waiting for reconnect, second death: breaker", waitingFor("reconnect", 1), kill9, DefaultPolicy(), Park, record.Parked, 2, "consecutive"},
		{"turn timeout: resume", sess(record.InTurn, 0), Death{Reason: record.ReasonTurnTimeout, Signal: 15, Run: 7}, DefaultPolicy(), Resume, record.ResumePending, 1, "deadline"},
		{"oom: resume", sess(record.InTurn, 0), Death{Reason: record.ReasonOOM, Signal: 9, Run: 7}, DefaultPolicy(), Resume, record.ResumePending, 1, "OOM"},
		{"in turn, stale: parked", stale, kill9, DefaultPolicy(), Park, record.Parked, 1, "stale"},
		{"in turn, first death: resume", sess(record.InTurn, 0), kill9, DefaultPolicy(), Resume, record.ResumePending, 1, "signal 9"},
		{"in turn, second consecutive death: park", sess(record.InTurn, 1), kill9, DefaultPolicy(), Park, record.Parked, 2, "2 consecutive dirty deaths"},
		{"limit 2 allows a second resume", sess(record.InTurn, 1), kill9, Policy{Limit: 2, MaxAge: time.Hour}, Resume, record.ResumePending, 2, ""},
		{"resume pending, delivered to the dead run: counts and parks", delivered(sess(record.ResumePending, 1), 7), kill9, DefaultPolicy(), Park, record.Parked, 2, "consecutive"},
		{"resume pending, held back (never delivered): untouched", delivered(sess(record.ResumePending, 1), 0), kill9, DefaultPolicy(), Keep, record.ResumePending, 1, ""},
		{"resume pending, delivered to an earlier run: untouched", delivered(sess(record.ResumePending, 1), 6), kill9, DefaultPolicy(), Keep, record.ResumePending, 1, ""},
		{"parked stays parked", sess(record.Parked, 2), kill9, DefaultPolicy(), Keep, record.Parked, 2, ""},
		{"stopped stays stopped", sess(record.Stopped, 0), kill9, DefaultPolicy(), Keep, record.Stopped, 0, ""},
		{"exit 0 with a turn open is dirty", sess(record.InTurn, 0), Death{Reason: record.ReasonTurnOpen, Run: 7}, DefaultPolicy(), Resume, record.ResumePending, 1, "status 0"},
		{"watchdog", sess(record.InTurn, 0), Death{Reason: record.ReasonWatchdog, Signal: 6, Run: 7}, DefaultPolicy(), Resume, record.ResumePending, 1, "watchdog"},
		{"supervisor died", sess(record.InTurn, 0), Death{Reason: record.ReasonSupervisorDied, Run: 7}, DefaultPolicy(), Resume, record.ResumePending, 1, "supervise itself died"},
		{"requested stop, in turn: stopped, uncounted", sess(record.InTurn, 0), Death{Reason: record.ReasonStopped, Requested: true}, DefaultPolicy(), Stop, record.Stopped, 0, "requested stop of supervise while mid-turn"},
		{"requested stop, waiting: stopped", sess(record.Waiting, 1), Death{Reason: record.ReasonStopped, Requested: true}, DefaultPolicy(), Stop, record.Stopped, 1, ""},
		{"requested stop, pending, handed to the stopped run: stopped", delivered(sess(record.ResumePending, 1), 7), Death{Reason: record.ReasonStopped, Requested: true, Run: 7}, DefaultPolicy(), Stop, record.Stopped, 1, ""},
		{"requested stop, pending, held back (never handed over): still owed", delivered(sess(record.ResumePending, 1), 0), Death{Reason: record.ReasonStopped, Requested: true, Run: 7}, DefaultPolicy(), Keep, record.ResumePending, 1, ""},
		{"requested stop, pending, handed to an earlier run: still owed", delivered(sess(record.ResumePending, 1), 6), Death{Reason: record.ReasonStopped, Requested: true, Run: 7}, DefaultPolicy(), Keep, record.ResumePending, 1, ""},
		{"requested stop, idle: nothing", sess(record.Idle, 0), Death{Reason: record.ReasonStopped, Requested: true}, DefaultPolicy(), Keep, record.Idle, 0, ""},
		{"no max age", stale, kill9, Policy{Limit: 1}, Resume, record.ResumePending, 1, ""},
		{"clean exit, resume handed to it not taken: parked, uncounted", delivered(sess(record.ResumePending, 1), 7), Death{Reason: record.ReasonExit, Clean: true, Run: 7}, DefaultPolicy(), Park, record.Parked, 1, "exited without taking it"},
		{"clean exit, resume not handed to it: untouched", delivered(sess(record.ResumePending, 1), 0), Death{Reason: record.ReasonExit, Clean: true, Run: 7}, DefaultPolicy(), Keep, record.ResumePending, 1, ""},
		{"clean exit, idle: nothing", sess(record.Idle, 0), Death{Reason: record.ReasonExit, Clean: true, Run: 7}, DefaultPolicy(), Keep, record.Idle, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := Decide([]record.Session{tc.in}, tc.death, now, tc.policy)
			if len(ds) != 1 {
				t.Fatalf("%d decisions", len(ds))
			}
			d := ds[0]
			if d.Action != tc.action || d.Session.State != tc.state || d.Session.CrashCount != tc.count {
				t.Errorf("got %v %s count %d, want %v %s count %d", d.Action, d.Session.State, d.Session.CrashCount, tc.action, tc.state, tc.count)
			}
			if !strings.Contains(d.Session.Reason, tc.reasonHas) {
				t.Errorf("reason %q lacks %q", d.Session.Reason, tc.reasonHas)
			}
			switch d.Action {
			case Resume:
				if d.Session.Resume == nil || d.Session.Resume.Message == "" || d.Session.Resume.Run != 0 {
					t.Errorf("a resume decision needs a fresh, undelivered continuation: %+v", d.Session.Resume)
				}
			case Park, Stop:
				if d.Session.Resume != nil {
					t.Error("a parked or stopped session keeps a pending resume")
				}
			case Keep:
				if d.Session.Updated != tc.in.Updated || d.Session.State != tc.in.State {
					t.Error("Keep changed the session")
				}
			}
		})
	}
}

// One session's park never blocks another's resume.
func TestParkDoesNotBlockOthers(t *testing.T) {
	a, b := sess(record.InTurn, 1), sess(record.InTurn, 0)
	a.ID, b.ID = "a", "b"
	ds := Decide([]record.Session{b, a}, kill9, now, DefaultPolicy())
	if ds[0].Session.ID != "a" || ds[0].Action != Park || ds[1].Action != Resume {
		t.Errorf("decisions %v/%v, want a parked and b resumed", ds[0].Action, ds[1].Action)
	}
}

func TestAttemptsCount(t *testing.T) {
	s := sess(record.InTurn, 0)
	d := decisions(Decide([]record.Session{s}, kill9, now, Policy{Limit: 3})).Session(t)
	if d.Resume.Attempt != 1 {
		t.Errorf("attempt %d", d.Resume.Attempt)
	}
	if d.Resume.Interrupted != 7 {
		t.Errorf("interrupted_run %d, want the dead run 7", d.Resume.Interrupted)
	}
	d.State, d.Resume = record.InTurn, nil // the agent took it, then died again in run 8
	d2 := decisions(Decide([]record.Session{d}, Death{Reason: record.ReasonSignal, Signal: 9, Run: 8}, now, Policy{Limit: 3})).Session(t)
	if d2.Resume.Attempt != 2 || d2.CrashCount != 2 || d2.Resume.Interrupted != 8 {
		t.Errorf("second consecutive resume: attempt %d count %d interrupted %d", d2.Resume.Attempt, d2.CrashCount, d2.Resume.Interrupted)
	}
	// A completed turn resets the count: the next interruption is attempt 1.
	d2.State, d2.Resume, d2.CrashCount = record.InTurn, nil, 0
	d3 := decisions(Decide([]record.Session{d2}, Death{Reason: record.ReasonSignal, Signal: 9, Run: 9}, now, Policy{Limit: 3})).Session(t)
	if d3.Resume.Attempt != 1 || d3.Resume.Interrupted != 9 {
		t.Errorf("after a completed turn: attempt %d interrupted %d", d3.Resume.Attempt, d3.Resume.Interrupted)
	}
}

type decisions []Decision

func (ds decisions) Session(t *testing.T) record.Session {
	t.Helper()
	if len(ds) != 1 {
		t.Fatalf("%d decisions", len(ds))
	}
	return ds[0].Session
}

func TestMessageIsHonest(t *testing.T) {
	msg := Message(sess(record.InTurn, 0), kill9, "")
	for _, want := range []string{"interrupted", "signal 9 (SIGKILL)", `tool "bash" was running`,
		"may already be done", "unknown", "check the current state before redoing anything", "rename the package"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	wd := Message(record.Session{Phase: "model"}, Death{Reason: record.ReasonWatchdog}, "")
	if !strings.Contains(wd, "watchdog") || !strings.Contains(wd, "waiting for the model") {
		t.Errorf("watchdog message: %s", wd)
	}
	sd := Message(record.Session{}, Death{Reason: record.ReasonSupervisorDied}, "")
	if !strings.Contains(sd, "supervise itself died") || strings.Contains(sd, "request was") {
		t.Errorf("supervisor-died message without prompt: %s", sd)
	}
	withDetail := sess(record.InTurn, 0)
	withDetail.Tool, withDetail.Detail = "Bash", "npm test"
	if msg := Message(withDetail, kill9, ""); !strings.Contains(msg, "while the tool \"Bash\" was running `npm test`.") {
		t.Errorf("message does not name what the tool ran:\n%s", msg)
	}
	withDetail.Detail = "echo `date`"
	if msg := Message(withDetail, kill9, ""); !strings.Contains(msg, "was running `` echo `date` ``.") {
		t.Errorf("a detail with a backtick is not quoted whole:\n%s", msg)
	}
	withDetail.Tool = ""
	if msg := Message(withDetail, kill9, "{tool}|{detail}"); msg != "|echo `date`" {
		t.Errorf("template {detail}: %q", msg)
	}
	withEffects := sess(record.InTurn, 0)
	withEffects.Effects = []string{"write:a.go", "Bash:npm publish#1f2e"}
	if msg := Message(withEffects, kill9, ""); !strings.Contains(msg,
		"Already done (side effects this turn declared completed; do not do them again): `write:a.go`, `Bash:npm publish#1f2e`.") {
		t.Errorf("message does not name the declared effects:\n%s", msg)
	}
	if msg := Message(withEffects, kill9, "{effects}"); msg != "`write:a.go`, `Bash:npm publish#1f2e`" {
		t.Errorf("template {effects}: %q", msg)
	}
	if msg := Message(sess(record.InTurn, 0), kill9, ""); strings.Contains(msg, "Already done") {
		t.Errorf("a turn without effects has an already-done list:\n%s", msg)
	}
	for i := range 20 {
		withEffects.Effects = append(withEffects.Effects, fmt.Sprintf("k%d", i))
	}
	if msg := Message(withEffects, kill9, ""); !strings.Contains(msg, "`k13`, and 6 more (the resume file's \"effects\" lists them).") ||
		strings.Contains(msg, "`k14`") {
		t.Errorf("a long effect list is not bounded:\n%s", msg)
	}
	custom := Message(sess(record.InTurn, 0), kill9, "continue {session}/{turn}: {how}; {prompt}")
	if custom != "continue s/t1: the agent was killed by signal 9 (SIGKILL); rename the package" {
		t.Errorf("template: %q", custom)
	}
}

func TestManual(t *testing.T) {
	for _, st := range []record.SessionState{record.Parked, record.Stopped, record.ResumePending} {
		s := sess(st, 2)
		s.Reason = "mid-turn at 2 consecutive dirty deaths"
		got, err := Manual(s, now, "")
		if err != nil {
			t.Fatalf("%s: %v", st, err)
		}
		if got.State != record.ResumePending || got.CrashCount != 0 || got.Resume == nil || !got.Resume.Manual ||
			!strings.Contains(got.Resume.Message, "resumed by hand") || !strings.Contains(got.Resume.Message, "2 consecutive") {
			t.Errorf("%s: %+v %+v", st, got, got.Resume)
		}
	}
	for _, st := range []record.SessionState{record.Idle, record.InTurn, record.Closed, record.Waiting} {
		if _, err := Manual(sess(st, 0), now, ""); !errors.Is(err, ErrNotResumable) {
			t.Errorf("%s: err %v, want ErrNotResumable", st, err)
		}
	}
}

// A requested stop's reason says so once; a stop that ended otherwise (the
// grace ran out and SIGKILL followed) says how.
func TestStoppedReasonWording(t *testing.T) {
	now := time.Now()
	s := record.Session{ID: "s", State: record.InTurn, Turn: "t", Updated: now}
	d := Decide([]record.Session{s}, Death{Reason: record.ReasonStopped, Requested: true}, now, DefaultPolicy())[0]
	if d.Session.Reason != "stopped by a requested stop of supervise while mid-turn" {
		t.Errorf("reason %q", d.Session.Reason)
	}
	d = Decide([]record.Session{s}, Death{Reason: record.ReasonSignal, Signal: 9, Requested: true}, now, DefaultPolicy())[0]
	if !strings.HasSuffix(d.Session.Reason, "(the agent was killed by signal 9 (SIGKILL))") {
		t.Errorf("reason %q", d.Session.Reason)
	}
}

// Exhausted is the breaker's boundary, and Decide and Lift keep to it: a
// death that brings the crash count to Limit is resumed, to Limit+1 parked;
// a lifted session is resumed once more and parked at the death after.
func TestExhausted(t *testing.T) {
	for _, tc := range []struct {
		limit, count int
		exhausted    bool
	}{
		{0, 0, false},
		{0, 1, true},
		{1, 0, false},
		{1, 1, false},
		{1, 2, true},
		{3, 3, false},
		{3, 4, true},
		{3, 9, true},
	} {
		p := Policy{Limit: tc.limit}
		if got := p.Exhausted(tc.count); got != tc.exhausted {
			t.Errorf("limit %d: Exhausted(%d) = %v, want %v", tc.limit, tc.count, got, tc.exhausted)
		}
		if tc.count == 0 {
			continue
		}
		// Decide parks exactly when the death it counts exhausts the limit.
		d := Decide([]record.Session{sess(record.InTurn, tc.count-1)}, kill9, now, p)[0]
		if d.Session.CrashCount != tc.count || (d.Action == Park) != tc.exhausted {
			t.Errorf("limit %d, death %d in a row: %v at crash_count %d, want parked %v",
				tc.limit, tc.count, d.Action, d.Session.CrashCount, tc.exhausted)
		}
	}
	for _, limit := range []int{1, 2, 3} {
		p := Policy{Limit: limit}
		c := liftedCount(p)
		if p.Exhausted(c+1) || !p.Exhausted(c+2) {
			t.Errorf("limit %d: lifted to crash_count %d: next death exhausted %v, the one after %v; want false, true",
				limit, c, p.Exhausted(c+1), p.Exhausted(c+2))
		}
	}
	if p := (Policy{Limit: 0}); !p.Exhausted(liftedCount(p) + 1) {
		t.Error("limit 0: a lifted session's next death is not parked")
	}
}

// A requested restart hands what it interrupts to the next run as a
// person's resume: the crash count untouched, never held; a session not
// in the run is left as it is.
func TestDecideRestart(t *testing.T) {
	now := time.Now()
	d := Death{Reason: record.ReasonStopped, Requested: true, Restart: true, Run: 4, At: now}
	in := record.Session{ID: "s1", State: record.InTurn, Turn: "t1", CrashCount: 1, TurnStarted: now}
	waiting := record.Session{ID: "s2", State: record.Waiting, Wait: "input", Turn: "t2"}
	idle := record.Session{ID: "s3", State: record.Idle}
	decs := Decide([]record.Session{in, waiting, idle}, d, now, DefaultPolicy())
	for _, dec := range decs[:2] {
		s := dec.Session
		if dec.Action != Resume || s.State != record.ResumePending || s.Resume == nil || !s.Resume.Manual ||
			s.Resume.Reason != ReasonRestart || !strings.Contains(s.Resume.Message, "restart") {
			t.Errorf("%s: %v %+v, want a person's resume for the restart", s.ID, dec.Action, s)
		}
	}
	if decs[0].Session.CrashCount != 1 {
		t.Errorf("a restart counted: crash count %d, want 1", decs[0].Session.CrashCount)
	}
	if decs[2].Action != Keep {
		t.Errorf("an idle session was %v by a restart", decs[2].Action)
	}
}
