package machine

import (
	"strconv"

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

// lostReason begins the reason of a session whose conversation is lost.
const lostReason = "its conversation is lost: asked to resume it, the CLI said "

// lostConversation handles, before the death's decisions, a --resume-exec
// launch that exited by itself before any marker, with the CLI saying the
// conversation is unknown. The session handed to it is taken out of the
// decisions: its resume can never work, and the death is not the turn's
// doing. It reports whether it handled one.
func (m *Machine) lostConversation(o *out, e Exited, r record.Run) bool {
	if !m.Policy.LostConversations || !r.Dirty || r.Reason != record.ReasonExit || m.Task.runMarkers || !e.Lost {
		return false
	}
	var sess *record.Session
	for _, id := range m.sessionIDs() {
		if s := m.Sessions[id]; s.State == record.ResumePending && s.Resume != nil && s.Resume.Run == r.Run {
			sess = s // --resume-exec hands one session to a run
			break
		}
	}
	if sess == nil {
		return false
	}
	said := strconv.Quote(e.Said) + " (exit status " + strconv.Itoa(r.ExitCode) + ")"
	sess.Resume = nil
	lostWhy := lostReason + said
	if sess.ToolRan || m.Task.reran {
		why := "a tool had run in the interrupted turn, so the task is not started again by itself"
		if !sess.ToolRan {
			why = "the task was already started again once for a lost conversation"
		}
		sess.State, sess.ParkedBy = record.Parked, record.ParkedByLost
		sess.Reason = lostWhy + "; " + why
		o.save(sess.ID)
		o.add(Count{Metric: "park", Label: record.ParkedByLost})
		o.warn("session parked: the CLI cannot resume its conversation, and "+why, "session", sess.ID,
			"turn", sess.Turn, "cli_said", e.Said, "exit_code", r.ExitCode)
		return true
	}
	sess.State = record.Closed
	sess.Reason = lostWhy + "; nothing had run in the interrupted turn, so the task was started again as a new session"
	m.Task.reran, m.Task.rerunDue, m.Task.inherit = true, true, sess.CrashCount
	o.save(sess.ID)
	o.warn("the CLI cannot resume the session: its conversation was lost before any tool ran; starting the task again once, as a new session",
		"session", sess.ID, "turn", sess.Turn, "cli_said", e.Said, "exit_code", r.ExitCode, "crash_count", sess.CrashCount)
	return true
}

// inheritRerun gives the first session that begins a turn after the task
// was started again for a lost conversation that conversation's crash
// count: the rerun stands in for its resume.
func (m *Machine) inheritRerun(o *out, sess *record.Session, msg marker.Message) {
	if m.Task.inherit == 0 || msg.Event != marker.EventTurnBegin || sess.State.Open() {
		return
	}
	// Never lower: a session that already counts more consecutive dirty
	// deaths keeps its own count (the breaker must not be reset by a rerun).
	sess.CrashCount, m.Task.inherit = max(sess.CrashCount, m.Task.inherit), 0
	o.info("the task's new session stands in for the lost one's resume: it takes its crash count",
		"session", sess.ID, "crash_count", sess.CrashCount)
}

// taskSeenBefore reports whether a session of this task command is known
// (from this or an earlier invocation): its hooks are wired.
func (m *Machine) taskSeenBefore() bool {
	for _, sess := range m.Sessions {
		if sess.Task == m.Config.Task.ID && m.Config.Task.ID != "" {
			return true
		}
	}
	return false
}
