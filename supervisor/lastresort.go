package supervisor

import (
	"os"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/child"
)

// The last resort. The loop owns the child and ends supervise; when it
// cannot (a journal fault left a lock held, a write it should not have
// made blocked, a bug), a watcher that shares nothing with it but atomics
// ends supervise instead: it kills the agent's tree, found by its
// environment tag, and exits 1, so that an outer manager restarts a
// supervise that works. Three triggers:
//
//   - the journal faulted after open (journal.DB.Faulted): at once;
//   - a stop signal the loop has not run since, for --stop-timeout plus
//     stopMargin: SIGTERM is honoured even when the loop is stuck;
//   - a loop that has not run for maxLoopStall: its longest legitimate
//     stall is a commit (two fdatasyncs) or a fork, far below it.
const (
	stopMargin   = 5 * time.Second
	maxLoopStall = 60 * time.Second
	watchEvery   = 250 * time.Millisecond
)

// Watch forwards the stop signals from sigc to the loop (Signal) and runs
// the last resort, until cancel is closed (an oklog/run actor: the
// interrupt closes cancel). exit ends the process (os.Exit).
func (s *Supervisor) Watch(sigc <-chan os.Signal, cancel <-chan struct{}, exit func(code int)) error {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	faulted := s.db.Faulted()
	for {
		select {
		case sig := <-sigc:
			// The first signal the loop has not run since is the one a
			// stuck loop leaves unanswered.
			if a := s.health.stopAsked.Load(); a == 0 || s.health.tick.Load() >= a {
				s.health.stopAsked.Store(max(int64(s.clock.Now().Sub(s.in.base)), 1)) // 0 is "none"
			}
			s.Signal(sig)
		case <-faulted:
			s.abandon("the journal faulted (its file changed under supervise, truncated or damaged, or a disk error): "+
				s.db.Fault().Error(), exit)
			faulted = nil
		case <-t.C:
			if why := s.stuck(s.clock.Now()); why != "" {
				s.abandon(why, exit)
			}
		case <-cancel:
			return nil
		}
	}
}

// stuck says why the loop cannot be trusted to end supervise, "" if it can.
func (s *Supervisor) stuck(now time.Time) string {
	since := now.Sub(s.in.base)
	tick := time.Duration(s.health.tick.Load())
	if asked := time.Duration(s.health.stopAsked.Load()); asked > 0 && tick < asked &&
		since-asked > s.cfg.StopTimeout+stopMargin {
		return "a stop signal was not acted on within --stop-timeout plus 5s: the loop is stuck"
	}
	if s.health.looping.Load() && since-tick > maxLoopStall {
		return "the supervision loop has not run for 60s"
	}
	return ""
}

// abandon kills the agent's tree and exits 1 without touching the loop's
// state or the journal: the journal stays marked in use, so the next start
// checks it before anything is believed.
func (s *Supervisor) abandon(why string, exit func(code int)) {
	s.logHold.release()
	s.cfg.Log.Error("supervise cannot go on: killing the agent's process tree and exiting 1", "why", why,
		"exit_code", ExitInternal)
	if r := s.root.Load(); r != nil && r.pid > 0 {
		syscall.Kill(-r.pid, syscall.SIGKILL) // its process group
		syscall.Kill(r.pid, syscall.SIGKILL)
	}
	child.KillTagged(s.TagPrefix())
	exit(ExitInternal)
}
