package machine

import (
	"time"

	"github.com/supervise-dev/supervise/marker"

	"github.com/supervise-dev/supervise/record"
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
	DeadlineTurn  = "turn"
	DeadlineModel = "model phase"
	DeadlineTool  = "tool phase"
)

// Deadline is one deadline of one session.
type Deadline struct {
	At    time.Time     // when it fires
	Kind  string        // DeadlineTurn, DeadlineModel, DeadlineTool
	Limit time.Duration // the flag's value
	From  time.Time     // when the clock started
	// Extended is true when EXTEND_TIMEOUT_USEC moved At past From+Limit.
	Extended bool
}

// clocked reports whether the deadlines of sess run: mid-turn, or waiting
// for the model API (reconnect). A wait for a person stops the clock: a
// human who takes an hour to approve is not a hung turn; so does a wait
// for a rate limit's reset time the API named (RetryAt, through the proxy).
func clocked(sess *record.Session) bool {
	return sess.State == record.InTurn ||
		(sess.State == record.Waiting && sess.Wait == WaitReconnect && sess.RetryAt.IsZero())
}

// WaitReconnect is marker.WaitReconnect as record.Session.Wait holds it.
const WaitReconnect = "reconnect"

// SessionDeadline returns the earliest deadline of sess under d; ok is
// false when none applies. It is pure: the times come from the session,
// which holds monotonic readings while this supervise recorded them and
// wall-clock ones after a restart (then the time left is computed from the
// journaled start).
func SessionDeadline(sess *record.Session, d Deadlines) (dl Deadline, ok bool) {
	if !clocked(sess) {
		return dl, false
	}
	consider := func(kind string, limit time.Duration, from, ext time.Time) {
		if limit <= 0 || from.IsZero() {
			return
		}
		c := Deadline{At: from.Add(limit), Kind: kind, Limit: limit, From: from}
		if ext.After(c.At) {
			c.At, c.Extended = earliest(ext, from.Add(2*limit)), true
		}
		if !ok || c.At.Before(dl.At) {
			dl, ok = c, true
		}
	}
	consider(DeadlineTurn, d.Turn, sess.ClockFrom, sess.TurnExtended)
	switch sess.Phase {
	case "model":
		consider(DeadlineModel, d.Model, sess.PhaseStarted, sess.PhaseExtended)
	case "tool":
		consider(DeadlineTool, d.Tool, sess.PhaseStarted, sess.PhaseExtended)
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
func extendDeadlines(sess *record.Session, d Deadlines, by time.Duration, now time.Time) bool {
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

// deadlinesLive reports whether turn deadlines are watched now.
func (m *Machine) deadlinesLive() bool { return m.watching() && m.Config.Deadlines.On() }

// armDeadline sets the deadline timer to fire at at, if that is sooner
// than it is set to (or force).
func (w *Watch) armDeadline(o *out, at time.Time, force bool) {
	if w.deadlineArmed && !force && !at.Before(w.deadlineDue) {
		return
	}
	w.deadlineArmed, w.deadlineDue = true, at
	o.arm(TimerDeadline, at)
}

// stopDeadlines stops the deadline timer.
func (w *Watch) stopDeadlines(o *out) {
	if w.deadlineArmed {
		o.disarm(TimerDeadline)
	}
	w.deadlineArmed, w.DeadlineDeferred = false, 0
}

// noteDeadline arms the timer for sess's deadline after a marker changed it.
func (w *Watch) noteDeadline(o *out, sess *record.Session, d Deadlines, live bool) {
	if !live {
		return
	}
	if dl, ok := SessionDeadline(sess, d); ok {
		w.armDeadline(o, dl.At, false)
	}
}

// rearmDeadlines sets the timer to the earliest deadline of any session, or
// stops it.
func (w *Watch) rearmDeadlines(o *out, sessions map[string]*record.Session, d Deadlines, live bool) {
	if !live {
		w.stopDeadlines(o)
		return
	}
	var first time.Time
	for _, sess := range sessions {
		if dl, ok := SessionDeadline(sess, d); ok && (first.IsZero() || dl.At.Before(first)) {
			first = dl.At
		}
	}
	if first.IsZero() {
		w.stopDeadlines(o)
		return
	}
	w.armDeadline(o, first, true)
}

// deadlineFired: a turn or phase past its deadline stops the agent (reason
// turn-timeout), decided as any dirty death.
func (m *Machine) deadlineFired(o *out, e TimerFired, now time.Time) {
	m.deadlineArmed = false
	if !m.deadlinesLive() {
		return
	}
	var late []*record.Session
	var dls []Deadline
	for _, id := range m.sessionIDs() {
		sess := m.Sessions[id]
		if dl, ok := SessionDeadline(sess, m.Config.Deadlines); ok && !now.Before(dl.At) {
			late, dls = append(late, sess), append(dls, dl)
		}
	}
	if len(late) == 0 {
		m.DeadlineDeferred = 0
		m.rearmDeadlines(o, m.Sessions, m.Config.Deadlines, m.deadlinesLive())
		return
	}
	// A turn-end or phase marker may be queued on the socket: read it first.
	if m.DeadlineDeferred < maxWatchdogDeferrals && e.Queued {
		m.DeadlineDeferred++
		m.armDeadline(o, now.Add(watchdogDeferral), true)
		return
	}
	for i, sess := range late {
		o.warn("turn deadline passed", "session", sess.ID, "turn", sess.Turn, "deadline", dls[i].Kind,
			"limit", dls[i].Limit, "running_for", now.Sub(dls[i].From).Round(time.Millisecond), "extended", dls[i].Extended,
			"phase", sess.Phase, "tool", sess.Tool)
	}
	m.stopDeadlines(o)
	m.trip(o, guardDeadline, "", now, "session", late[0].ID, "deadline", dls[0].Kind)
	o.add(Publish{})
}

// extendTimeout applies EXTEND_TIMEOUT_USEC=by: during a stop it extends
// the grace period; otherwise it extends the deadlines of the sender's
// session (or, without one, of every session mid-turn), capped at twice
// each flag. Heartbeats never extend anything.
func (m *Machine) extendTimeout(o *out, msg marker.Message, by time.Duration, now time.Time) {
	if m.Grace.Armed {
		m.extendGrace(o, by, now, m.Config.StopTimeout, m.Run.PID)
		return
	}
	if !m.Config.Deadlines.On() {
		return
	}
	one := func(sess *record.Session) {
		if extendDeadlines(sess, m.Config.Deadlines, by, now) {
			dl, _ := SessionDeadline(sess, m.Config.Deadlines)
			o.info("agent extended its turn deadline", "session", sess.ID, "by", by, "deadline", dl.Kind,
				"left", dl.At.Sub(now).Round(time.Millisecond), "capped_at", 2*dl.Limit)
			o.save(sess.ID)
		}
	}
	if msg.Session != "" {
		if sess, ok := m.Sessions[msg.Session]; ok {
			one(sess)
		}
		return
	}
	for _, id := range m.sessionIDs() {
		one(m.Sessions[id])
	}
}
