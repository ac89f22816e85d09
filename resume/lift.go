package resume

import (
	"time"

	"github.com/supervise-dev/supervise/record"
)

// LiftReason is the reason a park lifted by a changed agent carries.
const LiftReason = "the agent changed since it was parked"

// Liftable reports whether s is parked at the consecutive-crash breaker
// under an agent whose fingerprint differs from sum: the upgrade that fixes
// a crash should resume the work that crash parked. Parks for a wait, a
// stale turn, an untaken resume or a requested stop never lift this way.
func Liftable(s record.Session, sum string) bool {
	return s.State == record.Parked && record.LiftedByFingerprint(s.ParkedBy) &&
		s.Fingerprint != nil && s.Fingerprint.Sum != "" && sum != "" && s.Fingerprint.Sum != sum
}

// Lift lifts the park of a Liftable session once: it becomes
// resume_pending with crash_count at p.Limit-1, so that one more death is
// resumed and the next parks it again, under the new fingerprint (see
// liftedCount), with the reason LiftReason. The fingerprint that parked it
// is dropped, so the same park never lifts twice.
func Lift(s record.Session, now time.Time, p Policy) record.Session {
	s.State = record.ResumePending
	s.CrashCount = liftedCount(p)
	s.Reason = LiftReason
	s.ParkedBy, s.Fingerprint = "", nil
	how := LiftReason + " (it had been parked after repeated dirty deaths mid-turn)"
	msg := message(s, how, p.Template)
	if p.Template == "" {
		msg = continuation("[supervise: automatic continuation] Your previous turn in this session was parked after the agent "+
			"died in it repeatedly; the agent has changed since (a new binary or configuration), so supervise resumes it once.", s)
	}
	s.Resume = &record.Resume{Attempt: s.CrashCount + 1, Reason: LiftReason, Message: msg, Since: now}
	s.Updated = now
	return s
}

// liftedCount is the crash count a lifted session restarts from: Limit-1,
// the count from which, by Exhausted, one more death (at Limit) is still
// resumed and the one after (at Limit+1) parks. With Limit 0, where every
// death mid-turn parks, it is 0 and the next death parks again.
func liftedCount(p Policy) int { return max(p.Limit-1, 0) }
