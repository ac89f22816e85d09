package machine

import (
	"time"

	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
)

// exited records the end of the current run and decides what follows:
// the death's commit, the per-session decisions before it, then a relaunch
// (after a backoff) or the end.
func (m *Machine) exited(o *out, e Exited, now time.Time) {
	if m.Stop != nil && m.Stop.FromTTY && !m.stopRequested(e) {
		m.Stop = nil // the Ctrl-C was for the agent, which carried on; this is a new death
	}
	r := m.Run
	if e.ExecFailed {
		r = record.Run{Run: m.launching, Started: e.Started, Argv: e.Argv}
	}
	r.PID, r.Ended, r.ExitCode, r.Signal = e.PID, e.Ended, e.Code, e.Signal
	r.Reason, r.Dirty = m.classify(e)
	r.Reason = m.namedOOM(o, r.Reason, r.Dirty, e.OOMKills)
	limited := m.limitDeath(r, e)
	dirty := r // the death as it is without the limit: what the sessions not mid-turn see
	if limited {
		r.Reason, r.Dirty = record.ReasonLimit, false
	}
	last := r
	m.Run, m.LastExit, m.Abort = r, &last, nil
	m.on(onExited)
	m.Grace.Armed, m.deadlineArmed = false, false
	if r.Dirty {
		if !e.ExecFailed {
			// Only a run that started a child chains: one that could not
			// start backs off, and holds no turn a resume could kill.
			m.Guard = m.Config.Guard.Death(m.Guard, r.Ended)
		}
		o.add(Count{Metric: "death", Label: r.Reason})
		if r.Reason == record.ReasonWatchdog {
			o.add(Count{Metric: "watchdog"})
		}
	}
	requested := r.Reason == record.ReasonStopped && !r.Dirty
	m.lostConversation(o, e, r)
	var decs []resume.Decision
	if limited {
		decs = m.decideLimit(o, e, r, resume.Death{Reason: dirty.Reason, Signal: e.signal(), ExitCode: r.ExitCode,
			Run: r.Run, At: r.Ended, Said: e.Said}, now)
	} else if !e.ExecFailed {
		decs = m.decide(o, resume.Death{Reason: r.Reason, Signal: e.signal(), ExitCode: r.ExitCode, Requested: requested,
			Clean: !r.Dirty && !requested, Run: r.Run, At: r.Ended, Said: e.Said}, now)
	}
	dec, st := m.Config.Policy.Next(m.Backoff, crashloop.Run{Started: r.Started, Ended: r.Ended,
		Dirty: r.Dirty, ExecFailed: e.ExecFailed, Proven: m.TurnDone}, e.jitter())
	if limited {
		// Not a crash: the backoff does not count it, and what follows is
		// the wait for the reset (or, with --restart never, the end).
		dec = crashloop.Decision{Action: crashloop.Relaunch}
		if m.Policy.ByRestart && m.Config.Policy.Restart == crashloop.Never {
			dec.Action = crashloop.Exit
		}
	} else {
		m.Backoff = st
	}
	var reserve uint64
	if m.Stop == nil && dec.Action != crashloop.GiveUp {
		reserve = m.nextRun
	}
	if m.Stop == nil && dec.Action == crashloop.Relaunch && m.Policy.Fold && reserve != 0 &&
		m.retryDelay(dec.Delay, e.Ended) == 0 {
		m.fold(o, reserve)
	}
	o.add(Commit{Kind: CommitDeath, Run: r, Reserve: reserve, Why: "recording the child's death"})
	if m.Stop == nil && dec.Action == crashloop.Relaunch && dec.Delay == 0 && m.Policy.HoldLogs {
		// The death is committed and the relaunch is immediate: what
		// follows is only said, and is written once the next child is
		// forked (or as soon as the loop waits or ends).
		o.add(HoldLogs{})
	}
	m.logDeath(o, e, r, dec)
	m.logDecisions(o, decs)
	changed := make([]string, len(decs))
	for i, d := range decs {
		changed[i] = d.Session.ID
	}
	o.add(ObserveDeath{Run: r, Changed: changed})
	if m.Guard.Open {
		o.warn("crash-loop guard is open: automatic resumes are held until a run proves healthy", "chain", m.Guard.Chain)
	}
	o.add(Publish{})
	m.next(o, e, dec, limited)
}

// limitDeath reports whether run r, which ended with e, ended on a usage
// or rate limit: an exit by the agent itself (not 0, or 0 mid-turn) that
// its words, its hooks or the proxy say a limit caused.
func (m *Machine) limitDeath(r record.Run, e Exited) bool {
	if e.ExecFailed || !r.Dirty || (r.Reason != record.ReasonExit && r.Reason != record.ReasonTurnOpen) {
		return false
	}
	return m.limitSeen(e, r.Run)
}

// jitter is the random number the backoff's jitter draws from.
func (e Exited) jitter() float64 { return e.Random }

// logDeath says how the run ended and what follows, as next decides it.
func (m *Machine) logDeath(o *out, e Exited, r record.Run, dec crashloop.Decision) {
	next := dec.Action.String()
	switch {
	case m.launches == 1 && e.ExecFailed:
		next = "end" // the very first launch cannot start: not retried
	case m.Stop != nil:
		next = "stop"
	case !m.Policy.ByRestart && dec.Action != crashloop.GiveUp:
		next = m.taskNextWords(e, dec)
	case dec.Action == crashloop.Relaunch && dec.Delay > 0:
		next = "relaunch in " + dec.Delay.Round(time.Millisecond).String()
	case dec.Action == crashloop.Relaunch:
		next = "relaunch now"
	}
	level := LevelInfo
	if r.Dirty {
		level = LevelWarn
	}
	attrs := []any{"run", r.Run, "pid", r.PID, "how", e.How,
		"exit_code", r.ExitCode, "signal", r.Signal, "reason", r.Reason, "dirty", r.Dirty,
		"uptime", e.Ended.Sub(e.Started).Round(time.Millisecond), "next", next}
	if e.Said != "" {
		attrs = append(attrs, "agent_said", e.Said)
	}
	o.log(level, "child exited", attrs...)
}

// next decides what follows a death whose record is committed.
func (m *Machine) next(o *out, e Exited, dec crashloop.Decision, limited bool) {
	switch {
	case m.launches == 1 && e.ExecFailed:
		// The very first launch failing is a configuration error: say so
		// and stop, rather than retry a binary that is not there.
		o.add(End{Code: e.Code, Err: "agent could not be started: " + e.ExecErr})
	case m.Stop != nil:
		m.endStopped(o)
	case dec.Action == crashloop.GiveUp:
		o.error("giving up: the agent keeps dying", "failures", dec.Failures,
			"limit", m.Config.Policy.GiveUp, "exit_code", ExitGaveUp)
		o.add(End{Code: ExitGaveUp})
	case !m.Policy.ByRestart:
		m.taskNext(o, e, dec)
	case dec.Action == crashloop.Exit:
		o.add(End{Code: e.Code})
	case limited && len(m.pending()) == 0 && m.waitLimit(o, e.Ended):
	default:
		m.wait(o, m.waitForRetry(o, dec.Delay, e.Ended), false)
	}
}

// waitForRetry is the relaunch delay, stretched to the rate limit's reset
// time of a session it would resume (retryDelay), and says so.
func (m *Machine) waitForRetry(o *out, delay time.Duration, now time.Time) time.Duration {
	d := m.retryDelay(delay, now)
	if d > delay {
		o.info("the resume waits for the model API's rate limit to reset", "delay", d.Round(time.Millisecond))
	}
	return d
}

// endStopped ends the loop after a requested stop.
func (m *Machine) endStopped(o *out) {
	m.unfold(o, m.nextRun) // a delivery recorded for a run that will not start
	m.taskStopped(o)
	o.add(End{Code: m.stopCode()})
}

// stopCode is the exit code after a requested stop: 0, or 128+N when a
// second signal N forced it.
func (m *Machine) stopCode() int {
	if m.Stop != nil && m.Stop.Forced {
		if m.Stop.Signal != 0 {
			return 128 + m.Stop.Signal
		}
		return 128 + sigKILL
	}
	return ExitOK
}

// stopRequested reports whether e counts as a requested stop: supervise
// asked the child to stop, or a terminal Ctrl-C reached it shortly before.
func (m *Machine) stopRequested(e Exited) bool {
	if m.Stop == nil {
		return false
	}
	if m.Stop.FromTTY {
		return !e.Ended.After(m.Stop.At.Add(m.Config.StopTimeout))
	}
	return true
}

// classify decides how a run ended, and whether the death is dirty as
// the reason table says (record.Reason.Dirty).
func (m *Machine) classify(e Exited) (reason string, dirty bool) {
	reason = m.reasonOf(e)
	row, ok := record.LookupReason(reason)
	return reason, !ok || row.DirtyFor(e.Code) // a reason not in the table is dirty: fail closed
}

// reasonOf names how a run ended.
func (m *Machine) reasonOf(e Exited) string {
	switch {
	case m.Abort != nil && (m.Stop == nil || m.Abort.At.Before(m.Stop.At)):
		return m.Abort.Reason
	case m.stopRequested(e):
		return record.ReasonStopped
	case e.ExecFailed:
		return record.ReasonExecFailed
	case e.Signal != 0, e.Code != 0 && e.InnerSignal != 0:
		return record.ReasonSignal
	case e.Code != 0:
		return record.ReasonExit
	case m.openTurn():
		return record.ReasonTurnOpen
	}
	return record.ReasonExit
}

// namedOOM renames a dirty death the kernel's OOM killer had a hand in.
func (m *Machine) namedOOM(o *out, reason string, dirty bool, ooms uint64) string {
	if !dirty || ooms == 0 {
		return reason
	}
	switch reason {
	case record.ReasonSignal, record.ReasonExit, record.ReasonTurnOpen:
		o.warn("the kernel's OOM killer killed processes of the agent's cgroup", "oom_kills", ooms)
		return record.ReasonOOM
	}
	return reason
}

// decide applies the resume decisions for a death to the sessions and
// saves them for the death's commit, which follows in the same effects, so
// every decision is durable before the next child starts. It returns the
// decisions that changed a session.
func (m *Machine) decide(o *out, d resume.Death, now time.Time) []resume.Decision {
	var open []record.Session
	for _, sess := range m.Sessions {
		if sess.State.Open() {
			open = append(open, *sess)
		}
	}
	var changed []resume.Decision
	var ids, breaker []string
	warm := false
	for _, dec := range resume.Decide(open, d, now, m.Config.Resume) {
		if dec.Action == resume.Keep {
			continue
		}
		sess := dec.Session
		if dec.Action == resume.Park {
			o.add(Count{Metric: "park", Label: sess.ParkedBy})
			sess.Fingerprint = nil
			if sess.ParkedBy == record.ParkedByBreaker {
				breaker = append(breaker, sess.ID)
			}
		}
		if dec.Action == resume.Resume && m.Config.Resume.Exhausted(sess.CrashCount+1) {
			warm = true // the next death parks it: hash the agent now
		}
		m.Sessions[sess.ID] = &sess
		ids = append(ids, sess.ID)
		changed = append(changed, resume.Decision{Action: dec.Action, Session: sess})
	}
	if len(ids) > 0 {
		o.save(ids...)
	}
	if m.Config.Fingerprint && (len(breaker) > 0 || warm) {
		o.add(StampFingerprint{IDs: breaker, Warm: warm && len(breaker) == 0})
	}
	return changed
}

// fingerprinted stamps the agent's fingerprint on sessions the breaker
// parked, so that a changed agent lifts the park once.
func (m *Machine) fingerprinted(o *out, e Fingerprinted) {
	var ids []string
	for _, id := range e.IDs {
		if sess := m.Sessions[id]; sess != nil && sess.State == record.Parked && sess.ParkedBy == record.ParkedByBreaker {
			sess.Fingerprint = e.Fingerprint
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 {
		o.save(ids...)
	}
}

// maxDecisionLines bounds the per-session lines logged for one death: a
// death with 30 000 open sessions logs these and one summary line.
const maxDecisionLines = 20

// logDecisions says what was decided for each session, after the death
// that caused it has been logged and the crash-loop guard updated for it:
// a resume the guard (or --resume off, or the journal check) holds is said
// to be held, not to be resumed.
func (m *Machine) logDecisions(o *out, decs []resume.Decision) {
	logged, rest := 0, map[resume.Action]int{}
	held := m.Hold()
	for _, dec := range decs {
		sess := dec.Session
		if logged == maxDecisionLines {
			rest[dec.Action]++
			continue
		}
		logged++
		switch dec.Action {
		case resume.Resume:
			if held != "" && !sess.Resume.Manual {
				o.warn("session interrupted mid-turn: it is owed a resume, held", "session", sess.ID, "turn", sess.Turn,
					"held", held, "crash_count", sess.CrashCount, "attempt", sess.Resume.Attempt, "phase", sess.Phase, "tool", sess.Tool, "detail", sess.Detail)
				break
			}
			o.warn("session interrupted mid-turn: it will be resumed", "session", sess.ID, "turn", sess.Turn,
				"crash_count", sess.CrashCount, "attempt", sess.Resume.Attempt, "phase", sess.Phase, "tool", sess.Tool, "detail", sess.Detail)
		case resume.Park:
			o.warn("session parked: it will not be resumed automatically", "session", sess.ID, "turn", sess.Turn,
				"crash_count", sess.CrashCount, "reason", sess.Reason, "resume_with", ResumeCommand(m.Config.StateDir, sess.ID))
		case resume.Stop:
			o.info("session stopped mid-turn by the requested stop; not resumed automatically", "session", sess.ID,
				"turn", sess.Turn, "resume_with", ResumeCommand(m.Config.StateDir, sess.ID))
		}
	}
	if len(rest) > 0 {
		o.warn("more sessions decided than logged one by one: see supervise status",
			"logged", logged, "resumed", rest[resume.Resume], "parked", rest[resume.Park], "stopped", rest[resume.Stop])
	}
}

// booted takes over what the journal holds; a run the previous supervise
// left behind is decided as a dirty death before anything starts.
func (m *Machine) booted(o *out, e Booted, now time.Time) {
	for i := range e.Sessions {
		sess := e.Sessions[i]
		m.Sessions[sess.ID] = &sess
		if sess.State.Open() {
			m.open[sess.ID] = true
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
		decs := m.decide(o, resume.Death{Reason: r.Reason, Signal: r.Signal, ExitCode: r.ExitCode,
			Run: r.Run, At: r.Ended}, now)
		m.logDecisions(o, decs)
		last := *r
		m.LastExit = &last
		if r.Run >= m.nextRun {
			m.nextRun = r.Run + 1
		}
	}
	o.add(Commit{Kind: CommitBoot, Orphan: orphan, Reserve: m.nextRun, Why: "recording the boot"})
}
