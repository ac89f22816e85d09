package machine

import (
	"errors"
	"time"

	"github.com/supervise-dev/supervise/record"
)

// Ending is the part that ends a run: a stop asked of supervise, a kill
// supervise started on its own, and the SIGKILL deadline of either.
type Ending struct {
	// Stop is a stop asked of supervise; Abort a kill supervise started
	// on its own (a guard: the watchdog, the memory guard, a deadline).
	Stop  *Stop
	Abort *Abort
	// Grace is the SIGKILL deadline of a stop or an abort.
	Grace         Grace
	lastInterrupt time.Time
}

// Stop is a stop asked of supervise.
type Stop struct {
	Signal  int // what asked for it; 0 for Shutdown
	At      time.Time
	Forced  bool // a second signal: kill at once, exit 128+N
	FromTTY bool // a terminal Ctrl-C the child received itself
	// Restart: the stop is a restart (supervise restart): the run is
	// relaunched at once, what it interrupts handed over as resumes. Any
	// other stop asked meanwhile makes it a stop.
	Restart bool
}

// Abort is a kill supervise started on its own.
type Abort struct {
	Reason record.Reason
	At     time.Time
}

// Grace is the SIGKILL deadline of an ending that began at Start.
type Grace struct {
	Armed           bool
	Start, Deadline time.Time
}

// forceQuitWindow is how soon a second terminal Ctrl-C must follow the
// first to force-quit.
const forceQuitWindow = 2 * time.Second

// duplicateSignalWindow: the same stop signal again this soon after the
// first is the same request delivered twice, not a force-quit: timeout(1)
// signals its child and then its process group, and `kill -- -PGID` of a
// group that holds supervise reaches it next to a direct kill.
const duplicateSignalWindow = 100 * time.Millisecond

// maxExtend caps how far EXTEND_TIMEOUT_USEC can push a grace period
// beyond --stop-timeout.
const maxExtend = 5 * time.Minute

// stopAsked applies a signal to supervise, or Shutdown (Signal 0).
func (m *Machine) stopAsked(o *out, e StopRequested, now time.Time) {
	if !m.Running() {
		if m.Stop != nil {
			return
		}
		// Between runs (backoff) or before the first: nothing to stop.
		if e.Signal != 0 {
			o.info("stop requested during backoff", "signal", e.Name)
		}
		m.Stop = &Stop{Signal: e.Signal, At: now}
		if p := m.Phase(); p == PhaseBackoff || p == PhaseLimitWait {
			m.endStopped(o)
		}
		return
	}
	if e.Signal == sigINT && m.Config.Foreground && (m.Stop == nil || m.Stop.FromTTY) {
		m.ctrlC(o, now, m.Config.StopTimeout, m.Run.PID)
		return
	}
	m.requestStop(o, e.Signal, e.Name, now)
}

// ctrlC applies a terminal Ctrl-C: the kernel delivered it to the agent
// too (same process group), so it is not forwarded.
func (n *Ending) ctrlC(o *out, now time.Time, timeout time.Duration, pid int) {
	if !n.lastInterrupt.IsZero() && now.Sub(n.lastInterrupt) <= forceQuitWindow {
		o.warn("second Ctrl-C: force-quitting", "pid", pid)
		n.Stop = &Stop{Signal: sigINT, At: now, Forced: true}
		o.add(Signal{Kill: true})
		return
	}
	n.lastInterrupt = now
	n.Stop = &Stop{Signal: sigINT, At: now, FromTTY: true}
	n.armGrace(o, now, now.Add(timeout))
	o.info("Ctrl-C reached the agent; if it exits now that is a stop, not a crash; Ctrl-C again within 2s force-quits",
		"pid", pid)
}

// requestStop starts a graceful stop, or forces one already under way.
func (m *Machine) requestStop(o *out, sig int, name string, now time.Time) {
	if m.Stop != nil && m.Stop.Restart {
		m.Stop.Restart = false // a stop asked during a restart wins
		o.info("stop requested during a restart: stopping, not relaunching", "reason", name)
	}
	if m.Stop != nil && !m.Stop.FromTTY {
		if sig == 0 {
			return // Shutdown during a stop: nothing more to do
		}
		if sig == m.Stop.Signal && now.Sub(m.Stop.At) < duplicateSignalWindow {
			o.info("the same signal again at once: one stop request delivered twice (as timeout(1) does); send it again to force the stop",
				"signal", name, "pid", m.Run.PID)
			return
		}
		o.warn("second signal during the stop: killing the process tree at once", "signal", name, "pid", m.Run.PID)
		m.Stop.Forced, m.Stop.Signal = true, sig
		o.add(Signal{Kill: true})
		return
	}
	m.Stop = &Stop{Signal: sig, At: now}
	m.on(onStop)
	o.disarm(TimerWatchdog)
	if sig == 0 {
		name = "shutdown"
	}
	o.info("stopping the child", "reason", name, "pid", m.Run.PID,
		"stop_signal", m.Config.StopSignalName, "stop_timeout", m.Config.StopTimeout)
	o.add(Publish{}, Signal{Sig: m.Config.StopSignal})
	if m.Abort == nil {
		m.armGrace(o, now, now.Add(m.Config.StopTimeout))
	}
}

// armGrace starts the grace period of an ending that began at start.
func (n *Ending) armGrace(o *out, start, deadline time.Time) {
	n.Grace = Grace{Armed: true, Start: start, Deadline: deadline}
	o.arm(TimerGrace, deadline)
}

// graceFired: SIGKILL, unless the agent extended its deadline meanwhile;
// after a terminal Ctrl-C, a look at whether the agent carries on.
func (m *Machine) graceFired(o *out, e TimerFired, now time.Time) {
	if !m.Running() || !m.Grace.Armed {
		return
	}
	if now.Before(m.Grace.Deadline) {
		o.arm(TimerGrace, m.Grace.Deadline)
		return
	}
	m.Grace.Armed = false
	if m.Stop != nil && m.Stop.FromTTY {
		m.ctrlCExpired(o, e, now)
		return
	}
	o.warn("child did not stop within the grace period: killing its process tree",
		"pid", m.Run.PID, "stop_timeout", m.Config.StopTimeout)
	o.add(Signal{Kill: true})
}

// A terminal Ctrl-C reaches the agent directly (it shares supervise's
// process group), once. An agent that handles SIGINT decides for itself:
// an interactive agent cancels its turn and carries on, and that is not a
// stop. An agent that ignores (or blocks) SIGINT never saw the Ctrl-C at
// all; when it is still running --stop-timeout after it, supervise stops
// it as for any requested stop: stop signal, SIGCONT, grace, SIGKILL to the
// tree. The death is then a requested stop, not a crash.
func (m *Machine) ctrlCExpired(o *out, e TimerFired, now time.Time) {
	if !e.IgnoresSIGINT {
		o.info("the agent handled Ctrl-C and carries on; Ctrl-C twice within 2s force-quits", "pid", m.Run.PID)
		return
	}
	o.warn("the agent ignores SIGINT and did not exit within --stop-timeout of Ctrl-C: stopping it",
		"pid", m.Run.PID, "stop_timeout", m.Config.StopTimeout)
	m.requestStop(o, sigINT, "interrupt", now)
}

// extendGrace applies EXTEND_TIMEOUT_USEC= while the agent is being
// stopped: it may take until now+d to exit, within --stop-timeout plus
// maxExtend of the start of the stop.
func (n *Ending) extendGrace(o *out, d time.Duration, now time.Time, timeout time.Duration, pid int) {
	at := now.Add(d)
	if limit := n.Grace.Start.Add(timeout + maxExtend); at.After(limit) {
		at = limit
	}
	if at.After(n.Grace.Deadline) {
		o.info("agent extended its stop deadline", "pid", pid, "by", d, "deadline", at.Sub(now).Round(time.Millisecond))
		n.Grace.Deadline = at
		o.add(Publish{}) // the upward notifier extends supervise's own stop timeout
	}
}

// endStopped ends the loop after a requested stop.
func (m *Machine) endStopped(o *out) {
	m.unfold(o, m.Sessions, m.nextRun) // a delivery recorded for a run that will not start
	m.Task.stopped(o, m.Sessions, &m.Config, m.Hold())
	o.add(End{Code: m.stopCode()})
}

// stopCode is the exit code after a requested stop: 0, or 128+N when a
// second signal N forced it.
func (e *Ending) stopCode() int {
	if e.Stop != nil && e.Stop.Forced {
		if e.Stop.Signal != 0 {
			return 128 + e.Stop.Signal
		}
		return 128 + sigKILL
	}
	return ExitOK
}

// stopRequested reports whether e counts as a requested stop: supervise
// asked the child to stop, or a terminal Ctrl-C reached it shortly before.
func (n *Ending) stopRequested(e Exited, timeout time.Duration) bool {
	if n.Stop == nil {
		return false
	}
	if n.Stop.FromTTY {
		return !e.Ended.After(n.Stop.At.Add(timeout))
	}
	return true
}

// restartAsked applies `supervise restart`: a running agent is stopped as
// for a requested stop and relaunched at once, what its run interrupts
// handed to the next run as a person's resumes (the death's stages); no
// crash is counted and the guard is untouched. Between runs, the wait is
// cut short and the launch comes now.
func (m *Machine) restartAsked(o *out, now time.Time) {
	switch p := m.Phase(); {
	case m.Stop != nil || m.Abort != nil:
		o.add(Reply{Err: errors.New("a stop is under way: not restarting")})
		return
	case p == PhaseRunning:
		o.info("restart requested: stopping the agent, then relaunching it at once")
		m.requestStop(o, sigTERM, "restart", now)
		m.Stop.Restart = true
	case p == PhaseBackoff || p == PhaseLimitWait:
		o.info("restart requested between runs: launching now")
		m.on(onCut)
		o.add(Arm{Timer: TimerBackoff, Disarm: true}, Backoff{})
	default:
		o.info("restart requested: the agent is being launched")
	}
	o.add(Reply{})
}
