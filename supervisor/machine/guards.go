package machine

import (
	"time"

	"github.com/supervise-dev/supervise/record"
)

// The guards are what makes supervise stop the agent on its own: each is
// one row of one table (its reason, its signal, what the log says), and
// each trips through one path (trip): the kill supervise starts, SIGKILL
// to the tree after the grace period, and a dirty death of the row's
// reason, decided as any other.

// guardKind names one guard.
type guardKind uint8

const (
	guardWatchdog guardKind = iota // no WATCHDOG=1 within the period
	guardTrigger                   // the agent sent WATCHDOG=trigger
	guardDeadline                  // a turn or phase past --turn-timeout/--phase-timeout
	guardStart                     // no marker nor model request within --start-timeout
	guardSilence                   // an open turn silent for --silence-timeout
	guardMemory                    // the tree past --max-rss
	guardStall                     // a model stream silent for --stream-stall (proxy)
	guardBudget                    // a session past --max-tokens or the state dir past --max-tokens-total
	numGuards
)

// guardRow is one guard: the reason of the death it causes, whether it
// asks with SIGABRT (so the agent can dump its state, as systemd's
// watchdog does) rather than the stop signal, and what the log says.
type guardRow struct {
	reason record.Reason
	abrt   bool
	msg    string
}

var guards = [numGuards]guardRow{
	guardWatchdog: {record.ReasonWatchdog, true, "killing the agent: no WATCHDOG=1 within the watchdog period"},
	guardTrigger:  {record.ReasonWatchdog, true, "the agent sent WATCHDOG=trigger"},
	guardDeadline: {record.ReasonTurnTimeout, false, "stopping the agent: a turn ran past its deadline (--turn-timeout/--phase-timeout)"},
	guardStart:    {record.ReasonStartTimeout, false, "the agent sent no marker and made no model request within --start-timeout: stopping it as hung"},
	guardSilence:  {record.ReasonSilence, false, "an open turn was silent for --silence-timeout: stopping the agent as hung"},
	guardMemory:   {record.ReasonMemory, false, "killing the agent: its process tree uses more memory than --max-rss"},
	guardStall:    {record.ReasonStreamStall, false, "a model stream stalled: no content for --stream-stall; stopping the agent"},
	guardBudget:   {record.ReasonTokenBudget, false, "a session went past its token budget: parked; stopping the agent"},
}

// Watch is the part that watches the running agent: the watchdog, the
// turn deadlines' timer, and the hang deadlines' memory of the run.
type Watch struct {
	// Watchdog is the hang detector's state.
	Watchdog WatchdogState
	// DeadlineDeferred counts deadline looks postponed for queued datagrams.
	DeadlineDeferred int
	deadlineArmed    bool
	deadlineDue      time.Time
	hang             hangState
}

// trip stops the agent for guard g: the row's signal, then SIGKILL to the
// tree after the grace period; the death is dirty, with the row's reason.
// more is appended to the row's words.
func (m *Machine) trip(o *out, g guardKind, more string, now time.Time, args ...any) {
	row := guards[g]
	m.Abort = &Abort{Reason: row.reason, At: now}
	o.disarm(TimerWatchdog)
	sig, name := m.Config.StopSignal, m.Config.StopSignalName
	if row.abrt {
		sig, name = sigABRT, "SIGABRT"
	}
	o.warn(row.msg+more, append([]any{"reason", row.reason, "pid", m.Run.PID, "signal", name,
		"sigkill_after", m.Config.StopTimeout}, args...)...)
	o.add(Signal{Sig: sig})
	m.armGrace(o, now, now.Add(m.Config.StopTimeout))
}

// watching reports whether a guard may trip now: a child runs and no
// stop or abort is under way.
func (s *State) watching() bool { return s.Running() && s.Stop == nil && s.Abort == nil }

// timerHandlers dispatch a fired timer (TimerBackoff: the runner sends
// LaunchDue; nothing to decide here).
var timerHandlers = [...]func(*Machine, *out, TimerFired, time.Time){
	TimerBackoff:  func(*Machine, *out, TimerFired, time.Time) {},
	TimerGrace:    (*Machine).graceFired,
	TimerWatchdog: (*Machine).watchdogFired,
	TimerDeadline: (*Machine).deadlineFired,
	TimerFlush:    (*Machine).flush,
}

// timerFired dispatches a fired timer.
func (m *Machine) timerFired(o *out, e TimerFired, now time.Time) {
	if int(e.Timer) < len(timerHandlers) {
		timerHandlers[e.Timer](m, o, e, now)
	}
}

// flush is the once-a-second look: the memory guard, the deadlines, the
// hang deadlines, limits that reset, and the crash-loop guard's proof by
// time.
func (m *Machine) flush(o *out, e TimerFired, now time.Time) {
	if e.MaxRSS > 0 && e.RSS > e.MaxRSS && m.watching() {
		m.trip(o, guardMemory, "", now, "rss", e.RSS, "max_rss", e.MaxRSS)
	}
	m.rearmDeadlines(o, m.Sessions, m.Config.Deadlines, m.deadlinesLive())
	m.watchHangs(o, e, now)
	if m.Running() && m.limitsDue(o, now, m.Hold() != "") {
		m.deliverLive(o)
	}
	o.add(Publish{})
	if m.Guard.Open && m.Running() && m.Config.Guard.Proven(m.Run.Started, now) {
		m.clearGuard(o, "the run outlived --guard-gap")
	}
}

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

// armWatchdog sets the watchdog's timer d from now.
func (w *Watch) armWatchdog(o *out, d time.Duration, now time.Time) {
	w.Watchdog.due = now.Add(d)
	o.arm(TimerWatchdog, w.Watchdog.due)
}

// setWatchdog applies WATCHDOG_USEC= from the agent: a new period, counted
// from now (systemd resets the timer too).
func (w *Watch) setWatchdog(o *out, d time.Duration, now time.Time, running bool) {
	d = min(max(d, minWatchdog), maxWatchdog)
	if !running {
		return
	}
	o.info("agent changed its watchdog period", "watchdog", d)
	w.Watchdog.Period = d
	w.Watchdog.due = now.Add(d)
	o.add(Arm{Timer: TimerWatchdog, At: w.Watchdog.due, ResetPing: true})
}

// watchdogFired runs when the watchdog timer fires.
func (m *Machine) watchdogFired(o *out, e TimerFired, now time.Time) {
	if !m.watching() || m.Watchdog.Period <= 0 {
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
		more := ""
		if e.JobStopped {
			// The commonest cause of a silent agent in a terminal: it read
			// or wrote the terminal from a background process group.
			more = " (the agent is stopped: SIGSTOP, or SIGTTIN/SIGTTOU after it used the terminal from a background process group)"
		}
		m.trip(o, guardWatchdog, more, now, "since_ping", e.SincePing.Round(time.Millisecond), "watchdog", m.Watchdog.Period)
	}
}

// The hang deadlines, for CLIs that send no WATCHDOG=1:
//
//   - --start-timeout: no marker and no model request since the launch
//     (claude-code #75613: `claude -p` hung four hours at start);
//   - --silence-timeout: a turn open (in_turn: not waiting for a person nor
//     a limit) with no marker, no model traffic and no output for the
//     duration. A CLI whose last words say it waits out a limit itself
//     (Codex sleeps a retry-after silently: agentsaid.Retrying) is waiting,
//     not hung, until the time it names.
//
// Both stop the agent (stop signal, grace, SIGKILL) with their own reason,
// decided as hangs: a death mid-turn resumed once and parked at the
// breaker. A task that hung at start with no session of its own is
// started again once (nothing ran, so nothing is repeated). Looked at once
// a second (TimerFlush), with the time the runner's clock gives.

// hangState is what the hang deadlines remember of the current run.
type hangState struct {
	// alive is when the run last showed life: its launch, a marker, model
	// traffic, output (Written grew), or a wait the CLI announced.
	alive time.Time
	// spoke: a marker or model request came since the launch.
	spoke   bool
	written int64
	// startRetried: this invocation started the task again once after it
	// hung at start.
	startRetried bool
}

// lifeSign records a marker or model traffic from the agent.
func (w *Watch) lifeSign(now time.Time, running bool) {
	if running {
		w.hang.spoke = true
		w.hang.alive = now
	}
}

// watchHangs applies the start and silence deadlines at a flush.
func (m *Machine) watchHangs(o *out, e TimerFired, now time.Time) {
	if m.Phase() != PhaseRunning || m.Stop != nil || m.Abort != nil {
		return
	}
	if e.Written != m.hang.written {
		m.hang.written, m.hang.alive = e.Written, now
	}
	if e.RetryingUntil.After(now.Add(MaxWordsWait)) {
		e.RetryingUntil = time.Time{} // words naming a longer wait are not believed
	}
	if e.RetryingUntil.After(m.hang.alive) {
		// The CLI waits out a limit itself until then: not a hang; the
		// silence counts from the end of that wait.
		m.hang.alive = e.RetryingUntil
	}
	if e.RetryingUntil.After(now) {
		return
	}
	if d := m.Config.StartTimeout; d > 0 && !m.hang.spoke && now.Sub(m.Run.Started) >= d {
		m.trip(o, guardStart, "", now, "start_timeout", d)
		return
	}
	if d := m.Config.SilenceTimeout; d > 0 && now.Sub(m.hang.alive) >= d {
		if id := m.silentTurn(); id != "" {
			m.trip(o, guardSilence, "", now, "session", id, "silence_timeout", d, "silent", now.Sub(m.hang.alive).Round(time.Second))
		}
	}
}
