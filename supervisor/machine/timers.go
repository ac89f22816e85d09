package machine

import (
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
)

// Watchdog limits: WATCHDOG_USEC from an agent is clamped to this range.
const (
	minWatchdog = 100 * time.Millisecond
	maxWatchdog = 24 * time.Hour
)

// Before judging a silent agent the watchdog waits for queued datagrams (a
// ping may be among them) for up to maxWatchdogDeferrals looks of
// watchdogDeferral each. The socket holds at most a few hundred datagrams,
// which intake reads in a few milliseconds, so 200 ms only runs out when
// something keeps refilling it. Deadlines defer the same way.
const (
	watchdogDeferral     = 20 * time.Millisecond
	maxWatchdogDeferrals = 10
)

// WatchdogState is the hang detector. Pings are recorded by the runner on
// the monotonic clock, so host sleep (which stops that clock) is never a
// hang.
type WatchdogState struct {
	Period time.Duration // 0: off
	due    time.Time     // when the timer was set to fire
	graced bool          // one extra look given after supervise itself was frozen
	// deferred counts the looks postponed because datagrams were queued on
	// the notify socket; bounded so a flood cannot postpone the verdict.
	deferred int
	// late is how far past due the first look at a silent agent came; the
	// deferrals after it keep it, so a freeze before them still counts.
	late time.Duration
}

// A watchdog look ends in one of these.
type wdVerdict int

const (
	wdWait   wdVerdict = iota // the agent pinged within the period: look again when it runs out
	wdDefer                   // datagrams are queued (a ping may be among them): look again shortly
	wdFrozen                  // supervise itself was frozen past the deadline: one more period
	wdKill                    // the agent is silent: kill it
)

// look decides what the watchdog does when its timer fires, given the time
// since the last ping and whether datagrams are queued on the notify socket.
// It returns when to look again.
func (w *WatchdogState) look(now time.Time, since time.Duration, queued bool) (wdVerdict, time.Duration) {
	if since < w.Period {
		w.graced, w.deferred = false, 0
		return wdWait, w.Period - since
	}
	if w.deferred == 0 {
		w.late = now.Sub(w.due)
	}
	if w.deferred < maxWatchdogDeferrals && queued {
		w.deferred++
		return wdDefer, watchdogDeferral
	}
	if w.late > time.Second && !w.graced {
		w.graced = true
		return wdFrozen, min(w.Period, 5*time.Second)
	}
	return wdKill, 0
}

func (m *Machine) armWatchdog(o *out, d time.Duration, now time.Time) {
	m.Watchdog.due = now.Add(d)
	o.arm(TimerWatchdog, m.Watchdog.due)
}

// setWatchdog applies WATCHDOG_USEC= from the agent: a new period, counted
// from now (systemd resets the timer too).
func (m *Machine) setWatchdog(o *out, d time.Duration, now time.Time) {
	d = min(max(d, minWatchdog), maxWatchdog)
	if !m.Running() {
		return
	}
	o.info("agent changed its watchdog period", "watchdog", d)
	m.Watchdog.Period = d
	m.Watchdog.due = now.Add(d)
	o.add(Arm{Timer: TimerWatchdog, At: m.Watchdog.due, ResetPing: true})
}

// watchdogFired runs when the watchdog timer fires.
func (m *Machine) watchdogFired(o *out, e TimerFired, now time.Time) {
	if !m.Running() || m.Stop != nil || m.Abort != nil || m.Watchdog.Period <= 0 {
		return
	}
	v, next := m.Watchdog.look(now, e.SincePing, e.Queued)
	switch v {
	case wdWait, wdDefer:
		m.armWatchdog(o, next, now)
	case wdFrozen:
		// The agent's pings could not be read while supervise was stopped
		// (SIGSTOP, a stalled VM): give it one more look.
		o.warn("watchdog: supervise was frozen itself; looking again before judging the agent", "frozen", m.Watchdog.late.Round(time.Millisecond))
		m.armWatchdog(o, next, now)
	case wdKill:
		if m.Watchdog.deferred >= maxWatchdogDeferrals {
			o.warn("watchdog: the notify socket stayed busy while the agent was silent; judging anyway",
				"waited", time.Duration(m.Watchdog.deferred)*watchdogDeferral)
		}
		why := "no WATCHDOG=1 within the watchdog period"
		if e.JobStopped {
			// The commonest cause of a silent agent in a terminal: it read
			// or wrote the terminal from a background process group.
			why += " (the agent is stopped: SIGSTOP, or SIGTTIN/SIGTTOU after it used the terminal from a background process group)"
		}
		m.abort(o, record.ReasonWatchdog, "killing the agent: "+why, sigABRT, now,
			"since_ping", e.SincePing.Round(time.Millisecond), "watchdog", m.Watchdog.Period)
	}
}

// timerFired dispatches a fired timer.
func (m *Machine) timerFired(o *out, e TimerFired, now time.Time) {
	switch e.Timer {
	case TimerBackoff:
		// The runner sends LaunchDue; nothing to decide here.
	case TimerGrace:
		m.graceFired(o, e, now)
	case TimerWatchdog:
		m.watchdogFired(o, e, now)
	case TimerDeadline:
		m.deadlineFired(o, e, now)
	case TimerFlush:
		m.flush(o, e, now)
	}
}

// flush is the once-a-second look: the memory guard, the deadlines, and
// the crash-loop guard's proof by time.
func (m *Machine) flush(o *out, e TimerFired, now time.Time) {
	if e.MaxRSS > 0 && e.RSS > e.MaxRSS && m.Running() && m.Stop == nil && m.Abort == nil {
		m.abort(o, record.ReasonMemory, "killing the agent: its process tree uses more memory than --max-rss",
			m.Config.StopSignal, now, "rss", e.RSS, "max_rss", e.MaxRSS)
	}
	m.rearmDeadlines(o)
	m.watchHangs(o, e, now)
	if m.Running() && m.limitsDue(o, now) {
		m.deliverLive(o)
	}
	o.add(Publish{})
	if m.Guard.Open && m.Running() && m.Config.Guard.Proven(m.Run.Started, now) {
		m.clearGuard(o, "the run outlived --guard-gap")
	}
}

// deadlinesLive reports whether turn deadlines are watched now.
func (m *Machine) deadlinesLive() bool {
	return m.Running() && m.Config.Deadlines.On() && m.Stop == nil && m.Abort == nil
}

// armDeadline sets the deadline timer to fire at at, if that is sooner
// than it is set to (or force).
func (m *Machine) armDeadline(o *out, at time.Time, force bool) {
	if m.deadlineArmed && !force && !at.Before(m.deadlineDue) {
		return
	}
	m.deadlineArmed, m.deadlineDue = true, at
	o.arm(TimerDeadline, at)
}

func (m *Machine) stopDeadlines(o *out) {
	if m.deadlineArmed {
		o.disarm(TimerDeadline)
	}
	m.deadlineArmed, m.DeadlineDeferred = false, 0
}

// noteDeadline arms the timer for sess's deadline after a marker changed it.
func (m *Machine) noteDeadline(o *out, sess *record.Session) {
	if !m.deadlinesLive() {
		return
	}
	if dl, ok := SessionDeadline(sess, m.Config.Deadlines); ok {
		m.armDeadline(o, dl.At, false)
	}
}

// rearmDeadlines sets the timer to the earliest deadline of any session, or
// stops it.
func (m *Machine) rearmDeadlines(o *out) {
	if !m.deadlinesLive() {
		m.stopDeadlines(o)
		return
	}
	var first time.Time
	for _, sess := range m.Sessions {
		if dl, ok := SessionDeadline(sess, m.Config.Deadlines); ok && (first.IsZero() || dl.At.Before(first)) {
			first = dl.At
		}
	}
	if first.IsZero() {
		m.stopDeadlines(o)
		return
	}
	m.armDeadline(o, first, true)
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
		m.rearmDeadlines(o)
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
	m.abort(o, record.ReasonTurnTimeout, "stopping the agent: a turn ran past its deadline (--turn-timeout/--phase-timeout)",
		m.Config.StopSignal, now, "session", late[0].ID, "deadline", dls[0].Kind)
	o.add(Publish{})
}

// extendTimeout applies EXTEND_TIMEOUT_USEC=by: during a stop it extends
// the grace period; otherwise it extends the deadlines of the sender's
// session (or, without one, of every session mid-turn), capped at twice
// each flag. Heartbeats never extend anything.
func (m *Machine) extendTimeout(o *out, msg marker.Message, by time.Duration, now time.Time) {
	if m.Grace.Armed {
		m.extendGrace(o, by, now)
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
