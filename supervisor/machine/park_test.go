package machine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
)

// breakerParked runs s1 into the breaker's park: killed mid-turn twice.
func breakerParked(t *testing.T, cfg Config) *rig {
	t.Helper()
	r := newRig(t, cfg)
	play(r, []act{begin("s1", "t1"), killed(9),
		msg(marker.Message{Session: "s1", Event: marker.EventResumed, Turn: "t1"}), killed(9)})
	if s := r.sess("s1"); s.State != record.Parked || s.ParkedBy != record.ParkedByBreaker {
		t.Fatalf("setup: s1 = %+v, want parked by the breaker", s)
	}
	r.advance(time.Second)
	r.launch()
	return r
}

// A park holds until a person lifts it: no marker of the agent's moves a
// parked session, each is refused (its sender's barrier answers '0'),
// counted, and said once per session with the command that lifts it.
func TestRuleParkHolds(t *testing.T) {
	for _, ev := range []marker.Message{
		{Event: marker.EventTurnBegin, Turn: "t9"},
		{Event: marker.EventTurnBegin, Turn: "t1"},
		{Event: marker.EventResumed, Turn: "t1"},
		{Event: marker.EventResumed},
		{Event: marker.EventTurnEnd, Turn: "t1", Outcome: marker.OutcomeCompleted},
		{Event: marker.EventWaiting, Wait: marker.WaitInput},
		{Event: marker.EventPhase, Phase: marker.PhaseTool, Tool: "Bash"},
		{Event: marker.EventClosed},
	} {
		t.Run(string(ev.Event)+ev.Turn, func(t *testing.T) {
			r := breakerParked(t, testConfig())
			before := *r.sess("s1")
			ev.Session = "s1"
			fx := r.marker(ev)
			s := r.sess("s1")
			if ref, ok := find[Refuse](fx); !ok || ref.PID != 100 {
				t.Errorf("a %s for a parked session was not refused: %#v", ev.Event, fx)
			}
			if s.State != record.Parked || s.Reason != before.Reason || s.ParkedBy != record.ParkedByBreaker ||
				s.Turn != before.Turn || s.CrashCount != before.CrashCount || s.Phase != before.Phase {
				t.Errorf("after a refused %s: %+v, want it parked as before (%+v)", ev.Event, s, before)
			}
			line := ""
			for _, l := range all[Log](fx) {
				if strings.Contains(l.Msg, "only a person lifts a park") {
					line = fmt.Sprint(l.Args...)
				}
			}
			if !strings.Contains(line, "supervise resume --state-dir /state s1") {
				t.Errorf("the refusal log %q lacks the resume command", line)
			}
			if c, ok := find[Count](fx); !ok || c.Metric != "refused" || c.Label != "parked" {
				t.Errorf("refusal not counted: %#v", fx)
			}
			fx = r.marker(ev)
			if _, ok := find[Refuse](fx); !ok || logged(fx, "only a person lifts a park") {
				t.Errorf("a second refusal: refused %v, logged again %v", ok, logged(fx, "only a person lifts a park"))
			}
			if r.m.RefusedParked != 2 {
				t.Errorf("RefusedParked = %d, want 2", r.m.RefusedParked)
			}
			// The next death does not resume it either.
			if nextOf(t, r.killed(9)); r.sess("s1").State != record.Parked {
				t.Errorf("after the next death: %+v", r.sess("s1"))
			}
		})
	}
}

// Heartbeats and declared effects of a parked session are taken: they
// move nothing.
func TestRuleParkTakesHeartbeats(t *testing.T) {
	r := breakerParked(t, testConfig())
	for _, ev := range []marker.Message{{Session: "s1"}, {Session: "s1", Event: marker.EventHeartbeat},
		{Session: "s1", Event: marker.EventEffect, Effect: "k1"}} {
		if fx := r.marker(ev); func() bool { _, ok := find[Refuse](fx); return ok }() {
			t.Errorf("%+v refused", ev)
		}
	}
	if s := r.sess("s1"); s.State != record.Parked || len(s.Effects) != 1 {
		t.Errorf("%+v", s)
	}
}

// Model traffic never lifts a park nor opens a turn in it.
func TestRuleParkHoldsTraffic(t *testing.T) {
	for _, k := range []TrafficKind{TrafficTurnBegin, TrafficTool, TrafficModel, TrafficTurnEnd, TrafficLimited} {
		r := breakerParked(t, testConfig())
		fx := r.step(Traffic{Kind: k, Session: "s1", Turn: "p1", Tool: "Bash", Outcome: marker.OutcomeCompleted, RetryAt: r.now.Add(time.Minute)})
		if s := r.sess("s1"); s.State != record.Parked || s.ParkedBy != record.ParkedByBreaker {
			t.Errorf("traffic %d lifted the park: %+v", k, s)
		}
		if _, ok := find[Refuse](fx); ok {
			t.Errorf("traffic %d refused a pid: %#v", k, fx)
		}
	}
}

// A person lifts a park: after `supervise resume` the resumed turn goes on,
// and a new park is said again.
func TestRuleParkLiftedByHand(t *testing.T) {
	r := breakerParked(t, testConfig())
	r.begin("s1", "t2")
	if fx := r.step(ManualResume{ID: "s1"}); r.sess("s1").State != record.ResumePending {
		t.Fatalf("manual resume: %+v %#v", r.sess("s1"), fx)
	}
	r.killed(9) // handed nothing: the resume is owed to the next run
	r.advance(time.Second)
	if l := r.launch(); len(l.IDs) != 1 || l.IDs[0] != "s1" {
		t.Fatalf("the next launch did not deliver s1: %+v", l)
	}
	// The resumed CLI (claude -p -r) fires its hooks' turn-begin: taken.
	fx := r.begin("s1", "t3")
	if _, ok := find[Refuse](fx); ok || r.sess("s1").State != record.InTurn {
		t.Fatalf("the resumed run's turn-begin: %+v %#v", r.sess("s1"), fx)
	}
	if logged(fx, "supersedes") {
		t.Errorf("logged the undocumented word: %#v", fx)
	}
}

// Parks of every kind hold, whatever ParkedBy says; a changed agent lifts
// only the breaker's (a damaged record, a budget, a wait never).
func TestRuleParkKinds(t *testing.T) {
	cfg := testConfig()
	cfg.Fingerprint = true
	old := &record.Fingerprint{Sum: "aaaa"}
	var sessions []record.Session
	for i, by := range []string{"", record.ParkedByBudget, "damaged", "anything"} {
		sessions = append(sessions, record.Session{ID: fmt.Sprintf("p%d", i), State: record.Parked, ParkedBy: by,
			Fingerprint: old, Turn: "t1", Reason: "parked " + by})
	}
	m := New(cfg)
	m.Step(Booted{NextRun: 1, Sessions: sessions}, t0)
	fx := m.Step(LaunchDue{Fingerprint: &record.Fingerprint{Sum: "bbbb"}}, t0)
	if l, _ := find[Launch](fx); len(l.IDs) != 0 {
		t.Fatalf("a changed agent delivered %v", l.IDs)
	}
	m.Step(Started{Run: 1, PID: 7, At: t0, Argv: []string{"agent"}}, t0)
	for _, s := range sessions {
		m.Step(Marker{Msg: marker.Message{PID: 9, Session: s.ID, Event: marker.EventTurnBegin, Turn: "t2"}}, t0)
		m.Step(Traffic{Kind: TrafficTurnBegin, Session: s.ID}, t0)
	}
	m.Step(Exited{PID: 7, Code: 1, Started: t0, Ended: t0.Add(time.Second)}, t0.Add(time.Second))
	for _, s := range sessions {
		if got := m.Sessions[s.ID]; got.State != record.Parked || got.Reason != s.Reason {
			t.Errorf("%s (parked by %q): %+v", s.ID, s.ParkedBy, got)
		}
	}
}

// In task mode a refused marker still tells that the hooks are wired, and
// the task ends 5 with the parked session and its command, not with the
// "no markers" warning.
func TestRuleParkRefusedInTask(t *testing.T) {
	cfg := taskConfig()
	cfg.Task.Rerun = true
	parked := record.Session{ID: "s1", State: record.Parked, ParkedBy: record.ParkedByBreaker, Turn: "t1",
		Task: "task1", Reason: "mid-turn at 2 consecutive dirty deaths"}
	m := New(cfg)
	m.Step(Booted{NextRun: 1, Sessions: []record.Session{parked}}, t0)
	fx := m.Step(LaunchDue{}, t0)
	l, ok := find[Launch](fx)
	if !ok {
		t.Fatalf("--rerun-task did not start the task: %#v", fx)
	}
	m.Step(Started{Run: l.Run, PID: 7, At: t0, Argv: l.Argv}, t0)
	fx = m.Step(Marker{Msg: marker.Message{PID: 9, Session: "s1", Event: marker.EventTurnBegin, Turn: "t2"}}, t0)
	if _, ok := find[Refuse](fx); !ok {
		t.Fatal("not refused")
	}
	fx = m.Step(Exited{PID: 7, Code: 0, Started: t0, Ended: t0.Add(time.Second)}, t0.Add(time.Second))
	if n := nextOf(t, fx); !n.end || n.code != ExitParked {
		t.Fatalf("task ended %+v, want 5", n)
	}
	if rep := reported(fx); strings.Contains(rep, "no turn markers arrived") || !strings.Contains(rep, "session s1 of") && !strings.Contains(rep, "session s1 is parked") {
		t.Errorf("report:\n%s", rep)
	}
}

// A flood of heartbeats naming fresh ids keeps at most --max-open-sessions
// sessions in one run, whether they come as datagrams or coalesced; past it
// they are refused, counted and said once a second, and a new run may bring
// as many again (pruned by --keep-sessions, as every settled session).
func TestRuleHeartbeatFloodBounded(t *testing.T) {
	cfg := testConfig()
	cfg.MaxOpenSessions = 10
	r := newRig(t, cfg)
	r.launch()
	refused := 0
	for i := range 30 {
		if fx := r.marker(marker.Message{Session: fmt.Sprintf("h%d", i), Event: marker.EventHeartbeat}); func() bool { _, ok := find[Refuse](fx); return ok }() {
			refused++
		}
	}
	beats := Beats{Sessions: map[string]time.Time{}}
	for i := range 30 {
		beats.Sessions[fmt.Sprintf("b%d", i)] = r.now
	}
	r.step(beats)
	if n := len(r.m.Sessions); n != 10 {
		t.Errorf("%d sessions held after 60 heartbeats for fresh ids, want 10 (--max-open-sessions)", n)
	}
	if refused != 20 || r.m.BeatsDropped != 50 {
		t.Errorf("refused %d datagrams, dropped %d in all; want 20 and 50", refused, r.m.BeatsDropped)
	}
	// A known session's heartbeat is always taken.
	if fx := r.marker(marker.Message{Session: "h0", Event: marker.EventHeartbeat}); func() bool { _, ok := find[Refuse](fx); return ok }() {
		t.Error("a known session's heartbeat was refused")
	}
}
