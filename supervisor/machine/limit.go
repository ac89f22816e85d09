package machine

import (
	"time"

	"github.com/supervise-dev/supervise/internal/exitcode"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
)

// A usage or rate limit that ends a run is not a crash (record.ReasonLimit,
// never dirty): neither the breaker, the crash-loop guard nor the backoff
// counts it. Each session that was mid-turn waits until its own reset
// (waiting, wait limit, a journaled retry_at, the continuation held in its
// Resume) and is resumed then, at most LimitConfig.Resumes times a turn,
// then parked (record.ParkedByLimit). One session's wait never holds
// another's resume. A person's `supervise resume` starts it sooner. With
// LimitConfig.Off, or a wait longer than LimitConfig.Max, a task ends with
// ExitTempFail and the reset.

// Limit is a limit an Exited run ended on, as the runner read it from the
// agent's last words (its stdout and stderr tails) or its hooks' error
// type: Reset is when it lifts, zero when none was named.
type Limit struct {
	Reset time.Time
	Line  string
	Usage bool
}

// LimitConfig is how limits are waited out.
type LimitConfig struct {
	// Resumes is --limit-resumes: resumes after a limit per turn (0:
	// DefaultLimitResumes).
	Resumes int
	// Off: a limit ends the task with ExitTempFail (--limit-wait off).
	Off bool
	// Max ends the task with ExitTempFail when the wait is longer
	// (--limit-wait D); 0: no maximum.
	Max time.Duration
}

// MaxWordsWait is the one cap on what the agent's words can make
// supervise wait: a limit's reset it names is believed up to this far
// ahead, and a retry it says it waits out itself holds the start and
// silence deadlines off only when it names no longer a wait. The words are
// the agent's, which runs commands a model wrote: they may delay, within
// this, and never lift or skip a park. The proxy caps a provider's
// retry-after the same.
const MaxWordsWait = 24 * time.Hour

// DefaultLimitResumes is --limit-resumes' default.
const DefaultLimitResumes = 5

// ExitTempFail is the exit code of a task ended by a limit it does not
// wait out (EX_TEMPFAIL).
const ExitTempFail = exitcode.TempFail

// Waits when a limit names no reset and the proxy saw none: DefaultLimitWait
// doubling with each resume after a limit in the turn, capped.
const (
	DefaultLimitWait    = 5 * time.Minute
	DefaultLimitWaitCap = time.Hour
	// limitJitterMax bounds the jitter added to a reset, so many sessions
	// (and many supervisors) do not call the API in the same second.
	limitJitterMax = 30 * time.Second
)

// limitResumes is the configured cap.
func (m *Machine) limitResumes() int {
	if m.Config.Limit.Resumes > 0 {
		return m.Config.Limit.Resumes
	}
	return DefaultLimitResumes
}

// limitSeen reports whether the run that ended with e ended on a limit:
// the agent's words said so (e.Limit), or a session was waiting on the
// model API when it exited (the proxy saw a 429/529, or the hooks said
// the turn stopped on a rate limit: Claude Code's StopFailure
// "rate_limit").
//
// The agent's words concern only the sessions that were mid-turn in the
// run (in_turn, waiting on the model API, or handed the run's resume):
// with none, the words change nothing and the death is what it is.
func (m *Machine) limitSeen(e Exited, run uint64) bool {
	words := false
	for _, id := range sortedKeys(m.open) {
		sess := m.Sessions[id]
		switch {
		case sess == nil:
		case sess.State == record.Waiting && sess.Wait == WaitReconnect:
			return true
		case sess.State == record.InTurn, sess.State == record.ResumePending && sess.Resume != nil && sess.Resume.Run == run && run != 0:
			words = true
		}
	}
	return words && e.Limit != nil
}

// limitReset is when session sess may be resumed after a limit: the
// limit's own reset, else the proxy's for it, else the default, plus the
// jitter drawn from rnd.
func (m *Machine) limitReset(sess *record.Session, lim *Limit, rnd float64, now time.Time) time.Time {
	var at time.Time
	switch {
	case lim != nil && lim.Reset.After(now):
		at = lim.Reset
		if cap := now.Add(MaxWordsWait); at.After(cap) {
			at = cap // the agent's words: believed up to the cap
		}
	case sess.RetryAt.After(now):
		at = sess.RetryAt
	default:
		d := DefaultLimitWait
		for i := 0; i < sess.Limits && d < DefaultLimitWaitCap; i++ {
			d *= 2
		}
		at = now.Add(min(d, DefaultLimitWaitCap))
	}
	j := min(at.Sub(now)/10, limitJitterMax)
	return at.Add(time.Duration(float64(j) * rnd))
}

// decideLimit applies a limit's death to the sessions: those mid-turn (or
// handed the run's resume) wait out the limit or are parked past the cap;
// the rest are decided as the death d is without the limit (the words
// concern only the sessions mid-turn: one waiting for a person is parked
// as at any dirty death).
func (m *Machine) decideLimit(o *out, e Exited, r record.Run, d resume.Death, now time.Time) []resume.Decision {
	var changed []resume.Decision
	var ids []string
	var rest []record.Session
	line := e.Said
	if e.Limit != nil && e.Limit.Line != "" {
		line = e.Limit.Line
	}
	for _, id := range m.sessionIDs() {
		sess := m.Sessions[id]
		if !sess.State.Open() {
			continue
		}
		d := resume.LimitDeath{Death: resume.Death{Reason: r.Reason, ExitCode: r.ExitCode, Signal: r.Signal, Run: r.Run, At: r.Ended},
			Reset: m.limitReset(sess, e.Limit, e.Random, now), Line: line, Max: m.limitResumes()}
		dec, ok := resume.Limited(*sess, d, now, m.Config.Resume)
		if !ok {
			rest = append(rest, *sess)
			continue
		}
		if dec.Action == resume.Park {
			o.add(Count{Metric: "park", Label: record.ParkedByLimit})
		}
		s := dec.Session
		m.Sessions[id] = &s
		ids = append(ids, id)
		changed = append(changed, dec)
	}
	for _, dec := range resume.Decide(rest, d, now, m.Config.Resume) {
		if dec.Action == resume.Keep {
			continue
		}
		if dec.Action == resume.Park {
			o.add(Count{Metric: "park", Label: dec.Session.ParkedBy})
		}
		s := dec.Session
		m.Sessions[s.ID] = &s
		ids = append(ids, s.ID)
		changed = append(changed, dec)
	}
	if len(ids) > 0 {
		o.save(ids...)
	}
	return changed
}

// limitsDue makes the sessions whose limit has reset resume_pending, and
// reports whether any did.
func (m *Machine) limitsDue(o *out, now time.Time) bool {
	var ids []string
	for _, sess := range m.limitWaiters() {
		if sess.State != record.Waiting {
			continue // owed a resume already: due by its retry_at alone
		}
		s, ok := resume.LimitDue(*sess, now)
		if !ok {
			break // soonest first
		}
		*sess = s
		ids = append(ids, s.ID)
		o.info("a session's limit has reset: it is resumed now", "session", s.ID, "turn", s.Turn, "limits", s.Limits)
	}
	if len(ids) == 0 {
		return false
	}
	o.save(ids...)
	o.add(Commit{Kind: CommitPending, Why: "recording limits that reset"})
	return true
}

// waitLimit arranges the wait for the soonest limit's reset when nothing
// else is owed a resume now, and reports whether it did. A task not to
// wait (Off, or past Max) ends with ExitTempFail instead.
func (m *Machine) waitLimit(o *out, now time.Time) bool {
	waiters := m.limitWaiters()
	if len(waiters) == 0 {
		return false
	}
	first := waiters[0]
	wait := max(first.RetryAt.Sub(now), 0)
	if m.Policy.Task && (m.Config.Limit.Off || (m.Config.Limit.Max > 0 && wait > m.Config.Limit.Max)) {
		var lines []string
		for _, sess := range waiters {
			lines = append(lines, "session "+sess.ID+" hit a usage or rate limit; it resets at "+sess.RetryAt.UTC().Format(time.RFC3339)+
				" (in "+wait.Round(time.Second).String()+")", "to continue it then: "+m.rerunCommand(sess.ID))
		}
		o.add(Report{Lines: lines})
		o.warn("task ended by a limit it does not wait out (--limit-wait)", "session", first.ID,
			"retry_at", first.RetryAt.UTC().Format(time.RFC3339), "exit_code", ExitTempFail)
		o.add(End{Code: ExitTempFail})
		return true
	}
	o.info("waiting out a limit: the session is resumed at its reset", "session", first.ID,
		"retry_at", first.RetryAt.UTC().Format(time.RFC3339), "wait", wait.Round(time.Second), "waiting", len(waiters))
	m.wait(o, wait, true)
	return true
}

// limitResumedByHand: a person resumed a session while the loop waited
// out a limit: the launch comes now.
func (m *Machine) limitResumedByHand(o *out) {
	if m.Phase() != PhaseLimitWait {
		return
	}
	m.on(onCut)
	o.add(Arm{Timer: TimerBackoff, Disarm: true}, Backoff{})
}
