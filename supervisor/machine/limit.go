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

// resumes is the configured cap (--limit-resumes).
func (c LimitConfig) resumes() int {
	if c.Resumes > 0 {
		return c.Resumes
	}
	return DefaultLimitResumes
}

// reset is when session sess may be resumed after a limit: the
// limit's own reset, else the proxy's for it, else the default, plus the
// jitter drawn from rnd.
func (LimitConfig) reset(sess *record.Session, lim *Limit, rnd float64, now time.Time) time.Time {
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

// limitsDue makes the sessions whose limit has reset resume_pending, and
// reports whether any did.
func (b *Book) limitsDue(o *out, now time.Time, held bool) bool {
	var ids []string
	for _, sess := range b.waiters(held) {
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
				" (in "+wait.Round(time.Second).String()+")", "to continue it then: "+m.Config.rerunCommand(sess.ID))
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
