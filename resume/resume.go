// Package resume decides, per session, what follows the death of an agent
// process, and delivers the resumes to the next child.
//
// The decision half (Decide, Manual, Message) is pure: no goroutines, no
// I/O, now passed in. The rules are the table in docs/design.md:
//
//	session at death                                   decision
//	idle, closed (and a turn that ended cancelled)     nothing
//	waiting (approval or human input)                  parked: never auto-resumed
//	waiting for reconnect (retrying the model API)     as in_turn
//	in_turn/resume_pending, turn older than MaxAge     parked: stale
//	in_turn/resume_pending, crash_count+1 <= Limit     crash_count+1, resume_pending
//	in_turn/resume_pending, crash_count+1 >  Limit     crash_count+1, parked
//
// A stop supervise was asked for is not dirty: open turns become stopped,
// uncounted (a resume_pending session only if its resume was handed to the
// stopped run: one never handed over stays owed, it was not running). A
// resume_pending session counts a death only if its resume was handed to
// the run that died: a resume held back (crash-loop guard, resume off)
// cannot have caused the death. parked and stopped sessions stay as
// they are until a person resumes them (Manual). A clean exit changes
// nothing, except that a resume handed to the run and never taken (the
// agent did not report resumed: hooks not wired, no resume support) is
// parked rather than handed to every later run.
//
// The delivery half (WriteFile, ExecArgv) writes the resume file and builds
// the argv of a --resume-exec relaunch. No value becomes an option there:
// ExecArgv refuses (ErrOptionValue) a value, the message included, that
// would begin an argv word with '-' before a "--" word of the template, and
// the caller parks that session with the error as its reason.
package resume

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/supervise-dev/supervise/internal/signame"
	"github.com/supervise-dev/supervise/record"
)

// Policy is the resume policy.
type Policy struct {
	// Limit is how many consecutive dirty deaths mid-turn a session may
	// see and still be resumed automatically (--resume-limit, default 1).
	Limit int
	// MaxAge parks turns older than this instead of resuming them
	// (--max-turn-age, default 1h); 0 means no limit.
	MaxAge time.Duration
	// Template overrides the continuation message (--resume-message); ""
	// uses the built-in text. See Message for its placeholders.
	Template string
}

// Exhausted reports whether a session whose crash count, with the death
// just counted, is crashCount is over the limit: the crash breaker parks it
// instead of resuming it. It is the breaker's one boundary: at Limit the
// session is still resumed, at Limit+1 it is parked. A session resumed at
// crash count c is parked by its next death when Exhausted(c+1).
func (p Policy) Exhausted(crashCount int) bool { return crashCount > p.Limit }

// DefaultPolicy returns the documented defaults (the run flags' defaults).
func DefaultPolicy() Policy { return Policy{Limit: 1, MaxAge: time.Hour} }

// Death describes how the agent process died, as the decisions need it.
type Death struct {
	// Reason is the run's journal reason (record.ReasonSignal, ...).
	Reason record.Reason
	// Signal and ExitCode are the run's, for the message.
	Signal   int
	ExitCode int
	// Requested is true for a stop supervise was asked for: not dirty.
	Requested bool
	// Restart: the requested stop is a restart (supervise restart): what
	// it interrupts is handed to the next run as a person's resume.
	Restart bool
	// Clean is true for a clean exit nobody asked for (exit 0, no turn
	// open): not dirty, but a resume handed to that run and never taken
	// must not be handed over again and again.
	Clean bool
	// Run is the run that died; At is when.
	Run uint64
	At  time.Time
	// Said is the agent's own last words (a line of its stderr), "" when
	// unknown: quoted in the reason, never trusted for anything else.
	Said string
}

// Action is what happens to one session.
type Action int

const (
	// Keep leaves the session as it is.
	Keep Action = iota
	// Resume makes it resume_pending with a continuation.
	Resume
	// Park parks it: never resumed automatically, one command away.
	Park
	// Stop marks its open turn stopped by a requested stop.
	Stop
)

// Decision is the verdict for one session, with the session as it must be
// journaled (for Keep, unchanged).
type Decision struct {
	Action  Action
	Session record.Session
}

// Decide returns the decision for every session given, in session order.
// The caller commits the sessions of every non-Keep decision in one journal
// transaction before it starts the next child.
func Decide(sessions []record.Session, d Death, now time.Time, p Policy) []Decision {
	// Sort indices, not Decisions: a Decision holds a whole Session.
	order := make([]int, len(sessions))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(sessions[a].ID, sessions[b].ID) })
	how := describe(d) // the same words for every session
	out := make([]Decision, 0, len(sessions))
	for _, i := range order {
		out = append(out, decide(sessions[i], d, how, now, p))
	}
	return out
}

func decide(s record.Session, d Death, how string, now time.Time, p Policy) Decision {
	midTurn := s.State == record.InTurn || s.State == record.Waiting
	pending := s.State == record.ResumePending
	// handed: the session's resume was handed to the run that died, which
	// was resuming it.
	handed := pending && s.Resume != nil && s.Resume.Run == d.Run && d.Run != 0
	if s.State == record.Waiting && s.Wait == record.WaitLimit {
		return Decision{Keep, s} // waiting out a limit, not running: no death is its doing
	}
	if d.Clean {
		if handed {
			s.Updated = now
			return park(s, record.ParkedByUntaken, fmt.Sprintf("its resume was handed to run %d, which exited without taking it (the agent never reported resumed: are its hooks or resume support wired?)", d.Run))
		}
		return Decision{Keep, s}
	}
	if d.Requested {
		if !midTurn && !handed {
			// Not running: a resume never handed to the stopped run stays
			// owed; the stop did not interrupt it.
			return Decision{Keep, s}
		}
		if d.Restart {
			// A person restarted the agent: what it interrupted goes on in
			// the next run, a person's resume (never held, not counted).
			s.State, s.Wait, s.RetryAt = record.ResumePending, "", time.Time{}
			s.Reason = "interrupted by a requested restart"
			s.Resume = &record.Resume{Attempt: 1, Interrupted: d.Run, Reason: ReasonRestart, Since: now, Manual: true,
				Message: message(s, "the agent was restarted by a person (supervise restart)", p.Template)}
			s.Updated = now
			return Decision{Resume, s}
		}
		s.State = record.Stopped
		s.Reason = "stopped by a requested stop of supervise while mid-turn"
		if row, _ := d.Reason.Row(); !row.Requested {
			s.Reason += " (" + how + ")"
		}
		s.Resume = nil
		s.Updated = now
		return Decision{Stop, s}
	}
	switch {
	case pending && (s.Resume == nil || s.Resume.Run != d.Run):
		// Its resume was never handed to the run that died (held back, or
		// owed to a later run): this death is not the session's doing.
		return Decision{Keep, s}
	case !midTurn && !pending:
		return Decision{Keep, s} // idle, closed, parked, stopped
	}
	s.CrashCount++
	s.Updated = now
	switch {
	case s.State == record.Waiting && s.Wait == "reconnect":
		// Retrying the model API mid-turn: an outage, not a person. Counted
		// and resumed like in_turn (the checks below).
		s.State = record.InTurn
	}
	switch {
	case s.State == record.Waiting:
		return park(s, record.ParkedByWait, "was waiting for input (approval or a human answer) when the agent died: never resumed automatically")
	case p.MaxAge > 0 && !s.TurnStarted.IsZero() && now.Sub(s.TurnStarted) > p.MaxAge:
		return park(s, record.ParkedByStale, fmt.Sprintf("stale: the turn started %s ago, more than --max-turn-age %s", now.Sub(s.TurnStarted).Round(time.Second), p.MaxAge))
	case p.Exhausted(s.CrashCount):
		return park(s, record.ParkedByBreaker, "mid-turn at "+strconv.Itoa(s.CrashCount)+" consecutive dirty deaths ("+how+"): "+suspect(d))
	}
	s.State = record.ResumePending
	s.Reason = "interrupted: " + how
	s.Resume = &record.Resume{Attempt: s.CrashCount, Interrupted: d.Run, Reason: how, Since: now,
		Message: message(s, how, p.Template)}
	return Decision{Resume, s}
}

// park parks s, of kind by (record.Parks: who can lift it), for reason.
func park(s record.Session, by, reason string) Decision {
	s.State = record.Parked
	s.ParkedBy = by
	s.Reason = reason
	s.Resume = nil
	return Decision{Park, s}
}

// suspect says, by the death's cause, why the breaker parks rather than
// resumes again: only a cause the turn can have (a crash, memory, a hang)
// makes the turn a suspect. The words are the reason table's
// (record.ReasonRow.SuspectFor).
func suspect(d Death) string {
	r, ok := d.Reason.Row()
	if !ok {
		r, _ = record.ReasonExit.Row()
	}
	if d.Signal != 0 && !r.Suspect && r.SignalWorded {
		r, _ = record.ReasonSignal.Row() // a signal whatever the reason says
	}
	_, advice := r.AdviceFor(d.Signal, d.Said)
	return advice
}

// describe says how the process died, in words, with the agent's own
// last words when they are known.
func describe(d Death) string {
	how := describeCause(d)
	if d.Said != "" {
		how += `, saying "` + d.Said + `"`
	}
	return how
}

// describeCause words how the process died: the reason table's How, or,
// for a signal or an exit, its number.
func describeCause(d Death) string {
	if r, ok := d.Reason.Row(); ok && r.How != "" {
		return r.How
	}
	if d.Signal != 0 {
		return fmt.Sprintf("the agent was killed by signal %d (%s)", d.Signal, signalName(d.Signal))
	}
	return fmt.Sprintf("the agent exited with status %d", d.ExitCode)
}

// signalName names sig for the message (signame's table), "signal" when
// it has no name there.
func signalName(sig int) string {
	if name := signame.Name(sig); name != "" {
		return name
	}
	return "signal"
}

// message returns the continuation for s, how it died described: honest
// about what is known. The built-in text says the turn was interrupted
// and how, in which phase and tool, that work may already be done and a
// side effect's outcome is unknown, to check the current state before
// redoing anything, and then the original request excerpt. When the turn
// declared side effects done (X_SUPERVISE_EFFECT), it names them:
// "Already done (...): `k1`, `k2`." A template replaces it; its
// placeholders are {session} {turn} {how} {phase} {tool} {detail}
// {prompt} {effects}.
func message(s record.Session, how, template string) string {
	if template != "" {
		return fill(template, s, how)
	}
	lead := "[supervise: automatic continuation] Your previous turn in this session was interrupted: " + how
	switch {
	case s.Phase == "tool" && s.Tool != "" && s.Detail != "":
		lead += fmt.Sprintf(", while the tool %q was running %s", s.Tool, code(s.Detail))
	case s.Phase == "tool" && s.Tool != "":
		lead += fmt.Sprintf(", while the tool %q was running", s.Tool)
	case s.Phase == "tool" && s.Detail != "":
		lead += ", while a tool was running " + code(s.Detail)
	case s.Phase == "tool":
		lead += ", while a tool was running"
	case s.Phase == "model":
		lead += ", while waiting for the model"
	}
	return continuation(lead+".", s)
}

// code quotes a detail as Markdown inline code in single backticks, or in
// double ones padded with spaces when the detail holds a backtick.
func code(s string) string {
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// continuation is the honest part every continuation shares, after its
// first sentence: work may be done, a side effect's outcome is unknown,
// check before redoing, then the request excerpt.
func continuation(lead string, s record.Session) string {
	var b strings.Builder
	b.WriteString(lead)
	if len(s.Effects) > 0 {
		b.WriteString(" Already done (side effects this turn declared completed; do not do them again): ")
		b.WriteString(effectList(s.Effects))
		b.WriteString(".")
	}
	b.WriteString(" Some of the work may already be done, and the outcome of any tool call that was in flight is unknown: ")
	b.WriteString("check the current state before redoing anything, and do not repeat a side effect that already happened. Then finish the task.")
	if s.Prompt != "" {
		b.WriteString(" The interrupted request was:\n\n")
		b.WriteString(s.Prompt)
	}
	return b.String()
}

// MessageEffects is how many effect keys a continuation message names;
// the resume file's "effects" has them all (record.MaxEffects).
const MessageEffects = 16

// effectList names keys for a message, each as inline code, at most
// MessageEffects of them.
func effectList(keys []string) string {
	var parts []string
	for i, k := range keys {
		if i == MessageEffects {
			parts = append(parts, fmt.Sprintf("and %d more (the resume file's \"effects\" lists them)", len(keys)-i))
			break
		}
		parts = append(parts, code(k))
	}
	return strings.Join(parts, ", ")
}

// messagePlaceholders are the placeholders of a --resume-message template.
var messagePlaceholders = []string{"{session}", "{turn}", "{how}", "{phase}", "{tool}", "{detail}", "{prompt}", "{effects}"}

// CheckMessage refuses a --resume-message template with an unknown {name}
// (a typo such as {promt}), which would reach the model as literal text in
// place of what it meant.
func CheckMessage(template string) error {
	if name := unknownPlaceholder(template, messagePlaceholders); name != "" {
		return fmt.Errorf("unknown placeholder %s (the known ones are %s): the model would get it as it is", name, strings.Join(messagePlaceholders, " "))
	}
	return nil
}

// fill applies a --resume-message template.
func fill(template string, s record.Session, how string) string {
	effects := ""
	if len(s.Effects) > 0 {
		effects = effectList(s.Effects)
	}
	return strings.NewReplacer("{session}", s.ID, "{turn}", s.Turn, "{how}", how,
		"{phase}", s.Phase, "{tool}", s.Tool, "{detail}", s.Detail, "{prompt}", s.Prompt,
		"{effects}", effects).Replace(template)
}

// Errors of Manual.
var (
	// ErrNotResumable means the session has no interrupted turn to resume.
	ErrNotResumable = errors.New("session has no interrupted turn to resume")
)

// ReasonRestart is the reason of a resume a restart handed to the next run
// (Manual: a person asked for the restart).
const ReasonRestart = "restart"

// ReasonManual is the reason of a resume a person asked for (Manual), in
// the journal and in the resume file's "reason".
const ReasonManual = "manual resume"

// Manual applies `supervise resume`: a parked, stopped or pending session
// is made resume_pending by a person's decision, with its crash count reset
// (docs/design.md: the count resets on a manual resume), and, parked for
// its token budget, with the budget counted again from what it spent
// (record.Tokens.Lifted). Such a resume is dispatched
// even while the crash-loop guard holds automatic ones.
func Manual(s record.Session, now time.Time, template string) (record.Session, error) {
	switch s.State {
	case record.Parked, record.Stopped, record.ResumePending:
	case record.Waiting:
		if s.Wait != record.WaitLimit {
			return s, fmt.Errorf("%w: %s is %s", ErrNotResumable, s.ID, s.State)
		}
		// A person starts a limit's wait sooner.
		s.RetryAt, s.Wait = time.Time{}, ""
	default:
		return s, fmt.Errorf("%w: %s is %s", ErrNotResumable, s.ID, s.State)
	}
	why := s.Reason
	if why == "" {
		why = string(s.State)
	}
	msg := manualMessage(s, why, template)
	if s.ParkedBy == record.ParkedByBudget && s.Tokens != nil && s.State == record.Parked {
		// A person lifts a budget's park: the budget counts again from
		// what the session has spent.
		t := *s.Tokens
		t.Lifted = t.Used()
		s.Tokens = &t
	}
	s.State = record.ResumePending
	s.CrashCount, s.Limits = 0, 0
	s.Reason = "resumed by hand (was: " + why + ")"
	s.Resume = &record.Resume{Attempt: 1, Reason: ReasonManual, Message: msg, Since: now, Manual: true}
	s.Updated = now
	return s, nil
}

func manualMessage(s record.Session, why, template string) string {
	if template != "" {
		return fill(template, s, why)
	}
	return continuation("[supervise: resumed by hand] Your previous turn in this session did not finish ("+why+
		"). A person asked to continue it.", s)
}
