package machine

import (
	"time"

	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
)

// jitter is the random number the backoff's jitter draws from.
func (e Exited) jitter() float64 { return e.Random }

// decide applies the resume decisions for a death to the sessions and
// saves them for the death's commit, which follows in the same effects, so
// every decision is durable before the next child starts. It returns the
// decisions that changed a session.
func (b *Book) decide(o *out, d resume.Death, now time.Time, p resume.Policy, fingerprint bool) []resume.Decision {
	var open []record.Session
	for _, sess := range b.Sessions {
		if sess.State.Open() {
			open = append(open, *sess)
		}
	}
	var changed []resume.Decision
	var ids, breaker []string
	warm := false
	for _, dec := range resume.Decide(open, d, now, p) {
		if dec.Action == resume.Keep {
			continue
		}
		sess := dec.Session
		if dec.Action == resume.Park {
			o.add(Count{Metric: "park", Label: sess.ParkedBy})
			sess.Fingerprint = nil
			if sess.ParkedBy == record.ParkedByBreaker {
				breaker = append(breaker, sess.ID)
			}
		}
		if dec.Action == resume.Resume && p.Exhausted(sess.CrashCount+1) {
			warm = true // the next death parks it: hash the agent now
		}
		b.Sessions[sess.ID] = &sess
		ids = append(ids, sess.ID)
		changed = append(changed, resume.Decision{Action: dec.Action, Session: sess})
	}
	if len(ids) > 0 {
		o.save(ids...)
	}
	if fingerprint && (len(breaker) > 0 || warm) {
		o.add(StampFingerprint{IDs: breaker, Warm: warm && len(breaker) == 0})
	}
	return changed
}

// fingerprinted stamps the agent's fingerprint on sessions the breaker
// parked, so that a changed agent lifts the park once.
func (b *Book) fingerprinted(o *out, e Fingerprinted) {
	var ids []string
	for _, id := range e.IDs {
		if sess := b.Sessions[id]; sess != nil && sess.State == record.Parked && sess.ParkedBy == record.ParkedByBreaker {
			sess.Fingerprint = e.Fingerprint
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 {
		o.save(ids...)
	}
}

// maxDecisionLines bounds the per-session lines logged for one death: a
// death with 30 000 open sessions logs these and one summary line.
const maxDecisionLines = 20

// logDecisions says what was decided for each session, after the death
// that caused it has been logged and the crash-loop guard updated for it:
// a resume the guard (or --resume off, or the journal check) holds is said
// to be held (why: held), not to be resumed.
func logDecisions(o *out, decs []resume.Decision, held, stateDir string) {
	logged, rest := 0, map[resume.Action]int{}
	for _, dec := range decs {
		sess := dec.Session
		if logged == maxDecisionLines {
			rest[dec.Action]++
			continue
		}
		logged++
		switch dec.Action {
		case resume.Resume:
			if held != "" && !sess.Resume.Manual {
				o.warn("session interrupted mid-turn: it is owed a resume, held", "session", sess.ID, "turn", sess.Turn,
					"held", held, "crash_count", sess.CrashCount, "attempt", sess.Resume.Attempt, "phase", sess.Phase, "tool", sess.Tool, "detail", sess.Detail)
				break
			}
			o.warn("session interrupted mid-turn: it will be resumed", "session", sess.ID, "turn", sess.Turn,
				"crash_count", sess.CrashCount, "attempt", sess.Resume.Attempt, "phase", sess.Phase, "tool", sess.Tool, "detail", sess.Detail)
		case resume.Park:
			o.warn("session parked: it will not be resumed automatically", "session", sess.ID, "turn", sess.Turn,
				"crash_count", sess.CrashCount, "reason", sess.Reason, "resume_with", ResumeCommand(stateDir, sess.ID))
		case resume.Stop:
			o.info("session stopped mid-turn by the requested stop; not resumed automatically", "session", sess.ID,
				"turn", sess.Turn, "resume_with", ResumeCommand(stateDir, sess.ID))
		}
	}
	if len(rest) > 0 {
		o.warn("more sessions decided than logged one by one: see supervise status",
			"logged", logged, "resumed", rest[resume.Resume], "parked", rest[resume.Park], "stopped", rest[resume.Stop])
	}
}
