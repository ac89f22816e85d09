package supervisor

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/journal"
)

// Watchdog limits: WATCHDOG_USEC from an agent is clamped to this range.
const (
	minWatchdog = 100 * time.Millisecond
	maxWatchdog = 24 * time.Hour
	// maxExtend caps how far EXTEND_TIMEOUT_USEC can push a grace period
	// beyond --stop-timeout.
	maxExtend = 5 * time.Minute
)

// watchdogState is the loop's hang detector. Pings are recorded by intake
// on the monotonic clock, so host sleep (which stops that clock) is never a
// hang.
type watchdogState struct {
	period time.Duration // 0: off
	timer  *time.Timer
	due    time.Time // when the timer was set to fire
	graced bool      // one extra look given after supervise itself was frozen
	// deferred counts the looks postponed because datagrams were queued on
	// the notify socket; bounded so a flood cannot postpone the verdict.
	deferred int
}

// Before judging a silent agent the watchdog waits for queued datagrams (a
// ping may be among them) for up to maxWatchdogDeferrals looks of
// watchdogDeferral each. The socket holds at most a few hundred datagrams,
// which intake reads in a few milliseconds, so 200 ms only runs out when
// something keeps refilling it.
const (
	watchdogDeferral     = 20 * time.Millisecond
	maxWatchdogDeferrals = 10
)

// abortState is a kill supervise started on its own (watchdog), as opposed
// to a requested stop.
type abortState struct {
	reason string
	at     time.Time
}

func (s *Supervisor) wdC() <-chan time.Time {
	if s.wd.timer == nil {
		return nil
	}
	return s.wd.timer.C
}

func (s *Supervisor) armWatchdog(d time.Duration, now time.Time) {
	if s.wd.timer == nil {
		s.wd.timer = time.NewTimer(d)
	} else {
		s.wd.timer.Reset(d)
	}
	s.wd.due = now.Add(d)
}

func (s *Supervisor) stopWatchdog() {
	if s.wd.timer != nil {
		s.wd.timer.Stop()
		s.wd.timer = nil
	}
}

// startWatchdog starts the hang detector for a new child; its launch
// counts as the first ping.
func (s *Supervisor) startWatchdog(now time.Time) {
	s.wd = watchdogState{period: s.cfg.Watchdog}
	s.in.lastPing.Store(int64(now.Sub(s.in.base)))
	s.pingsAtLaunch = s.in.pings.Load()
	if s.wd.period > 0 {
		s.armWatchdog(s.wd.period, now)
	}
}

// setWatchdog applies WATCHDOG_USEC= from the agent: a new period, counted
// from now (systemd resets the timer too).
func (s *Supervisor) setWatchdog(d time.Duration, now time.Time) {
	d = min(max(d, minWatchdog), maxWatchdog)
	if s.proc == nil {
		return
	}
	s.log.Info("agent changed its watchdog period", "watchdog", d)
	s.wd.period = d
	s.in.lastPing.Store(int64(now.Sub(s.in.base)))
	s.armWatchdog(d, now)
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
// since the last ping and whether datagrams are queued on the notify socket
// (asked only when the agent is overdue). It returns when to look again.
func (w *watchdogState) look(now time.Time, since time.Duration, pending func() bool) (wdVerdict, time.Duration) {
	if since < w.period {
		w.graced, w.deferred = false, 0
		return wdWait, w.period - since
	}
	if w.deferred < maxWatchdogDeferrals && pending() {
		w.deferred++
		return wdDefer, watchdogDeferral
	}
	if late := now.Sub(w.due); late > time.Second && !w.graced {
		w.graced = true
		return wdFrozen, min(w.period, 5*time.Second)
	}
	return wdKill, 0
}

// checkWatchdog runs when the watchdog timer fires.
func (s *Supervisor) checkWatchdog(now time.Time) {
	if s.proc == nil || s.stop != nil || s.abort != nil || s.wd.period <= 0 {
		return
	}
	since := s.in.sincePing(now)
	late := now.Sub(s.wd.due)
	v, next := s.wd.look(now, since, s.notify.Pending)
	switch v {
	case wdWait, wdDefer:
		s.armWatchdog(next, now)
	case wdFrozen:
		// The agent's pings could not be read while supervise was stopped
		// (SIGSTOP, a stalled VM): give it one more look.
		s.log.Warn("watchdog: supervise was frozen itself; looking again before judging the agent", "frozen", late.Round(time.Millisecond))
		s.armWatchdog(next, now)
	case wdKill:
		if s.wd.deferred >= maxWatchdogDeferrals {
			s.log.Warn("watchdog: the notify socket stayed busy while the agent was silent; judging anyway",
				"waited", time.Duration(s.wd.deferred)*watchdogDeferral)
		}
		why := "no WATCHDOG=1 within the watchdog period"
		if stoppedByJobControl(s.proc.PID()) {
			// The commonest cause of a silent agent in a terminal: it read
			// or wrote the terminal from a background process group.
			why += " (the agent is stopped: SIGSTOP, or SIGTTIN/SIGTTOU after it used the terminal from a background process group)"
		}
		s.abortChild("watchdog", why, "since_ping", since.Round(time.Millisecond), "watchdog", s.wd.period)
	}
}

// watchdogTriggered applies WATCHDOG=trigger: the agent asks for the
// watchdog action now.
func (s *Supervisor) watchdogTriggered(now time.Time) {
	if s.proc == nil || s.stop != nil || s.abort != nil {
		return
	}
	s.abortChild("watchdog", "the agent sent WATCHDOG=trigger")
}

// abortChild ends the child on supervise's own initiative, as systemd does
// on a watchdog timeout: SIGABRT (so the agent can dump its state) and
// SIGCONT, then SIGKILL to the tree after the grace period.
func (s *Supervisor) abortChild(reason, why string, args ...any) {
	now := time.Now()
	s.abort = &abortState{reason: reason, at: now}
	s.stopWatchdog()
	s.log.Warn("killing the agent: "+why, append([]any{"reason", reason, "pid", s.proc.PID(),
		"signal", "SIGABRT", "sigkill_after", s.cfg.StopTimeout}, args...)...)
	if err := s.proc.Terminate(unix.SIGABRT); err != nil {
		s.log.Warn("signalling the child failed", "pid", s.proc.PID(), "err", err)
	}
	s.armGrace(now, now.Add(s.cfg.StopTimeout))
}

// Grace: one timer for the SIGKILL deadline of a stop or an abort.

func (s *Supervisor) graceC() <-chan time.Time {
	if s.grace.timer == nil {
		return nil
	}
	return s.grace.timer.C
}

// armGrace starts the grace period of an ending that began at start.
func (s *Supervisor) armGrace(start, deadline time.Time) {
	s.grace.start, s.grace.deadline = start, deadline
	if s.grace.timer == nil {
		s.grace.timer = time.NewTimer(time.Until(deadline))
	} else {
		s.grace.timer.Reset(time.Until(deadline))
	}
}

func (s *Supervisor) stopGrace() {
	if s.grace.timer != nil {
		s.grace.timer.Stop()
		s.grace.timer = nil
	}
}

// graceFired runs when the grace timer fires: SIGKILL, unless the agent
// extended its deadline meanwhile.
func (s *Supervisor) graceFired(now time.Time) {
	if s.proc == nil {
		return
	}
	if now.Before(s.grace.deadline) {
		s.grace.timer.Reset(s.grace.deadline.Sub(now))
		return
	}
	if s.stop != nil && s.stop.fromTTY {
		s.ctrlCExpired()
		return
	}
	s.grace.timer = nil
	s.log.Warn("child did not stop within the grace period: killing its process tree",
		"pid", s.proc.PID(), "stop_timeout", s.cfg.StopTimeout)
	_ = s.proc.Kill()
}

// extendGrace applies EXTEND_TIMEOUT_USEC= while the agent is being
// stopped: it may take until now+d to exit, within --stop-timeout plus
// maxExtend of the start of the stop.
func (s *Supervisor) extendGrace(d time.Duration, now time.Time) {
	if s.grace.timer == nil {
		return
	}
	at := now.Add(d)
	if limit := s.grace.start.Add(s.cfg.StopTimeout + maxExtend); at.After(limit) {
		at = limit
	}
	if at.After(s.grace.deadline) {
		s.log.Info("agent extended its stop deadline", "pid", s.proc.PID(), "by", d, "deadline", at.Sub(now).Round(time.Millisecond))
		s.grace.deadline = at
		s.publish() // the upward notifier extends supervise's own stop timeout
	}
}

// checkMemory is the memory guard, run once a second while a child runs:
// when the RSS of the whole tree exceeds --max-rss, the agent is stopped
// (stop signal, grace, SIGKILL) and the death's reason is memory.
func (s *Supervisor) checkMemory() {
	if s.cfg.MaxRSS == 0 || s.proc == nil || s.stop != nil || s.abort != nil {
		return
	}
	used := child.TreeRSS(s.proc.PID())
	if used <= s.cfg.MaxRSS {
		return
	}
	now := time.Now()
	s.abort = &abortState{reason: journal.ReasonMemory, at: now}
	s.stopWatchdog()
	s.log.Warn("killing the agent: its process tree uses more memory than --max-rss", "reason", journal.ReasonMemory,
		"pid", s.proc.PID(), "rss", used, "max_rss", s.cfg.MaxRSS, "signal", unix.SignalName(s.cfg.StopSignal),
		"sigkill_after", s.cfg.StopTimeout)
	if err := s.proc.Terminate(s.cfg.StopSignal); err != nil {
		s.log.Warn("signalling the child failed", "pid", s.proc.PID(), "err", err)
	}
	s.armGrace(now, now.Add(s.cfg.StopTimeout))
}

// stoppedByJobControl reports whether pid is in the stopped state (T):
// /proc/<pid>/stat's state field, after the command name's last ')'.
func stoppedByJobControl(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'T'
}
