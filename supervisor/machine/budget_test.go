package machine

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/record"
)

// Token sums saturate: usage of 2^62 twice, or 2^63-1 and one more, is
// past any budget, never wrapped small or negative; the session is parked.
func TestRuleBudgetSaturates(t *testing.T) {
	for _, c := range []struct {
		name string
		adds [][2]int64
	}{
		{"2^62 twice", [][2]int64{{1 << 62, 0}, {1 << 62, 0}}},
		{"2^62 in and out", [][2]int64{{1 << 62, 1 << 62}}},
		{"2^63-1 and one cached", [][2]int64{{math.MaxInt64, 0}, {1, 0}}},
		{"2^63-1 both", [][2]int64{{math.MaxInt64, math.MaxInt64}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.MaxTokens, cfg.MaxTokensTotal = 1000, 5000
			r := newRig(t, cfg)
			r.launch()
			r.step(Traffic{Kind: TrafficTurnBegin, Session: "s1"})
			for _, a := range c.adds {
				r.step(Traffic{Kind: TrafficUsage, Session: "s1", Input: a[0], Output: a[1]})
			}
			s := r.sess("s1")
			if s.State != record.Parked || s.ParkedBy != record.ParkedByBudget {
				t.Fatalf("%+v, want parked for its budget", s)
			}
			if s.Tokens.Input < 0 || s.Tokens.Output < 0 || s.Tokens.Used() != math.MaxInt64 && s.Tokens.Used() < 1<<62 {
				t.Errorf("tokens %+v wrapped", *s.Tokens)
			}
			if r.m.Budget.Spent < 1<<62 {
				t.Errorf("state dir spend %d wrapped", r.m.Budget.Spent)
			}
			if _, refused := r.m.Refusal("s1"); !refused {
				t.Error("the parked session's model calls are forwarded")
			}
		})
	}
}

// A negative count is ignored, and said once.
func TestRuleBudgetNegativeUsage(t *testing.T) {
	cfg := testConfig()
	cfg.MaxTokens = 1000
	r := newRig(t, cfg)
	r.launch()
	r.step(Traffic{Kind: TrafficTurnBegin, Session: "s1"})
	fx := r.step(Traffic{Kind: TrafficUsage, Session: "s1", Input: -1 << 62, Output: 10})
	fx2 := r.step(Traffic{Kind: TrafficUsage, Session: "s1", Input: -5, Output: -5})
	if !logged(fx, "negative token count") || logged(fx2, "negative token count") {
		t.Error("a negative count is not said exactly once")
	}
	if s := r.sess("s1"); s.Tokens.Input != 0 || s.Tokens.Output != 10 || s.State != record.InTurn {
		t.Errorf("%+v %+v", s, *s.Tokens)
	}
}

// The state dir's budget spans sessions: a new session id does not reset
// it; past it every model call is refused, the session whose answer spent
// it is parked, and a person's resume of that session lifts it.
func TestRuleBudgetTotal(t *testing.T) {
	cfg := testConfig()
	cfg.MaxTokensTotal = 100
	r := newRig(t, cfg)
	r.launch()
	for i, id := range []string{"a", "b", "c"} {
		r.step(Traffic{Kind: TrafficTurnBegin, Session: id})
		fx := r.step(Traffic{Kind: TrafficUsage, Session: id, Input: 30, Output: 10})
		if i < 2 {
			if _, refused := r.m.Refusal("new"); refused || r.sess(id).State != record.InTurn {
				t.Fatalf("after %d tokens: %+v refused %v", 40*(i+1), r.sess(id), refused)
			}
			continue
		}
		if _, ok := find[Save](fx); !ok {
			t.Fatal("no save")
		}
	}
	if s := r.sess("c"); s.State != record.Parked || !strings.Contains(s.Reason, "--max-tokens-total 100") {
		t.Fatalf("c = %+v, want parked for the state dir's budget", s)
	}
	if r.m.Abort == nil || r.m.Abort.Reason != record.ReasonTokenBudget {
		t.Fatalf("the agent is not stopped: %+v", r.m.Abort)
	}
	msg, refused := r.m.Refusal("brand-new")
	if !refused || !strings.Contains(msg, "--max-tokens-total 100") || !strings.Contains(msg, "supervise resume --state-dir /state c") {
		t.Fatalf("a new session's call: %q %v", msg, refused)
	}
	// It survives a restart of supervise: the spend is journaled.
	nextOf(t, r.die(time.Second, 143, 15))
	m2 := New(cfg)
	var kept []record.Session
	for _, s := range r.m.Sessions {
		kept = append(kept, *s)
	}
	m2.Step(Booted{NextRun: 5, Sessions: kept, Budget: r.m.Budget}, r.now)
	if _, refused := m2.Refusal("another"); !refused {
		t.Fatal("the spent budget was forgotten across a restart")
	}
	if got := m2.RefusedSessions(); len(got) != 1 || got[0] != "c" {
		t.Errorf("RefusedSessions = %v", got)
	}
	fx := m2.Step(ManualResume{ID: "c"}, r.now)
	if _, ok := find[Reply](fx); !ok || m2.Sessions["c"].State != record.ResumePending {
		t.Fatalf("manual resume: %#v", fx)
	}
	if _, refused := m2.Refusal("another"); refused || m2.TotalSpent() {
		t.Error("a person's resume did not lift the spent budget")
	}
	if saved := all[Save](fx); !func() bool {
		for _, s := range saved {
			if s.Policy {
				return true
			}
		}
		return false
	}() {
		t.Error("the lift is not journaled")
	}
}

// --max-tokens: a relaunch or a new turn in the parked session does not
// reset it; a person's resume does, counting from what was spent.
func TestRuleBudgetHolds(t *testing.T) {
	cfg := testConfig()
	cfg.MaxTokens = 1000
	r := newRig(t, cfg)
	r.launch()
	r.step(Traffic{Kind: TrafficTurnBegin, Session: "s1"})
	r.step(Traffic{Kind: TrafficUsage, Session: "s1", Input: 900, Output: 200})
	if r.sess("s1").State != record.Parked {
		t.Fatal("not parked")
	}
	for range 10 {
		nextOf(t, r.die(time.Second, 1, 0))
		r.advance(time.Minute)
		r.launch()
		r.step(Traffic{Kind: TrafficTurnBegin, Session: "s1"})
		r.begin("s1", "t-new")
		msg, refused := r.m.Refusal("s1")
		if s := r.sess("s1"); s.State != record.Parked || !refused {
			t.Fatalf("after a relaunch: %+v refused %v", s, refused)
		}
		if !strings.Contains(msg, "--max-tokens 1000") || !strings.Contains(msg, "supervise resume --state-dir /state s1") {
			t.Fatalf("refusal message %q", msg)
		}
	}
	r.step(ManualResume{ID: "s1"})
	if _, refused := r.m.Refusal("s1"); refused {
		t.Fatal("still refused after a person's resume")
	}
	r.step(Traffic{Kind: TrafficUsage, Session: "s1", Input: 500, Output: 0})
	if s := r.sess("s1"); s.State != record.ResumePending {
		t.Fatalf("the lifted budget counted the old spend: %+v %+v", s, *s.Tokens)
	}
	r.step(Traffic{Kind: TrafficUsage, Session: "s1", Input: 501, Output: 0})
	if s := r.sess("s1"); s.State != record.Parked {
		t.Fatalf("past the budget again: %+v", s)
	}
}

// Found by the simulation (seed 1796168966995440223): an answer already under way when the breaker
// parked its session reports usage past --max-tokens. The session is
// parked for its budget from then on: its model calls are refused, and no
// changed agent lifts it.
func TestRuleBudgetPastWhileParked(t *testing.T) {
	cfg := testConfig()
	cfg.MaxTokens, cfg.Fingerprint = 1000, true
	r := breakerParked(t, cfg)
	r.step(Traffic{Kind: TrafficUsage, Session: "s1", Input: 1 << 62, Output: 1})
	s := r.sess("s1")
	if s.State != record.Parked || s.ParkedBy != record.ParkedByBudget || s.Fingerprint != nil {
		t.Fatalf("%+v, want parked for its budget", s)
	}
	if _, refused := r.m.Refusal("s1"); !refused {
		t.Fatal("its model calls are forwarded")
	}
	if r.m.Abort != nil {
		t.Error("the agent is stopped for a session that was parked already")
	}
}

// Found by the simulation (seed 1): a session a --resume-exec template cannot take
// is parked, and that park is committed before what follows the death.
func TestRuleTemplateParkCommitted(t *testing.T) {
	r := newRig(t, taskConfig())
	r.launch()
	r.begin("-x", "t1")
	fx := r.killed(9)
	if s := r.sess("-x"); s.State != record.Parked {
		t.Fatalf("%+v", s)
	}
	saved := false
	for _, e := range fx {
		switch e := e.(type) {
		case Save:
			for _, id := range e.IDs {
				saved = saved || (id == "-x" && r.sess("-x").State == record.Parked)
			}
		case Commit:
			saved = false
		case End, Backoff:
			if saved {
				t.Fatalf("the template's park is not committed before %T: %#v", e, fx)
			}
		}
	}
}

// Usage of a session no request opened (a side request under an id of
// its own, an agent that never offers tools) still counts against the
// state dir's budget: past it every model call is refused.
func TestRuleBudgetTotalCountsUnopened(t *testing.T) {
	cfg := testConfig()
	cfg.MaxTokensTotal = 100
	r := newRig(t, cfg)
	r.launch()
	for i := range 3 {
		r.step(Traffic{Kind: TrafficUsage, Session: fmt.Sprintf("side-%d", i), Input: 30, Output: 10})
	}
	if _, refused := r.m.Refusal("any"); !refused || !r.m.TotalSpent() {
		t.Fatalf("120 tokens of unopened sessions under --max-tokens-total 100: refused %v spent %v (budget %+v)",
			refused, r.m.TotalSpent(), r.m.Budget)
	}
	if len(r.m.Sessions) != 0 {
		t.Errorf("sessions made for usage alone: %v", r.m.Sessions)
	}
}
