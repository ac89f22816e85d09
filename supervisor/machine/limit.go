package machine

import (
	"strings"
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

// MaxWordsWait is the one cap on a believed reset, whatever its source: a
// limit's reset the agent's words name, and a retry_at the proxy hands
// over (capReset), are believed up to this far ahead and waited only to
// it, which the session's reason and the log say; a retry the agent says
// it waits out itself holds the start and silence deadlines off only when
// it names no longer a wait (the CLI still runs: believing more would hold
// off the hang deadlines of a CLI that may be hung). The words are
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

// How a limit's reset was learned, said in the waiting session's reason,
// the log and the exit-75 report: the CLI's words, the model API's answer
// (through the proxy), or a guess.
const (
	resetSaidByCLI = "the reset was said by the CLI"
	resetSaidByAPI = "the reset was said by the model API"
	resetGuessed   = "no reset time was given: the wait is a guess"
)

// reset is when session sess may be resumed after a limit: the
// limit's own reset, else the proxy's for it, else the default, at most
// MaxWordsWait ahead, plus the jitter drawn from rnd; and how it was
// learned (a reset past the cap says so).
func (LimitConfig) reset(sess *record.Session, lim *Limit, rnd float64, now time.Time) (time.Time, string) {
	var at time.Time
	var how string
	switch {
	case lim != nil && lim.Reset.After(now):
		at, how = lim.Reset, resetSaidByCLI
	case sess.RetryAt.After(now):
		at, how = sess.RetryAt, resetSaidByAPI
	default:
		d := DefaultLimitWait
		for i := 0; i < sess.Limits && d < DefaultLimitWaitCap; i++ {
			d *= 2
		}
		d = min(d, DefaultLimitWaitCap)
		at, how = now.Add(d), resetGuessed+" ("+d.String()+")"
	}
	if c, cut := capReset(at, now); cut {
		how += ", " + at.Sub(now).Round(time.Minute).String() + " ahead, past supervise's cap (" + MaxWordsWait.String() + "): waited only to the cap"
		at = c
	}
	j := min(at.Sub(now)/10, limitJitterMax)
	return at.Add(time.Duration(float64(j) * rnd)), how
}

// capReset is the one cap on a believed reset, whatever its source (the
// agent's words, the proxy's retry_at): at most MaxWordsWait from now;
// true when at was past it.
func capReset(at, now time.Time) (time.Time, bool) {
	if c := now.Add(MaxWordsWait); at.After(c) {
		return c, true
	}
	return at, false
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
			resets := "it resets at "
			if strings.Contains(sess.Reason, resetGuessed) {
				resets = "no reset time was given; supervise guesses it resets at "
			}
			lines = append(lines, "session "+sess.ID+" hit a usage or rate limit; "+resets+sess.RetryAt.UTC().Format(time.RFC3339)+
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
