package machine

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
)

// launchDue prepares the next launch: the checks before the first one,
// lifted parks, and what the run delivers.
func (m *Machine) launchDue(o *out, e LaunchDue, now time.Time) {
	if m.Stop != nil {
		m.endStopped(o)
		return
	}
	first := m.launches == 0
	m.on(onDue)
	m.limitsDue(o, now, m.Hold() != "")
	if first && m.Verifying && len(m.owed()) > 0 {
		// Nothing is resumed from state not yet verified.
		o.info("waiting for the journal check before the first launch: resumes are owed")
		o.add(AwaitVerify{})
		return
	}
	// A resume that may be dispatched now is delivered instead of the
	// task (prepareDelivery); with none, a session of this task that is
	// parked, stopped or owed a held resume keeps the task from starting.
	if m.Policy.Task && len(m.pending()) == 0 && m.waitLimit(o, now) {
		return // a session of the task waits out a limit: not the task again
	}
	if first && m.Policy.BlockRerun && len(m.pending()) == 0 && m.taskBlocked(o, &m.Config, m.Hold()) > 0 {
		o.add(End{Code: ExitParked})
		return
	}
	n := m.launch()
	m.liftParks(o, e.Fingerprint, now, m.Config.Resume)
	m.prepareDelivery(o, n)
}

// NeedFingerprint reports whether the next LaunchDue needs the agent's
// fingerprint: a park by the breaker records one, which a changed agent
// lifts.
func (m *Machine) NeedFingerprint() bool {
	if !m.Config.Fingerprint {
		return false
	}
	for _, sess := range m.Sessions {
		if sess.State == record.Parked && sess.ParkedBy == record.ParkedByBreaker && sess.Fingerprint != nil {
			return true
		}
	}
	return false
}

// liftParks: a session parked by the breaker under an agent whose
// fingerprint differs from the one about to run becomes resume_pending,
// once.
func (b *Book) liftParks(o *out, fp *record.Fingerprint, now time.Time, p resume.Policy) {
	if fp == nil {
		return
	}
	var ids []string
	for _, id := range b.sessionIDs() {
		sess := b.Sessions[id]
		if !resume.Liftable(*sess, fp.Sum) {
			continue
		}
		was := sess.Fingerprint
		*sess = resume.Lift(*sess, now, p)
		ids = append(ids, sess.ID)
		o.warn("session's park lifted: the agent changed since it was parked; resuming it once",
			"session", sess.ID, "turn", sess.Turn, "crash_count", sess.CrashCount,
			"parked_fingerprint", short(was.Sum), "fingerprint", short(fp.Sum))
	}
	if len(ids) > 0 {
		o.save(ids...)
		o.add(Commit{Kind: CommitPending, Why: "recording lifted parks"})
	}
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

// prepareDelivery decides what run n delivers: with --resume-exec, the
// oldest pending session in the relaunch's argv; otherwise every pending
// session in the resume file. The runner writes the file and answers
// Delivered, whose commit precedes the fork, so a resume counts against its
// session if run n dies.
func (m *Machine) prepareDelivery(o *out, n uint64) {
	pending := m.pending()
	if ids := m.heldSessions(); len(ids) > 0 {
		o.warn("automatic resumes held", "why", m.Hold(), "sessions", ids)
	}
	if len(pending) == 0 {
		m.unfold(o, m.Sessions, n)
		m.Task.Ran = true
		o.add(Launch{Run: n, Argv: m.Config.Argv, Stale: true, Tail: m.Policy.Tail})
		return
	}
	argv, via := m.Config.Argv, "resume file"
	if m.Policy.ExecDelivery {
		if !m.Task.Ran && m.launches == 1 {
			o.warn("task mode: a resume is owed from an earlier run of supervise; delivering it instead of starting the task again (the task argv runs only when nothing is owed)",
				"session", pending[0].ID)
		}
		if argv, pending = execArgv(o, m.Config.Task.Exec, pending); pending == nil {
			m.prepareDelivery(o, n) // every one was refused and parked
			return
		}
		via = "--resume-exec"
	}
	ids := make([]string, len(pending))
	for i, sess := range pending {
		ids[i] = sess.ID
	}
	o.add(Launch{Run: n, Argv: argv, Items: resume.Items(copies(pending)), IDs: ids, Via: via, Task: m.Policy.ExecDelivery,
		Tail: m.Policy.Tail})
}

// execArgv builds the --resume-exec argv of the oldest pending session.
// A session whose id cannot go into an argv is parked instead, with its
// reason, and the next one is tried; nil when none is left.
func execArgv(o *out, exec []string, pending []*record.Session) ([]string, []*record.Session) {
	for _, sess := range pending {
		if argv, ok := templated(o, exec, sess); ok {
			return argv, []*record.Session{sess}
		}
	}
	return nil, nil
}

// templated fills the --resume-exec template for sess; a session whose id
// cannot be passed (see resume.ExecArgv) is parked instead, with the reason.
func templated(o *out, exec []string, sess *record.Session) ([]string, bool) {
	argv, err := resume.ExecArgv(exec, resume.Items(copies([]*record.Session{sess}))[0])
	if err == nil {
		return argv, true
	}
	sess.State, sess.Resume, sess.ParkedBy, sess.Fingerprint = record.Parked, nil, record.ParkedByTemplate, nil
	sess.Reason = "not resumed with --resume-exec: " + err.Error()
	o.save(sess.ID)
	o.add(Commit{Kind: CommitPending, Why: "recording a park"})
	o.error("session parked: a value of it cannot be passed to --resume-exec", "session", sess.ID, "err", err)
	return nil, false
}

func copies(ss []*record.Session) []record.Session {
	out := make([]record.Session, len(ss))
	for i, s := range ss {
		out[i] = *s
	}
	return out
}

// started records that run e.Run's child runs.
func (m *Machine) started(o *out, e Started) {
	relaunch := m.start(e)
	m.Task.runMarkers, m.hooked, m.beatBorn = false, "", 0
	m.Watchdog = WatchdogState{Period: m.Config.Watchdog}
	m.hang = hangState{alive: e.At, startRetried: m.hang.startRetried}
	if m.Watchdog.Period > 0 {
		m.armWatchdog(o, m.Watchdog.Period, e.At)
	}
	if relaunch {
		o.add(Count{Metric: "restart"})
	}
	o.add(Commit{Kind: CommitLaunch, Run: m.Run, Relaunch: relaunch, Why: "recording the child's start"})
	o.info("child started", "run", e.Run, "pid", e.PID, "cmd", e.Argv[0])
	o.add(Publish{})
	var ids []string
	for _, sess := range m.Sessions {
		if sess.State == record.ResumePending && sess.Resume != nil && sess.Resume.Run == e.Run {
			ids = append(ids, sess.ID)
		}
	}
	sort.Strings(ids)
	held := ""
	if len(m.heldSessions()) > 0 {
		held = m.Hold()
	}
	o.add(ObserveStart{Run: e.Run, Argv: e.Argv, Delivered: ids, Held: held})
}

// Hold says why automatic resumes are not dispatched now, "" if they are.
func (m *Machine) Hold() string {
	switch {
	case m.VerifyFailed:
		return "the journal failed its consistency check"
	case m.Verifying:
		return "checking the journal after an unclean stop"
	case m.Config.ResumeOff:
		return "--resume off"
	case m.Guard.Open:
		return "crash-loop guard open"
	}
	return ""
}

// deliverLive hands resumes that became dispatchable while the child runs
// (a manual resume, the guard clearing) to that child: the resume file is
// rewritten and the child gets --resume-signal. Without that flag they
// wait for the next start.
func (m *Machine) deliverLive(o *out) {
	if !m.Running() || !m.Policy.LiveDelivery {
		return
	}
	all := m.pending()
	var fresh []string
	for _, sess := range all {
		if sess.Resume.Run != m.Run.Run {
			fresh = append(fresh, sess.ID)
		}
	}
	if len(fresh) == 0 {
		return
	}
	o.add(DeliverLive{Items: resume.Items(copies(all)), Fresh: fresh})
}

// clearGuard records that the agent proved healthy, and delivers what the
// guard held.
func (m *Machine) clearGuard(o *out, why string) {
	if !m.Guard.Open && m.Guard.Chain == 0 {
		return
	}
	if m.Guard.Open {
		o.info("the agent proved healthy: crash-loop guard cleared", "why", why)
	}
	m.Guard = m.Config.Guard.Healthy(m.Guard)
	o.savePolicy()
	m.deliverLive(o)
}

// verified applies the background journal check's result.
func (m *Machine) verified(o *out, e Verified) {
	m.Verifying = false
	if e.Err != "" {
		m.VerifyFailed = true
		o.add(Fatal(e))
		return
	}
	o.info("journal checked: consistent")
	m.deliverLive(o)
}

// ErrUnknownSession is returned by a manual resume of a session the
// journal has never seen.
var ErrUnknownSession = errors.New("unknown session")

// Reply answers a control request (ManualResume): Err, or nil.
type Reply struct{ Err error }

func (Reply) effect() {}

// manualResume applies `supervise resume ID`.
func (m *Machine) manualResume(o *out, e ManualResume, now time.Time) {
	sess, ok := m.Sessions[e.ID]
	if !ok {
		if e.Stored == nil {
			o.add(Reply{Err: fmt.Errorf("%w %q", ErrUnknownSession, e.ID)})
			return
		}
		sess = e.Stored
	}
	updated, err := resume.Manual(*sess, now, m.Config.Resume.Template)
	if err != nil {
		o.add(Reply{Err: err})
		return
	}
	m.liftBudget(o, *sess)
	m.Sessions[e.ID] = &updated
	o.save(e.ID)
	o.add(Commit{Kind: CommitPending, Why: "recording a manual resume"})
	o.info("session resumed by hand", "session", e.ID, "was", string(sess.State))
	m.deliverLive(o)
	m.limitResumedByHand(o)
	o.add(Reply{})
}
