package machine

import (
	"time"

	"github.com/supervise-dev/supervise/resume"
)

// booted takes over what the journal holds; a run the previous supervise
// left behind is decided as a dirty death before anything starts.
func (m *Machine) booted(o *out, e Booted, now time.Time) {
	for i := range e.Sessions {
		sess := e.Sessions[i]
		m.Sessions[sess.ID] = &sess
		if sess.State.Open() {
			m.open[sess.ID] = true
		}
		if st := personStatus(&sess); st != "" {
			if m.announced == nil {
				m.announced = map[string]string{}
			}
			m.announced[sess.ID] = st // told before this boot
		}
	}
	m.nextRun, m.LastExit, m.Restarts = e.NextRun, e.LastExit, e.Restarts
	m.Backoff, m.Guard, m.Verifying = e.Backoff, e.Guard, e.Verifying
	m.Budget = e.Budget.clean()
	m.RefusalsChanged++ // the proxy's snapshot starts from what the journal holds
	for i := range e.Sessions {
		m.Budgets.track(e.Sessions[i].ID, m.Sessions[e.Sessions[i].ID])
	}
	orphan := e.Orphan
	if r := orphan; r != nil && r.PID == 0 && !m.anyHandedTo(r.Run) {
		// Reserved and never recorded as launched, and no session was
		// handed to it: whether or not it forked, no turn was in it. Not a
		// death; its number is reserved again.
		o.info("the run the previous supervise reserved never started a child: not a death", "run", r.Run)
		orphan = nil
		m.nextRun = max(m.nextRun, r.Run)
	}
	if r := orphan; r != nil {
		// Supervise's own death: the sessions in the run are decided as
		// at any dirty death (each turn is resumed once, then parked), but
		// the crash-loop guard, the agent's, does not count it.
		o.warn("the run the previous supervise left behind counts as a dirty death", "run", r.Run,
			"pid", r.PID, "reason", r.Reason)
		decs := m.Book.decide(o, resume.Death{Reason: r.Reason, Signal: r.Signal, ExitCode: r.ExitCode,
			Run: r.Run, At: r.Ended}, now, m.Config.Resume, m.Config.Fingerprint)
		logDecisions(o, decs, m.Hold(), m.Config.StateDir)
		last := *r
		m.LastExit = &last
		if r.Run >= m.nextRun {
			m.nextRun = r.Run + 1
		}
	}
	o.add(Commit{Kind: CommitBoot, Orphan: orphan, Reserve: m.nextRun, Why: "recording the boot"})
}
