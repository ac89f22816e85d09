package supervisor

import (
	"os"
	"time"
)

// A terminal Ctrl-C reaches the agent directly (it shares supervise's
// process group), once. An agent that handles SIGINT decides for itself:
// an interactive agent cancels its turn and carries on, and that is not a
// stop. An agent that ignores (or blocks) SIGINT never saw the Ctrl-C at
// all; when it is still running --stop-timeout after it, supervise stops
// it as for any requested stop: stop signal, SIGCONT, grace, SIGKILL to the
// tree. The death is then a requested stop, not a crash.

// armCtrlC starts the wait after a terminal Ctrl-C.
func (s *Supervisor) armCtrlC(now time.Time) {
	s.armGrace(now, now.Add(s.cfg.StopTimeout))
}

// ctrlCExpired runs when the agent is still alive --stop-timeout after a
// terminal Ctrl-C (the grace timer fired with a Ctrl-C stop pending).
func (s *Supervisor) ctrlCExpired() {
	s.grace.timer = nil
	p := s.proc
	if !ignoresInterrupt(p.PID()) {
		s.log.Info("the agent handled Ctrl-C and carries on; Ctrl-C twice within 2s force-quits", "pid", p.PID())
		return
	}
	s.log.Warn("the agent ignores SIGINT and did not exit within --stop-timeout of Ctrl-C: stopping it",
		"pid", p.PID(), "stop_timeout", s.cfg.StopTimeout)
	s.requestStop(os.Interrupt, p)
}
