package machine

import (
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
)

// MaxSessions bounds the sessions held in memory and the heartbeats
// buffered for them, so a misbehaving agent cannot grow the supervisor
// without bound. Settled sessions are evicted long before (KeptSettled),
// and pruned from the journal by --keep-sessions, so only open sessions
// count towards it in practice. Past it a new session's marker is refused,
// logged (rate-limited) and its sender's next barrier answers '0'.
const MaxSessions = 100_000

// KeptSettled is how many sessions memory holds before settled ones (idle
// or closed, committed) are evicted; the journal has them, and a marker
// reloads one.
const KeptSettled = 10_000

// rateLimit lets one line through per second and counts the rest.
type rateLimit struct {
	last       time.Time
	suppressed uint64
}

func (r *rateLimit) allow(now time.Time) (suppressed uint64, ok bool) {
	if !r.last.IsZero() && now.Sub(r.last) < time.Second {
		r.suppressed++
		return 0, false
	}
	n := r.suppressed
	r.last, r.suppressed = now, 0
	return n, true
}

// marker applies one datagram from the child's tree.
func (m *Machine) marker(o *out, e Marker, now time.Time) {
	msg := e.Msg
	m.standard(o, msg, now)
	if msg.Barrier || msg.Session == "" {
		return // a barrier is the runner's: answered once what came before it is durable
	}
	if m.overOpenCap(o, msg, now, m.Config.MaxOpenSessions) {
		o.add(Refuse{PID: msg.PID})
		return
	}
	sess := m.sessionFor(o, e, now, m.Config.MaxOpenSessions)
	if sess == nil {
		o.add(Refuse{PID: msg.PID})
		return
	}
	if sess.State == record.Parked && parkHolds(msg.Event) {
		if m.Policy.Remember {
			// The hooks are wired, and the task has this parked session.
			m.Task.Markers, m.Task.runMarkers = true, true
			m.Task.touch(sess.ID)
		}
		m.refuseParked(o, sess, string(msg.Event), m.Config.StateDir)
		o.add(Refuse{PID: msg.PID})
		sess.LastHeartbeat = now
		o.save(sess.ID)
		return
	}
	if m.Policy.Interactive {
		msg = m.interactiveTurnBegin(o, sess, msg, now, m.Run.Run)
	}
	if why, ignore := outOfSequence(sess, msg); why != "" {
		m.sayOutOfSequence(o, sess, msg, why, ignore, now)
		if ignore {
			sess.LastHeartbeat = now
			o.save(sess.ID)
			o.add(ObserveMarker{Run: m.Run.Run, Session: msg.Session, Event: string(msg.Event), Turn: msg.Turn, Ignored: true})
			return
		}
	}
	sess.LastHeartbeat = now
	sess.Updated = now
	m.Task.marker(msg)
	m.Task.inheritRerun(o, sess, msg)
	if m.Run.Run != 0 {
		sess.Run = m.Run.Run
	}
	if transition(o, sess, msg, now) {
		m.turnCompleted(o, sess)
	}
	if msg.Event != marker.EventWaiting && sess.State != record.Waiting {
		sess.Wait, sess.RetryAt = "", time.Time{}
	}
	if m.Policy.Remember && sess.Task == "" {
		sess.Task = m.Config.Task.ID
	}
	o.save(sess.ID)
	m.noteDeadline(o, sess, m.Config.Deadlines, m.deadlinesLive())
	if msg.Event != marker.EventNone && msg.Event != marker.EventHeartbeat {
		o.add(ObserveMarker{Run: m.Run.Run, Session: msg.Session, Event: string(msg.Event), Turn: msg.Turn,
			Phase: string(msg.Phase), Tool: msg.Tool, Outcome: string(msg.Outcome), Effect: msg.Effect})
	}
}

// standard applies the sd_notify keys of msg.
func (m *Machine) standard(o *out, msg marker.Message, now time.Time) {
	if msg.Ready && !m.Ready {
		m.Ready = true
		o.info("agent is ready", "run", m.Run.Run, "pid", msg.PID)
	}
	if msg.HasStatus {
		m.StatusText = msg.Status
	}
	if msg.Stopping {
		o.info("agent says it is stopping", "run", m.Run.Run, "pid", msg.PID)
	}
	if msg.WatchdogUSec > 0 {
		m.setWatchdog(o, time.Duration(msg.WatchdogUSec)*time.Microsecond, now, m.Running())
	}
	if msg.WatchdogTrigger && m.Running() && m.Stop == nil && m.Abort == nil {
		m.trip(o, guardTrigger, "", now)
	}
	if msg.ExtendTimeoutUSec > 0 {
		m.extendTimeout(o, msg, time.Duration(msg.ExtendTimeoutUSec)*time.Microsecond, now)
	}
}

// overOpenCap reports whether msg would open one session more than
// --max-open-sessions allows: a turn-begin (or resumed) for a session that
// is not open. Refused, never ignored: the sender's barrier answers '0'.
func (b *Book) overOpenCap(o *out, msg marker.Message, now time.Time, limit int) bool {
	if msg.Event != marker.EventTurnBegin && msg.Event != marker.EventResumed && msg.Event != marker.EventWaiting {
		return false
	}
	if b.open[msg.Session] || len(b.open) < limit {
		return false
	}
	b.Refused++
	if n, ok := b.refusedLog.allow(now); ok {
		o.warn("too many open sessions: a turn that would open one more is refused (--max-open-sessions)",
			"session", msg.Session, "pid", msg.PID, "limit", limit, "suppressed", n)
	}
	o.add(Count{Metric: "refused", Label: "open-sessions"})
	return true
}

// sessionFor returns the session a marker names: held, loaded from the
// journal (e.Stored) or new; nil when it is refused (too many sessions, or
// a new session while commits fail).
func (b *Book) sessionFor(o *out, e Marker, now time.Time, limit int) *record.Session {
	id := e.Msg.Session
	if sess, ok := b.Sessions[id]; ok {
		return sess
	}
	if e.Failing != "" && e.Stored == nil {
		if n, ok := b.refusedLog.allow(now); ok {
			o.warn("the journal cannot commit: marker for a new session refused",
				"session", id, "pid", e.Msg.PID, "err", e.Failing, "suppressed", n)
		}
		return nil
	}
	if len(b.Sessions) >= MaxSessions {
		if n, ok := b.refusedLog.allow(now); ok {
			o.warn("too many sessions in memory: marker for a new session refused",
				"session", id, "pid", e.Msg.PID, "limit", MaxSessions, "suppressed", n)
		}
		return nil
	}
	if e.Stored == nil && (e.Msg.Event == marker.EventNone || e.Msg.Event == marker.EventHeartbeat) && !b.born(o, id, now, limit) {
		return nil
	}
	sess := record.Session{ID: id, State: record.Idle, Updated: now}
	if e.Stored != nil {
		sess = *e.Stored
	}
	b.Sessions[id] = &sess
	return &sess
}

// transition moves sess by the marker's event, and reports whether it
// completed a turn.
func transition(o *out, sess *record.Session, msg marker.Message, now time.Time) (completed bool) {
	switch msg.Event {
	case marker.EventTurnBegin:
		if sess.State == record.ResumePending {
			o.info("the agent began a new turn in a session owed a resume: the resume is dropped",
				"session", sess.ID, "crash_count", sess.CrashCount)
		}
		sess.State = record.InTurn
		sess.Turn, sess.Prompt, sess.TurnStarted = msg.Turn, msg.Prompt, now
		sess.Phase, sess.Tool, sess.Detail, sess.Outcome, sess.Reason, sess.Resume = "", "", "", "", "", nil
		sess.ToolRan, sess.TurnAlias = false, ""
		sess.Effects = nil
		newAttempt(sess, now)
		sess.ParkedBy, sess.Fingerprint = "", nil
	case marker.EventTurnEnd:
		if msg.Turn != "" && msg.Turn != sess.TurnAlias {
			sess.Turn = msg.Turn
		}
		sess.TurnAlias = ""
		sess.State = record.Idle
		sess.Outcome = string(msg.Outcome)
		sess.Phase, sess.Tool, sess.Detail, sess.Reason, sess.Resume = "", "", "", "", nil
		completed = msg.Outcome == marker.OutcomeCompleted
	case marker.EventWaiting:
		if msg.Turn != "" {
			sess.Turn = msg.Turn
		}
		sess.State = record.Waiting
		sess.Wait = string(msg.Wait)
	case marker.EventPhase:
		sess.Phase, sess.Tool, sess.Detail = string(msg.Phase), msg.Tool, msg.Detail
		sess.PhaseStarted, sess.PhaseExtended = now, time.Time{}
		if msg.Phase == marker.PhaseTool {
			sess.ToolRan = true
		}
		if sess.State == record.Waiting {
			sess.State = record.InTurn // the turn goes on: the wait is over
			if sess.Wait != WaitReconnect || !sess.RetryAt.IsZero() {
				// A person answered, or a rate limit's wait is over: the
				// turn's clock starts again.
				sess.ClockFrom, sess.TurnExtended = now, time.Time{}
			}
			sess.Wait = ""
		}
	case marker.EventResumed:
		switch {
		case msg.Turn == "":
		case sess.Resume != nil && sess.Turn != "" && msg.Turn != sess.Turn:
			// The agent numbers the continuation afresh (Codex): it goes on
			// as the interrupted turn, and its turn-end may name either.
			sess.TurnAlias = msg.Turn
		default:
			sess.Turn = msg.Turn
		}
		if sess.Resume != nil {
			o.info("agent took the resume", "session", sess.ID, "turn", sess.Turn, "attempt", sess.Resume.Attempt)
		}
		sess.State = record.InTurn
		sess.Resume, sess.Reason = nil, ""
		if sess.TurnStarted.IsZero() {
			sess.TurnStarted = now
		}
		newAttempt(sess, now) // the phase clock starts at the next phase marker
	case marker.EventEffect:
		sess.AddEffect(msg.Effect) // bounded: record.MaxEffects
		sess.ToolRan = true        // something changed: a lost conversation is not simply started again
	case marker.EventClosed:
		sess.State = record.Closed
		sess.Phase, sess.Tool, sess.Detail, sess.Reason, sess.Resume = "", "", "", "", nil
	}
	return completed
}

// parkHolds reports whether a marker with event ev is refused for a
// parked session: every one that would move it out of its park (a new
// turn, a resumed, a wait, a turn-end, a close) or change the turn it was
// parked in (a phase). Only a person lifts a park (a manual resume from
// outside the agent's tree), a changed agent (a breaker's park), or
// --rerun-task, which starts the task as a new session; never the agent's
// own markers. A heartbeat and a declared effect are taken: they change no
// state, and an effect done is worth carrying into the resume.
func parkHolds(ev marker.Event) bool {
	switch ev {
	case marker.EventNone, marker.EventHeartbeat, marker.EventEffect:
		return false
	}
	return true
}

// outOfSequence says why marker msg contradicts the session's turn (""
// when it does not), and whether it is ignored. Ignored, so that the state
// machine never goes back: a turn-begin repeated for the open turn, or
// replayed for a turn that already ended (an agent replaying its log after
// a restart must not reopen, and so later resume, a finished turn); a
// turn-end repeated for a turn already ended (it must not prove health
// twice, nor change the outcome). Applied but recorded: a turn-end naming
// another turn than the open one, since the agent's hooks may number the
// continuation of a resumed turn afresh. Markers without a turn id are
// never contradicted.
func outOfSequence(sess *record.Session, msg marker.Message) (why string, ignore bool) {
	if msg.Turn == "" || sess.Turn == "" {
		return "", false
	}
	same := msg.Turn == sess.Turn || (sess.TurnAlias != "" && msg.Turn == sess.TurnAlias)
	open := sess.State == record.InTurn || sess.State == record.Waiting
	ended := sess.State == record.Idle && sess.Outcome != ""
	switch msg.Event {
	case marker.EventTurnBegin:
		switch {
		case same && open:
			return "turn-begin repeated for the open turn", true
		case same && ended:
			return "turn-begin for a turn that already ended", true
		}
	case marker.EventTurnEnd:
		switch {
		case !same && open:
			return "turn-end names another turn than the open one; the open turn ends", false
		case same && ended:
			return "turn-end repeated", true
		}
	}
	return "", false
}

// newAttempt starts the deadline clocks of a turn's attempt (turn-begin or
// resumed) at now.
func newAttempt(sess *record.Session, now time.Time) {
	sess.ClockFrom, sess.PhaseStarted = now, time.Time{}
	sess.TurnExtended, sess.PhaseExtended = time.Time{}, time.Time{}
	sess.Wait = ""
}

// turnCompleted resets what a completed turn proves: the session's crash
// count, and the process-level backoff and crash-loop guard.
func (m *Machine) turnCompleted(o *out, sess *record.Session) {
	sess.CrashCount, sess.Limits = 0, 0
	m.TurnDone = true
	m.Backoff = m.Backoff.Reset()
	o.savePolicy()
	m.clearGuard(o, "a turn completed (session "+sess.ID+")")
}

// beats applies the heartbeats gathered off the loop.
func (m *Machine) beats(o *out, e Beats, now time.Time) {
	var ids []string
	for _, id := range sortedKeys(e.Sessions) {
		at := e.Sessions[id]
		if m.Policy.Remember {
			m.Task.Markers = true
			m.Task.touch(id)
		}
		sess, ok := m.Sessions[id]
		if !ok {
			st, found := e.Stored[id]
			if len(m.Sessions) >= MaxSessions || (!found && !m.born(o, id, now, m.Config.MaxOpenSessions)) {
				continue
			}
			sess = &record.Session{ID: id, State: record.Idle, Updated: now}
			if found {
				*sess = st
			}
			m.Sessions[id] = sess
		}
		if at.After(sess.LastHeartbeat) {
			sess.LastHeartbeat = at
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 {
		o.save(ids...)
	}
	if m.Run.Run != 0 && e.Ping.After(m.Run.LastHeartbeat) && !e.Ping.Before(m.Run.Started) {
		m.Run.LastHeartbeat = e.Ping
		o.add(Save{Run: true})
	}
}
