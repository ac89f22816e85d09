package supervisor

import (
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
}

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

// checkWatchdog runs when the watchdog timer fires.
func (s *Supervisor) checkWatchdog(now time.Time) {
	if s.proc == nil || s.stop != nil || s.abort != nil || s.wd.period <= 0 {
		return
	}
	since := s.in.sincePing(now)
	if since < s.wd.period {
		s.wd.graced = false
		s.armWatchdog(s.wd.period-since, now)
		return
	}
	// Before judging, make sure no ping is still queued on the socket.
	if s.notify.Pending() {
		s.armWatchdog(20*time.Millisecond, now)
		return
	}
	if late := now.Sub(s.wd.due); late > time.Second && !s.wd.graced {
		// supervise itself was frozen (SIGSTOP, a stalled VM): the agent's
		// pings could not be read either. Give it one more look.
		s.wd.graced = true
		s.log.Warn("watchdog: supervise was frozen itself; looking again before judging the agent", "frozen", late.Round(time.Millisecond))
		s.armWatchdog(min(s.wd.period, 5*time.Second), now)
		return
	}
	s.abortChild("watchdog", "no WATCHDOG=1 within the watchdog period", "since_ping", since.Round(time.Millisecond), "watchdog", s.wd.period)
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
