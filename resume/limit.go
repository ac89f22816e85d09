package resume

import (
	"strconv"
	"time"

	"github.com/supervise-dev/supervise/record"
)

// A usage or rate limit that ends a turn is not a crash: the session waits
// until the limit's reset (waiting, wait limit, RetryAt) with the
// continuation that says a limit interrupted it, and is resumed then. The
// crash count is not touched; Session.Limits counts the resumes after a
// limit in the turn, and past the cap the session is parked
// (record.ParkedByLimit), so a limit that never lifts ends clearly.
//
//	session at a limit's death                         decision
//	in_turn, waiting for reconnect or a limit          waiting (limit) until retry_at, limits+1
//	resume_pending whose resume the run was handed     the same
//	the same, limits+1 > cap                           parked (limit)
//	waiting for a person, idle, parked, stopped, ...   as the death of the run's exit (Decide)

// LimitDeath is a run ended by a limit: Reset is when it lifts (the retry
// at which the session is resumed, jitter included), Line the agent's
// words of it ("" when unknown).
type LimitDeath struct {
	Death
	Reset time.Time
	Line  string
	// Max is --limit-resumes: how many resumes after a limit a turn gets.
	Max int
}

// Limited reports whether a limit death waits s out (true), and the
// decision for it; false leaves s to Decide.
func Limited(s record.Session, d LimitDeath, now time.Time, p Policy) (Decision, bool) {
	handed := s.State == record.ResumePending && s.Resume != nil && s.Resume.Run == d.Run && d.Run != 0
	open := s.State == record.InTurn || (s.State == record.Waiting && (s.Wait == "reconnect" || s.Wait == record.WaitLimit))
	if !open && !handed {
		return Decision{}, false
	}
	s.Updated = now
	s.Limits++
	how := describeLimit(d)
	if s.Limits > d.Max {
		return park(s, record.ParkedByLimit, "a usage or rate limit ended the turn again after "+strconv.Itoa(d.Max)+
			" resumes (--limit-resumes): "+how+"; the plan or the spend cap may not reset: resume it by hand once the limit allows"), true
	}
	s.State, s.Wait, s.RetryAt = record.Waiting, record.WaitLimit, d.Reset
	s.Reason = "waiting out a limit until " + d.Reset.UTC().Format(time.RFC3339) + ": " + how
	msg := LimitMessage(s, how, p.Template)
	s.Resume = &record.Resume{Attempt: s.Limits, Interrupted: d.Run, Reason: string(record.ReasonLimit), Since: now, Message: msg}
	return Decision{Resume, s}, true
}

// describeLimit words a limit's death, with the agent's words of it.
func describeLimit(d LimitDeath) string {
	r, _ := record.ReasonLimit.Row()
	how := r.How
	if d.Line != "" {
		how += `, the agent saying "` + d.Line + `"`
	}
	return how
}

// LimitMessage is the continuation of a session a limit interrupted: the
// built-in text, or the --resume-message template with {how}.
func LimitMessage(s record.Session, how, template string) string {
	if template != "" {
		return fill(template, s, how)
	}
	return continuation("[supervise: automatic continuation] Your previous turn in this session was interrupted: "+how+
		". supervise waited until the limit's reset and resumes the turn now.", s)
}

// LimitDue makes a session waiting out a limit whose retry_at has come
// resume_pending, with the continuation it holds; false when it is not due.
func LimitDue(s record.Session, now time.Time) (record.Session, bool) {
	if s.State != record.Waiting || s.Wait != record.WaitLimit || s.Resume == nil || now.Before(s.RetryAt) {
		return s, false
	}
	s.State, s.Wait, s.RetryAt = record.ResumePending, "", time.Time{}
	s.Updated = now
	return s, true
}
