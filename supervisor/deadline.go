package supervisor

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/notify"
)

// Deadlines are the turn-level watchdogs (--turn-timeout, --phase-timeout):
// a process that keeps heartbeating can still be stuck in a turn that never
// ends (a model stream that hangs, a tool that never returns). Zero turns a
// deadline off.
type Deadlines struct {
	Turn  time.Duration // a turn's attempt, from its turn-begin or resumed
	Model time.Duration // one model phase
	Tool  time.Duration // one tool phase
}

// On reports whether any deadline is set.
func (d Deadlines) On() bool { return d.Turn > 0 || d.Model > 0 || d.Tool > 0 }

// Deadline kinds, as logs and status name them.
const (
	deadlineTurn  = "turn"
	deadlineModel = "model phase"
	deadlineTool  = "tool phase"
)

// deadline is one deadline of one session.
type deadline struct {
	At    time.Time     // when it fires
	Kind  string        // deadlineTurn, deadlineModel, deadlineTool
	Limit time.Duration // the flag's value
	From  time.Time     // when the clock started
	// Extended is true when EXTEND_TIMEOUT_USEC moved At past From+Limit.
	Extended bool
}

// clocked reports whether the deadlines of sess run: mid-turn, or waiting
// for the model API (reconnect). A wait for a person stops the clock: a
// human who takes an hour to approve is not a hung turn.
func clocked(sess *journal.Session) bool {
	return sess.State == journal.InTurn ||
		(sess.State == journal.Waiting && sess.Wait == journalWaitReconnect)
}

// journalWaitReconnect is notify.WaitReconnect as journal.Session.Wait holds it.
const journalWaitReconnect = "reconnect"

// sessionDeadline returns the earliest deadline of sess under d; ok is
// false when none applies. It is pure: the times come from the session,
// which holds monotonic readings while this supervise recorded them and
// wall-clock ones after a restart (then the time left is computed from the
// journaled start).
func sessionDeadline(sess *journal.Session, d Deadlines) (dl deadline, ok bool) {
	if !clocked(sess) {
		return dl, false
	}
	consider := func(kind string, limit time.Duration, from, ext time.Time) {
		if limit <= 0 || from.IsZero() {
			return
		}
		c := deadline{At: from.Add(limit), Kind: kind, Limit: limit, From: from}
		if ext.After(c.At) {
			c.At, c.Extended = earliest(ext, from.Add(2*limit)), true
		}
		if !ok || c.At.Before(dl.At) {
			dl, ok = c, true
		}
	}
	consider(deadlineTurn, d.Turn, sess.ClockFrom, sess.TurnExtended)
	switch sess.Phase {
	case "model":
		consider(deadlineModel, d.Model, sess.PhaseStarted, sess.PhaseExtended)
	case "tool":
		consider(deadlineTool, d.Tool, sess.PhaseStarted, sess.PhaseExtended)
	}
	return dl, ok
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// extendDeadlines applies EXTEND_TIMEOUT_USEC=by, received at now, to sess
// (as systemd does: the deadline becomes at least now+by), capped at twice
// each deadline's flag counted from its start. It reports whether a deadline
// moved. A session whose clock does not run is left alone.
func extendDeadlines(sess *journal.Session, d Deadlines, by time.Duration, now time.Time) bool {
	if !clocked(sess) || by <= 0 {
		return false
	}
	moved := false
	ext := func(limit time.Duration, from time.Time, cur *time.Time) {
		if limit <= 0 || from.IsZero() {
			return
		}
		at := earliest(now.Add(by), from.Add(2*limit))
		if at.After(from.Add(limit)) && at.After(*cur) {
			*cur, moved = at, true
		}
	}
	ext(d.Turn, sess.ClockFrom, &sess.TurnExtended)
	switch sess.Phase {
	case "model":
		ext(d.Model, sess.PhaseStarted, &sess.PhaseExtended)
	case "tool":
		ext(d.Tool, sess.PhaseStarted, &sess.PhaseExtended)
	}
	return moved
}

// deadlineState is the loop's timer for the turn-level deadlines: armed
// for the earliest one; on firing the sessions are looked at again.
type deadlineState struct {
	timer    *time.Timer
	due      time.Time
	deferred int // looks postponed because datagrams were queued
}

func (s *Supervisor) dlC() <-chan time.Time {
	if s.dl.timer == nil {
		return nil
	}
	return s.dl.timer.C
}

// armDeadline sets the deadline timer to fire at at, if that is sooner
// than it is set to (or force).
func (s *Supervisor) armDeadline(at time.Time, force bool) {
	switch {
	case s.dl.timer == nil:
		s.dl.timer = time.NewTimer(time.Until(at))
	case force || at.Before(s.dl.due):
		s.dl.timer.Reset(time.Until(at))
	default:
		return
	}
	s.dl.due = at
}

func (s *Supervisor) stopDeadlines() {
	if s.dl.timer != nil {
		s.dl.timer.Stop()
		s.dl.timer = nil
	}
	s.dl.deferred = 0
}

// noteDeadline arms the timer for sess's deadline after a marker changed it.
func (s *Supervisor) noteDeadline(sess *journal.Session) {
	if s.proc == nil || !s.cfg.Deadlines.On() || s.stop != nil || s.abort != nil {
		return
	}
	if dl, ok := sessionDeadline(sess, s.cfg.Deadlines); ok {
		s.armDeadline(dl.At, false)
	}
}

// rearmDeadlines sets the timer to the earliest deadline of any session
// (once a second, and after the timer fired), or stops it.
func (s *Supervisor) rearmDeadlines() {
	if s.proc == nil || !s.cfg.Deadlines.On() || s.stop != nil || s.abort != nil {
		s.stopDeadlines()
		return
	}
	var first time.Time
	for _, sess := range s.sessions {
		if dl, ok := sessionDeadline(sess, s.cfg.Deadlines); ok && (first.IsZero() || dl.At.Before(first)) {
			first = dl.At
		}
	}
	if first.IsZero() {
		s.stopDeadlines()
		return
	}
	s.armDeadline(first, true)
}

// deadlineFired runs when the deadline timer fires: a turn or phase past
// its deadline stops the agent (reason turn-timeout), decided as any dirty
// death.
func (s *Supervisor) deadlineFired(now time.Time) {
	s.dl.timer = nil
	if s.proc == nil || s.stop != nil || s.abort != nil {
		return
	}
	type over struct {
		sess *journal.Session
		dl   deadline
	}
	var late []over
	for _, sess := range s.sessions {
		if dl, ok := sessionDeadline(sess, s.cfg.Deadlines); ok && !now.Before(dl.At) {
			late = append(late, over{sess, dl})
		}
	}
	if len(late) == 0 {
		s.dl.deferred = 0
		s.rearmDeadlines()
		return
	}
	// A turn-end or phase marker may be queued on the socket: read it first.
	if s.dl.deferred < maxWatchdogDeferrals && s.notify.Pending() {
		s.dl.deferred++
		s.armDeadline(now.Add(watchdogDeferral), true)
		return
	}
	for _, o := range late {
		s.log.Warn("turn deadline passed", "session", o.sess.ID, "turn", o.sess.Turn, "deadline", o.dl.Kind,
			"limit", o.dl.Limit, "running_for", now.Sub(o.dl.From).Round(time.Millisecond), "extended", o.dl.Extended,
			"phase", o.sess.Phase, "tool", o.sess.Tool)
	}
	s.stopDeadlines()
	s.terminateFor(journal.ReasonTurnTimeout, "a turn ran past its deadline (--turn-timeout/--phase-timeout)",
		"session", late[0].sess.ID, "deadline", late[0].dl.Kind)
}

// terminateFor stops the child on supervise's own initiative with the stop
// signal, then SIGKILL to the tree after the grace period; the run's reason
// is reason and the death is dirty.
func (s *Supervisor) terminateFor(reason, why string, args ...any) {
	now := time.Now()
	s.abort = &abortState{reason: reason, at: now}
	s.stopWatchdog()
	s.log.Warn("stopping the agent: "+why, append([]any{"reason", reason, "pid", s.proc.PID(),
		"signal", unix.SignalName(s.cfg.StopSignal), "sigkill_after", s.cfg.StopTimeout}, args...)...)
	if err := s.proc.Terminate(s.cfg.StopSignal); err != nil {
		s.log.Warn("signalling the child failed", "pid", s.proc.PID(), "err", err)
	}
	s.armGrace(now, now.Add(s.cfg.StopTimeout))
	s.publish()
}

// extendTimeout applies EXTEND_TIMEOUT_USEC=by: during a stop it extends
// the grace period; otherwise it extends the deadlines of the sender's
// session (or, without one, of every session mid-turn), capped at twice
// each flag. Heartbeats never extend anything.
func (s *Supervisor) extendTimeout(m notify.Message, by time.Duration, now time.Time) {
	if s.grace.timer != nil {
		s.extendGrace(by, now)
		return
	}
	if !s.cfg.Deadlines.On() {
		return
	}
	one := func(sess *journal.Session) {
		if extendDeadlines(sess, s.cfg.Deadlines, by, now) {
			dl, _ := sessionDeadline(sess, s.cfg.Deadlines)
			s.log.Info("agent extended its turn deadline", "session", sess.ID, "by", by, "deadline", dl.Kind,
				"left", dl.At.Sub(now).Round(time.Millisecond), "capped_at", 2*dl.Limit)
			s.markDirty(sess.ID)
		}
	}
	if m.Session != "" {
		if sess, ok := s.sessions[m.Session]; ok {
			one(sess)
		}
	} else {
		for _, sess := range s.sessions {
			one(sess)
		}
	}
	s.flushAsync()
}
