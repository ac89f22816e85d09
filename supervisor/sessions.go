package supervisor

import (
	"time"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/notify"
)

// maxSessions bounds the sessions held in memory and the heartbeats
// buffered for them, so a misbehaving agent cannot grow the supervisor
// without bound. Settled sessions are evicted long before (keptSettled),
// and pruned from the journal by --keep-sessions, so only open sessions
// (mid-turn, waiting, owed a resume, parked or stopped: each needs a resume
// or a person) count towards it in practice. Past it a new session's marker
// is refused, logged (rate-limited) and its sender's next barrier answers
// '0': never ignored behind a '1'.
const maxSessions = 100_000

// keptSettled is how many sessions memory holds before settled ones (idle
// or closed, committed) are evicted; the journal has them, and a marker
// reloads one.
const keptSettled = 10_000

// evictSettled drops settled sessions whose last change is committed, once
// more than keptSettled are held.
func (s *Supervisor) evictSettled() {
	if len(s.sessions) <= keptSettled {
		return
	}
	// The batch in flight may be re-queued by id (a failed commit), so its
	// sessions must still be here then; a batch waiting to be retried is
	// in dirty already.
	busy := map[string]bool{}
	if b := s.cs.inflight; b != nil {
		for _, x := range b.sessions {
			busy[x.ID] = true
		}
	}
	for id, sess := range s.sessions {
		if !sess.State.Open() && !s.cs.dirty[id] && !busy[id] {
			delete(s.sessions, id)
		}
	}
}

// apply applies one notify message on the loop goroutine.
func (s *Supervisor) apply(m notify.Message, now time.Time) {
	if m.Ready && !s.ready {
		s.ready = true
		s.log.Info("agent is ready", "run", s.run.Run, "pid", m.PID)
	}
	if m.HasStatus {
		s.statusText = m.Status
	}
	if m.Stopping {
		s.log.Info("agent says it is stopping", "run", s.run.Run, "pid", m.PID)
	}
	if m.WatchdogUSec > 0 {
		s.setWatchdog(time.Duration(m.WatchdogUSec)*time.Microsecond, now)
	}
	if m.WatchdogTrigger {
		s.watchdogTriggered(now)
	}
	if m.ExtendTimeoutUSec > 0 {
		s.extendTimeout(m, time.Duration(m.ExtendTimeoutUSec)*time.Microsecond, now)
	}
	if m.Barrier {
		s.barrier(m)
		return
	}
	if m.Session == "" {
		return
	}
	if _, held := s.sessions[m.Session]; !held && s.cs.failing != nil && !s.inJournal(m.Session) {
		// Commits are failing (a full disk): a new session could not be
		// recorded, so its marker is refused and the barrier says so.
		s.refused.Add(m.PID)
		s.refusedLogs.warn(s.log, now, "the journal cannot commit: marker for a new session refused",
			"session", m.Session, "pid", m.PID, "err", s.cs.failing)
		return
	}
	sess := s.session(m.Session, now)
	if sess == nil {
		// Refused, not ignored: the sender's next barrier answers '0'.
		s.refused.Add(m.PID)
		s.refusedLogs.warn(s.log, now, "too many sessions in memory: marker for a new session refused",
			"session", m.Session, "pid", m.PID, "limit", maxSessions)
		return
	}
	if why, ignore := outOfSequence(sess, m); why != "" {
		s.outOfSequence(sess, m, why, ignore, now)
		if ignore {
			sess.LastHeartbeat = now
			s.markDirty(sess.ID)
			s.flushAsync()
			return
		}
	}
	sess.LastHeartbeat = now
	sess.Updated = now
	s.taskMarker(m)
	if s.run.Run != 0 {
		sess.Run = s.run.Run
	}
	switch m.Event {
	case notify.EventTurnBegin:
		if sess.State == journal.ResumePending || sess.State == journal.Parked {
			s.log.Info("a new turn supersedes the session's pending resume or park",
				"session", sess.ID, "was", string(sess.State), "crash_count", sess.CrashCount)
		}
		sess.State = journal.InTurn
		sess.Turn, sess.Prompt, sess.TurnStarted = m.Turn, m.Prompt, now
		sess.Phase, sess.Tool, sess.Detail, sess.Outcome, sess.Reason, sess.Resume = "", "", "", "", "", nil
		newAttempt(sess, now)
		sess.ParkedBy, sess.Fingerprint = "", nil
	case notify.EventTurnEnd:
		if m.Turn != "" {
			sess.Turn = m.Turn
		}
		sess.State = journal.Idle
		sess.Outcome = string(m.Outcome)
		sess.Phase, sess.Tool, sess.Detail, sess.Reason, sess.Resume = "", "", "", "", nil
		if m.Outcome == notify.OutcomeCompleted {
			s.turnCompleted(sess)
		}
	case notify.EventWaiting:
		if m.Turn != "" {
			sess.Turn = m.Turn
		}
		sess.State = journal.Waiting
		sess.Wait = string(m.Wait)
	case notify.EventPhase:
		sess.Phase, sess.Tool, sess.Detail = string(m.Phase), m.Tool, m.Detail
		sess.PhaseStarted, sess.PhaseExtended = now, time.Time{}
		if sess.State == journal.Waiting {
			sess.State = journal.InTurn // the turn goes on: the wait is over
			if sess.Wait != journalWaitReconnect {
				// A person answered: the turn's clock starts again.
				sess.ClockFrom, sess.TurnExtended = now, time.Time{}
			}
			sess.Wait = ""
		}
	case notify.EventResumed:
		if m.Turn != "" {
			sess.Turn = m.Turn
		}
		if sess.Resume != nil {
			s.log.Info("agent took the resume", "session", sess.ID, "turn", sess.Turn, "attempt", sess.Resume.Attempt)
		}
		sess.State = journal.InTurn
		sess.Resume, sess.Reason = nil, ""
		if sess.TurnStarted.IsZero() {
			sess.TurnStarted = now
		}
		newAttempt(sess, now) // the phase clock starts at the next phase marker
	case notify.EventClosed:
		sess.State = journal.Closed
		sess.Phase, sess.Tool, sess.Detail, sess.Reason, sess.Resume = "", "", "", "", nil
	}
	if m.Event != notify.EventWaiting && sess.State != journal.Waiting {
		sess.Wait = ""
	}
	if s.taskMode() && sess.Task == "" {
		sess.Task = s.task.id
	}
	s.markDirty(sess.ID)
	s.noteDeadline(sess)
	s.observeMarker(m)
	s.flushAsync()
}

// outOfSequence says why marker m contradicts the session's turn ("" when
// it does not), and whether it is ignored. Ignored, so that the state
// machine never goes back: a turn-begin repeated for the open turn, or
// replayed for a turn that already ended (an agent replaying its log after
// a restart must not reopen, and so later resume, a finished turn); a
// turn-end repeated for a turn already ended (it must not prove health
// twice, nor change the outcome). Applied but recorded: a turn-end naming
// another turn than the open one, since the agent's hooks may number the
// continuation of a resumed turn afresh. Markers without a turn id are
// never contradicted.
func outOfSequence(sess *journal.Session, m notify.Message) (why string, ignore bool) {
	if m.Turn == "" || sess.Turn == "" {
		return "", false
	}
	same := m.Turn == sess.Turn
	open := sess.State == journal.InTurn || sess.State == journal.Waiting
	ended := sess.State == journal.Idle && sess.Outcome != ""
	switch m.Event {
	case notify.EventTurnBegin:
		switch {
		case same && open:
			return "turn-begin repeated for the open turn", true
		case same && ended:
			return "turn-begin for a turn that already ended", true
		}
	case notify.EventTurnEnd:
		switch {
		case !same && open:
			return "turn-end names another turn than the open one; the open turn ends", false
		case same && ended:
			return "turn-end repeated", true
		}
	}
	return "", false
}

// sequenceLog counts out-of-sequence markers and rate-limits their log.
type sequenceLog struct {
	count      uint64
	last       time.Time
	suppressed uint64
}

func (s *Supervisor) outOfSequence(sess *journal.Session, m notify.Message, why string, ignored bool, now time.Time) {
	s.seq.count++
	if now.Sub(s.seq.last) < time.Second {
		s.seq.suppressed++
		return
	}
	msg := "turn marker out of sequence: applied"
	if ignored {
		msg = "turn marker out of sequence: ignored"
	}
	s.log.Warn(msg, "session", sess.ID, "event", string(m.Event), "turn", m.Turn,
		"session_turn", sess.Turn, "state", string(sess.State), "why", why, "suppressed", s.seq.suppressed)
	s.seq.last, s.seq.suppressed = now, 0
}

// newAttempt starts the deadline clocks of a turn's attempt (turn-begin or
// resumed) at now.
func newAttempt(sess *journal.Session, now time.Time) {
	sess.ClockFrom, sess.PhaseStarted = now, time.Time{}
	sess.TurnExtended, sess.PhaseExtended = time.Time{}, time.Time{}
	sess.Wait = ""
}

// turnCompleted resets what a completed turn proves: the session's
// crash count, and the process-level backoff and crash-loop guard.
func (s *Supervisor) turnCompleted(sess *journal.Session) {
	sess.CrashCount = 0
	s.turnDone = true
	s.backoff = s.backoff.Reset()
	s.policyDirty = true
	s.clearGuard("a turn completed (session " + sess.ID + ")")
}

// session returns the in-memory session id, loading it from the journal or
// creating it; nil when too many sessions are held.
func (s *Supervisor) session(id string, now time.Time) *journal.Session {
	if sess, ok := s.sessions[id]; ok {
		return sess
	}
	if len(s.sessions) >= maxSessions {
		return nil
	}
	var sess journal.Session
	var found bool
	err := s.db.View(func(tx *journal.Tx) (err error) {
		sess, found, err = tx.Session(id)
		return err
	})
	if err != nil {
		s.log.Error("journal: reading a session failed", "session", id, "err", err)
	}
	if !found {
		sess = journal.Session{ID: id, State: journal.Idle, Updated: now}
	}
	s.sessions[id] = &sess
	return &sess
}

// inJournal reports whether the journal holds session id.
func (s *Supervisor) inJournal(id string) bool {
	found := false
	s.db.View(func(tx *journal.Tx) error {
		_, found, _ = tx.Session(id)
		return nil
	})
	return found
}

// flushBeats moves the heartbeats gathered by intake into the session and
// run records; the next batch commits them (at most about once a second).
func (s *Supervisor) flushBeats(now time.Time) {
	for id, at := range s.in.take() {
		if s.taskMode() {
			s.task.markers = true
			s.touch(id)
		}
		if sess := s.session(id, now); sess != nil && at.After(sess.LastHeartbeat) {
			sess.LastHeartbeat = at
			s.markDirty(id)
		}
	}
	if s.run.Run != 0 && s.in.pings.Load() > s.pingsAtLaunch {
		if t := s.in.lastPingTime(); t.After(s.run.LastHeartbeat) && !t.Before(s.run.Started) {
			s.run.LastHeartbeat = t
			s.cs.runDirty = true
		}
	}
	s.flushAsync()
}
