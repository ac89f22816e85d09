package machine

import (
	"strings"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
)

// A one-shot CLI asked to resume a conversation it does not have exits at
// once, saying so: Claude Code writes its transcript lazily and has none
// for a conversation killed in its first moments; Gemini CLI has none
// after an API error ended its first request; Codex has no rollout for a
// thread it never started. Resuming it again cannot work. When nothing ran
// in the interrupted turn (no tool phase, no declared effect), the task is
// started again once, as a new session, and the new session takes the
// lost one's crash count; when something ran, the session is parked with
// the CLI's own words and both ways on.

// In interactive mode a lost conversation never parks (death.lostAnew):
// the CLI is started again as a new conversation and the person told.

// lostReason begins the reason of a session whose conversation is lost.
const lostReason = "its conversation is lost: asked to resume it, the CLI said "

// lostAnewWords end the reason of an interactive session whose
// conversation was lost.
const lostAnewWords = "it was lost before the CLI saved it: the CLI was started again as a new conversation, which does not continue the interrupted turn"

// KnownLost reports whether sess's conversation is known lost: the CLI,
// asked to resume it, said it has none. A resume command for it cannot
// work: what tells a person of it (a start notice, a park line) must not
// offer one (a task's parked lost session offers --rerun-task first).
func KnownLost(sess record.Session) bool {
	return (sess.State == record.Closed || sess.State == record.Parked) && LostReason(sess.Reason)
}

// LostReason reports whether a session's reason says its conversation is
// lost (for a view that holds the reason, not the session).
func LostReason(reason string) bool { return strings.HasPrefix(reason, lostReason) }

// inheritRerun gives the first session that begins a turn after the task
// was started again for a lost conversation that conversation's crash
// count: the rerun stands in for its resume.
func (t *TaskState) inheritRerun(o *out, sess *record.Session, msg marker.Message) {
	if t.inherit == 0 || msg.Event != marker.EventTurnBegin || sess.State.Open() {
		return
	}
	// Never lower: a session that already counts more consecutive dirty
	// deaths keeps its own count (the breaker must not be reset by a rerun).
	sess.CrashCount, t.inherit = max(sess.CrashCount, t.inherit), 0
	o.info("the task's new session stands in for the lost one's resume: it takes its crash count",
		"session", sess.ID, "crash_count", sess.CrashCount)
}

// taskSeenBefore reports whether a session of this task command is known
// (from this or an earlier invocation): its hooks are wired.
func (b *Book) taskSeenBefore(task string) bool {
	for _, sess := range b.Sessions {
		if sess.Task == task && task != "" {
			return true
		}
	}
	return false
}
