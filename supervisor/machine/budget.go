package machine

import (
	"strconv"
	"time"

	"github.com/supervise-dev/supervise/record"
)

// Token budgets (--max-tokens per session, --max-tokens-total for the
// state dir). The API proxy counts the usage each answer reports
// (TrafficUsage); past a budget the session is parked (ParkedBy budget),
// the agent is stopped, and the proxy answers the session's model calls
// itself, never forwarding them (Refusal): a relaunch or a new turn resets
// neither spend; a new session id starts its own --max-tokens at 0 but
// never resets --max-tokens-total, which counts every answer, a session's
// no request opened included. Only a person lifts it: a manual
// resume of the parked session counts its budget again from what it has
// spent, and, when the state dir's budget is spent, that one's too.

// Budget is the state dir's token spend: every session's usage, across
// runs and restarts of supervise (journaled with the policy state).
type Budget struct {
	// Spent is the tokens every answer reported, saturating.
	Spent int64 `json:"spent"`
	// Lifted is Spent when a person last lifted the spent budget:
	// --max-tokens-total counts from there.
	Lifted int64 `json:"lifted,omitempty"`
	// Parked is the session parked when the budget ran out: the one a
	// person resumes to lift it.
	Parked string `json:"parked,omitempty"`
}

// Since is what counts against --max-tokens-total: Spent since Lifted.
func (b Budget) Since() int64 { return max(b.Spent-max(b.Lifted, 0), 0) }

// Over reports whether the budget limit (0: none) is spent.
func (b Budget) Over(limit int64) bool { return limit > 0 && b.Since() > limit }

// clean drops what a damaged or hostile record could hold: negative counts.
func (b Budget) clean() Budget {
	b.Spent, b.Lifted = max(b.Spent, 0), min(max(b.Lifted, 0), max(b.Spent, 0))
	return b
}

// overBudget reports whether sess's own spend is past --max-tokens.
func (c *Config) overBudget(sess *record.Session) bool {
	return c.MaxTokens > 0 && sess.Tokens != nil && sess.Tokens.Spent() > c.MaxTokens
}

// Refusal says whether a model call of session id must not be forwarded,
// and the message the proxy answers it with instead: the session is parked
// for its budget, or the state dir's budget is spent. It reads only the
// machine's state: the runner publishes what it answers after each step
// that changes it (RefusalsChanged).
func (m *Machine) Refusal(id string) (string, bool) {
	if m.budgetParked[id] {
		sess := m.Sessions[id]
		used := int64(0)
		if sess != nil && sess.Tokens != nil {
			used = sess.Tokens.Spent()
		}
		return "supervise: session " + id + " is over its token budget (--max-tokens " +
			strconv.FormatInt(m.Config.MaxTokens, 10) + ", " + strconv.FormatInt(used, 10) +
			" tokens used): no more model calls are forwarded. A person lifts it with: " +
			ResumeCommand(m.Config.StateDir, id), true
	}
	if msg := m.TotalRefusal(); msg != "" {
		return msg, true
	}
	return "", false
}

// TotalRefusal is the message every model call is answered with while the
// state dir's budget is spent, "" while it is not.
func (b *Budgets) TotalRefusal() string {
	if b.Budget.Over(b.maxTotal) {
		lift := "supervise resume --state-dir " + ShellQuote(b.stateDir) + " SESSION (a session parked for the budget)"
		if b.Budget.Parked != "" {
			lift = ResumeCommand(b.stateDir, b.Budget.Parked)
		}
		return "supervise: the token budget of this state dir is spent (--max-tokens-total " +
			strconv.FormatInt(b.maxTotal, 10) + ", " + strconv.FormatInt(b.Budget.Since(), 10) +
			" tokens used): no more model calls are forwarded. A person lifts it with: " + lift
	}
	return ""
}

// TotalSpent reports whether --max-tokens-total is spent.
func (b *Budgets) TotalSpent() bool { return b.Budget.Over(b.maxTotal) }

// Budgets is the token budgets' part: the state dir's spend, and the
// sessions parked for a budget, whose model calls the proxy answers itself
// (Refusal).
type Budgets struct {
	// Budget is the state dir's token spend, journaled with the policy
	// state (Save{Policy: true}).
	Budget Budget
	// budgetParked holds the sessions parked for a token budget, kept
	// like the open index.
	budgetParked map[string]bool
	// RefusalsChanged counts the changes of what Refusal answers: the
	// runner republishes its snapshot for the proxy when it moves.
	RefusalsChanged uint64
	badUsageSaid    bool
	// maxTotal is --max-tokens-total; stateDir names the state dir in
	// the refusal's words. Set by New.
	maxTotal int64
	stateDir string
}

// track keeps the set of budget parks for a session a step saved.
func (b *Budgets) track(id string, sess *record.Session) {
	parked := sess != nil && sess.State == record.Parked && sess.ParkedBy == record.ParkedByBudget
	if parked == b.budgetParked[id] {
		return
	}
	b.RefusalsChanged++
	if !parked {
		delete(b.budgetParked, id)
		return
	}
	if b.budgetParked == nil {
		b.budgetParked = map[string]bool{}
	}
	b.budgetParked[id] = true
}

// RefusedSessions lists the sessions parked for a token budget.
func (b *Budgets) RefusedSessions() []string { return sortedKeys(b.budgetParked) }

// usage adds the tokens an answer reported to its session and to the
// state dir's spend, saturating; a negative count is ignored (and said
// once). A session past --max-tokens, or whose answer spends the state
// dir's budget, is parked and the agent stopped: never auto-resumed.
func (m *Machine) usage(o *out, e Traffic, now time.Time) {
	if e.Input < 0 || e.Output < 0 {
		if !m.badUsageSaid {
			m.badUsageSaid = true
			o.warn("the model API reported a negative token count: ignored", "session", e.Session,
				"input", e.Input, "output", e.Output)
		}
		e.Input, e.Output = max(e.Input, 0), max(e.Output, 0)
	}
	// The state dir's spend counts every answer, also one of a session
	// no request opened (a side request under an id of its own): an agent
	// that never offers tools, or mints ids, spends nothing uncounted.
	o.add(Count{Metric: "tokens_input", N: countN(e.Input)}, Count{Metric: "tokens_output", N: countN(e.Output)})
	wasOver := m.TotalSpent()
	m.Budget.Spent = record.AddTokens(record.AddTokens(m.Budget.Spent, e.Input), e.Output)
	if m.Config.MaxTokensTotal > 0 {
		o.savePolicy()
	}
	if m.TotalSpent() != wasOver {
		m.RefusalsChanged++
	}
	sess := m.Sessions[e.Session]
	if sess == nil {
		if e.Stored == nil {
			return // no session to add it to, nor to park: the total has it
		}
		s := *e.Stored
		sess = &s
		m.Sessions[s.ID] = sess
	}
	t := record.Tokens{}
	if sess.Tokens != nil {
		t = *sess.Tokens
	}
	t.Input, t.Output = record.AddTokens(t.Input, e.Input), record.AddTokens(t.Output, e.Output)
	sess.Tokens = &t
	o.save(sess.ID)
	wasParked := sess.State == record.Parked
	if wasParked && sess.ParkedBy == record.ParkedByBudget {
		return
	}
	var reason string
	switch {
	case m.Config.overBudget(sess):
		reason = "over its token budget: " + strconv.FormatInt(t.Spent(), 10) + " tokens used (" +
			strconv.FormatInt(t.Input, 10) + " in, " + strconv.FormatInt(t.Output, 10) + " out), --max-tokens " +
			strconv.FormatInt(m.Config.MaxTokens, 10) + ": never resumed automatically"
	case m.TotalSpent():
		reason = "the state dir's token budget is spent: " + strconv.FormatInt(m.Budget.Since(), 10) +
			" tokens used by all sessions, --max-tokens-total " + strconv.FormatInt(m.Config.MaxTokensTotal, 10) +
			": never resumed automatically"
		if !wasOver || m.Budget.Parked == "" {
			m.Budget.Parked = sess.ID
		}
	default:
		return
	}
	// A session parked for another reason (the breaker) that goes past a
	// budget is parked for the budget from now on: no changed agent lifts
	// it, and its model calls are refused.
	sess.State, sess.ParkedBy, sess.Resume, sess.Fingerprint = record.Parked, record.ParkedByBudget, nil, nil
	sess.Reason = reason
	m.Task.touch(sess.ID)
	o.add(Commit{Kind: CommitPending, Why: "recording a park for the token budget"})
	if wasParked {
		return
	}
	o.add(Count{Metric: "park", Label: record.ParkedByBudget})
	if m.Stop == nil && m.Abort == nil {
		m.trip(o, guardBudget, "", now, "session", sess.ID, "tokens", t.Spent(), "max_tokens", m.Config.MaxTokens,
			"tokens_total", m.Budget.Since(), "max_tokens_total", m.Config.MaxTokensTotal)
	}
}

// countN is a token count as a counter's increment, bounded so that a
// hostile count cannot wrap the metric.
func countN(n int64) int { return int(min(max(n, 0), 1<<40)) }

// Lift is the budget after a person lifted it: --max-tokens-total counts
// again from what all sessions have spent.
func (b Budget) Lift() Budget {
	b.Lifted, b.Parked = b.Spent, ""
	return b
}

// LiftsBudget reports whether a person's resume of sess (as it was before)
// lifts the state dir's budget even where its limit is unknown (offline):
// the session is parked for a budget.
func LiftsBudget(sess record.Session) bool {
	return sess.State == record.Parked && sess.ParkedBy == record.ParkedByBudget
}

// liftBudget applies a person's resume to the state dir's budget (the
// session's own is resume.Manual's): a spent budget, whichever session the
// person resumes, or any resume of a session parked for a budget, counts
// it again from what all have spent.
func (b *Budgets) liftBudget(o *out, before record.Session) {
	if !b.TotalSpent() && (!LiftsBudget(before) || b.Budget.Lifted == b.Budget.Spent) {
		return
	}
	if b.maxTotal > 0 {
		o.info("the state dir's token budget lifted by hand: --max-tokens-total counts again from now",
			"session", before.ID, "tokens_total", b.Budget.Spent)
	}
	b.Budget = b.Budget.Lift()
	b.RefusalsChanged++
	o.savePolicy()
}
