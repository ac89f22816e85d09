package machine

import (
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
)

// What the API proxy saw becomes the markers hooks would send: a turn, its
// tool phases and its end, for an agent with no hooks at all.
func TestRuleTrafficTurn(t *testing.T) {
	r := newRig(t, taskConfig())
	r.launch()
	r.step(Traffic{Kind: TrafficTurnBegin, Session: "s1", Turn: "p1"})
	if s := r.sess("s1"); s == nil || s.State != record.InTurn || s.Turn != "p1" {
		t.Fatalf("after a main request: %+v, want s1 in_turn p1", s)
	}
	r.step(Traffic{Kind: TrafficTool, Session: "s1", Tool: "Bash", Detail: "npm test"})
	if s := r.sess("s1"); s.Phase != "tool" || s.Tool != "Bash" || s.Detail != "npm test" || !s.ToolRan {
		t.Fatalf("after a tool call: %+v", s)
	}
	r.step(Traffic{Kind: TrafficModel, Session: "s1"})
	if s := r.sess("s1"); s.Phase != "model" {
		t.Fatalf("after the tool's result: phase %q", s.Phase)
	}
	fx := r.step(Traffic{Kind: TrafficTurnEnd, Session: "s1", Outcome: marker.OutcomeCompleted})
	if s := r.sess("s1"); s.State != record.Idle || s.Outcome != "completed" {
		t.Fatalf("after the final answer: %+v", s)
	}
	if !savedBeforeCommit(append(fx, Commit{}), "s1") {
		t.Error("the turn's end is not saved")
	}
	if n := nextOf(t, r.die(0, 0, 0)); !n.end || n.code != ExitOK {
		t.Fatalf("task ended %+v, want 0", n)
	}
}

// Hooks and proxy together: a proxy marker that restates the session's
// state changes and saves nothing, so the journal takes each marker once.
func TestRuleTrafficWithHooks(t *testing.T) {
	r := newRig(t, taskConfig())
	r.launch()
	r.begin("s1", "h1")
	r.marker(marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseTool, Tool: "Bash", Detail: "ls"})
	for _, tr := range []Traffic{
		{Kind: TrafficTurnBegin, Session: "s1", Turn: "p1"},
		{Kind: TrafficTool, Session: "s1", Tool: "Bash", Detail: "ls"},
	} {
		if fx := r.step(tr); len(all[Save](fx)) != 0 {
			t.Errorf("%+v restating the state saved: %#v", tr, fx)
		}
	}
	if s := r.sess("s1"); s.Turn != "h1" {
		t.Errorf("the hook's turn id became %q", s.Turn)
	}
	r.step(Traffic{Kind: TrafficTurnEnd, Session: "s1", Outcome: marker.OutcomeCompleted})
	// The hook's own turn-end after the proxy's is a repeat: ignored, as
	// any repeated turn-end, so the turn proves health once.
	if fx := r.end("s1", "h1", marker.OutcomeCompleted); !logged(fx, "out of sequence: ignored") {
		t.Errorf("the hook's turn-end after the proxy's was applied again: %#v", fx)
	}
	if s := r.sess("s1"); s.State != record.Idle || s.Outcome != "completed" {
		t.Fatalf("%+v", s)
	}
}

// The resumed run's first main request for the session it was handed is
// the agent taking the resume.
func TestRuleTrafficResumed(t *testing.T) {
	r := newRig(t, taskConfig())
	r.launch()
	r.step(Traffic{Kind: TrafficTurnBegin, Session: "s1", Turn: "p1"})
	r.killed(sigKILL)
	r.launch()
	fx := r.step(Traffic{Kind: TrafficTurnBegin, Session: "s1", Turn: "p2"})
	if !logged(fx, "agent took the resume") {
		t.Errorf("the resumed run's request did not take the resume: %#v", fx)
	}
	if s := r.sess("s1"); s.State != record.InTurn || s.Turn != "p1" || s.CrashCount != 1 {
		t.Fatalf("%+v", s)
	}
}

// A rate limit: the session waits for reconnect until retry_at, its
// deadlines paused; killed during the wait, its resume waits for
// retry_at.
func TestRuleTrafficLimited(t *testing.T) {
	cfg := taskConfig()
	cfg.Deadlines = Deadlines{Model: 10 * time.Second}
	r := newRig(t, cfg)
	r.launch()
	r.step(Traffic{Kind: TrafficTurnBegin, Session: "s1", Turn: "p1"})
	if _, ok := armed(r.step(Traffic{Kind: TrafficModel, Session: "s1"}), TimerDeadline); !ok {
		t.Fatal("the model phase armed no deadline")
	}
	retry := r.now.Add(30 * time.Second)
	fx := r.step(Traffic{Kind: TrafficLimited, Session: "s1", RetryAt: retry})
	s := r.sess("s1")
	if s.State != record.Waiting || s.Wait != WaitReconnect || !s.RetryAt.Equal(retry) {
		t.Fatalf("after a 429: %+v", s)
	}
	if _, ok := armed(fx, TimerDeadline); ok {
		t.Error("a deadline is armed while the session waits out a rate limit")
	}
	if _, ok := SessionDeadline(s, cfg.Deadlines); ok {
		t.Error("the session's deadline runs during the wait")
	}
	r.advance(5 * time.Second)
	n := nextOf(t, r.killed(sigKILL))
	if !n.relaunch || n.delay < 20*time.Second {
		t.Fatalf("killed during the wait: %+v, want the resume at retry_at (about 23 s on)", n)
	}
	// The wait ends with the next request: the clock starts again.
	r2 := newRig(t, cfg)
	r2.launch()
	r2.step(Traffic{Kind: TrafficTurnBegin, Session: "s1"})
	r2.step(Traffic{Kind: TrafficLimited, Session: "s1", RetryAt: r2.now.Add(30 * time.Second)})
	r2.advance(31 * time.Second)
	r2.step(Traffic{Kind: TrafficModel, Session: "s1"})
	if s := r2.sess("s1"); s.State != record.InTurn || !s.RetryAt.IsZero() || !s.ClockFrom.Equal(r2.now) {
		t.Fatalf("after the wait: %+v", s)
	}
}

// Tokens sum across answers and resumes; past --max-tokens the session is
// parked for its budget, the agent stopped, and the task ends 5 without a
// resume.
func TestRuleTrafficBudget(t *testing.T) {
	cfg := taskConfig()
	cfg.MaxTokens = 15
	r := newRig(t, cfg)
	r.launch()
	r.step(Traffic{Kind: TrafficTurnBegin, Session: "s1"})
	r.step(Traffic{Kind: TrafficUsage, Session: "s1", Input: 5, Output: 4})
	if s := r.sess("s1"); s.Tokens == nil || s.Tokens.Input != 5 || s.Tokens.Output != 4 || s.State != record.InTurn {
		t.Fatalf("%+v", s)
	}
	fx := r.step(Traffic{Kind: TrafficUsage, Session: "s1", Input: 3, Output: 27})
	s := r.sess("s1")
	if s.State != record.Parked || s.ParkedBy != record.ParkedByBudget || !strings.Contains(s.Reason, "--max-tokens 15") {
		t.Fatalf("past the budget: %+v", s)
	}
	if _, ok := find[Signal](fx); !ok || r.m.Abort == nil || r.m.Abort.Reason != record.ReasonTokenBudget {
		t.Fatalf("the agent was not stopped for the budget: %#v", fx)
	}
	n := nextOf(t, r.die(time.Second, 143, 15))
	if !n.end || n.code != ExitParked {
		t.Fatalf("ended %+v, want exit 5", n)
	}
	if s := r.sess("s1"); s.State != record.Parked || s.Tokens.Input+s.Tokens.Output != 39 {
		t.Fatalf("after the stop: %+v", s)
	}
}

// A stalled stream stops the agent, decided as a watchdog death: resumed
// once.
func TestRuleTrafficStall(t *testing.T) {
	r := newRig(t, taskConfig())
	r.launch()
	r.step(Traffic{Kind: TrafficTurnBegin, Session: "s1"})
	fx := r.step(Traffic{Kind: TrafficStall, Session: "s1", Stalled: 3 * time.Second})
	if _, ok := find[Signal](fx); !ok {
		t.Fatalf("no signal for a stalled stream: %#v", fx)
	}
	r.die(time.Second, 143, 15)
	if got := r.m.LastExit.Reason; got != record.ReasonStreamStall {
		t.Errorf("reason %q, want stream-stall", got)
	}
	if s := r.sess("s1"); s.State != record.ResumePending {
		t.Fatalf("after the stall: %s, want resume_pending", s.State)
	}
}

// Traffic that names no session (Gemini CLI) is the session the agent's
// hooks named in this run: one session, not a phantom beside it.
func TestRuleTrafficInventedSession(t *testing.T) {
	r := newRig(t, taskConfig())
	r.launch()
	r.step(Traffic{Kind: TrafficTurnBegin, Session: "proxy-x", Invented: true})
	if r.sess("proxy-x") == nil {
		t.Fatal("with no hooks, traffic that names no session is the proxy's session")
	}
	r.killed(sigKILL)
	r2 := newRig(t, taskConfig())
	r2.launch()
	r2.begin("g1", "")
	r2.step(Traffic{Kind: TrafficTurnBegin, Session: "proxy-x", Invented: true})
	r2.step(Traffic{Kind: TrafficUsage, Session: "proxy-x", Invented: true, Input: 3, Output: 4})
	if r2.sess("proxy-x") != nil {
		t.Error("hooks named the session, yet the proxy opened one of its own")
	}
	if s := r2.sess("g1"); s.Tokens == nil || s.Tokens.Input != 3 {
		t.Errorf("the usage did not go to the hooks' session: %+v", s)
	}
}
