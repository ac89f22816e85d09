package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/resume"
)

// ResumePath returns the resume file path inside a state dir.
func ResumePath(stateDir string) string { return filepath.Join(stateDir, "resume.json") }

// decide applies the resume decisions for a death to the in-memory
// sessions and marks them for the death's commit. It runs before that
// commit, so every decision is durable before the next child starts. It
// returns the decisions that changed a session, for logDecisions.
func (s *Supervisor) decide(d resume.Death, now time.Time) []resume.Decision {
	var open []journal.Session
	for _, sess := range s.sessions {
		if sess.State.Open() {
			open = append(open, *sess)
		}
	}
	var changed []resume.Decision
	for _, dec := range resume.Decide(open, d, now, s.cfg.Resume) {
		if dec.Action == resume.Keep {
			continue
		}
		sess := dec.Session
		s.sessions[sess.ID] = &sess
		s.markDirty(sess.ID)
		if dec.Action == resume.Park {
			s.m.parks.Inc()
		}
		changed = append(changed, dec)
	}
	s.stampBreakerParks(changed)
	s.warmFingerprint(changed)
	return changed
}

// logDecisions says what was decided for each session, after the death
// that caused it has been logged.
func (s *Supervisor) logDecisions(decs []resume.Decision) {
	logged, rest := 0, map[resume.Action]int{}
	for _, dec := range decs {
		sess := dec.Session
		if dec.Action == resume.Keep {
			continue
		}
		if logged == maxDecisionLines {
			rest[dec.Action]++
			continue
		}
		logged++
		switch dec.Action {
		case resume.Resume:
			s.log.Warn("session interrupted mid-turn: it will be resumed", "session", sess.ID, "turn", sess.Turn,
				"crash_count", sess.CrashCount, "attempt", sess.Resume.Attempt, "phase", sess.Phase, "tool", sess.Tool, "detail", sess.Detail)
		case resume.Park:
			s.log.Warn("session parked: it will not be resumed automatically", "session", sess.ID, "turn", sess.Turn,
				"crash_count", sess.CrashCount, "reason", sess.Reason, "resume_with", ResumeCommand(s.cfg.StateDir, sess.ID))
		case resume.Stop:
			s.log.Info("session stopped mid-turn by the requested stop; not resumed automatically", "session", sess.ID,
				"turn", sess.Turn, "resume_with", ResumeCommand(s.cfg.StateDir, sess.ID))
		}
	}
	if len(rest) > 0 {
		s.log.Warn("more sessions decided than logged one by one: see supervise status",
			"logged", logged, "resumed", rest[resume.Resume], "parked", rest[resume.Park], "stopped", rest[resume.Stop])
	}
}

// maxDecisionLines bounds the per-session lines logged for one death: a
// death with 30 000 open sessions logs these and one summary line.
const maxDecisionLines = 20

// held says why automatic resumes are not dispatched now, "" if they are.
func (s *Supervisor) held() string {
	switch {
	case s.verifyErr != nil:
		return "the journal failed its consistency check"
	case s.verifying:
		return "checking the journal after an unclean stop"
	case s.cfg.ResumeOff:
		return "--resume off"
	case s.guard.Open:
		return "crash-loop guard open"
	}
	return ""
}

// pending returns the sessions owed a resume that may be dispatched now:
// automatic ones unless held, manual ones always. Oldest first.
func (s *Supervisor) pending() []*journal.Session {
	held := s.held() != ""
	var out []*journal.Session
	for _, sess := range s.sessions {
		if sess.State == journal.ResumePending && sess.Resume != nil && (sess.Resume.Manual || !held) {
			out = append(out, sess)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Resume.Since.Equal(out[j].Resume.Since) {
			return out[i].ID < out[j].ID
		}
		return out[i].Resume.Since.Before(out[j].Resume.Since)
	})
	return out
}

// pendingIgnoringHold lists the sessions owed a resume, held or not.
func (s *Supervisor) pendingIgnoringHold() []*journal.Session {
	var out []*journal.Session
	for _, sess := range s.sessions {
		if sess.State == journal.ResumePending && sess.Resume != nil {
			out = append(out, sess)
		}
	}
	return out
}

// startVerify runs the journal's full check in the background.
func (s *Supervisor) startVerify() {
	s.verifying = true
	s.verifyc = make(chan error, 1)
	s.log.Info("checking the journal in the background after an unclean stop; automatic resumes wait for it")
	go func() { s.verifyc <- s.db.Verify() }()
}

// verified applies the background check's result.
func (s *Supervisor) verified(err error) {
	s.verifying = false
	s.verifyc = nil
	if err != nil {
		s.verifyErr = err
		s.fatal(err)
		return
	}
	s.log.Info("journal checked: consistent")
	s.deliverLive()
}

// heldSessions lists the sessions whose resume is held back.
func (s *Supervisor) heldSessions() []string {
	if s.held() == "" {
		return nil
	}
	var ids []string
	for _, sess := range s.sessions {
		if sess.State == journal.ResumePending && sess.Resume != nil && !sess.Resume.Manual {
			ids = append(ids, sess.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

// prepareDelivery decides what run n delivers: with --resume-exec, the
// oldest pending session in the relaunch's argv; otherwise every pending
// session in the resume file. The deliveries are committed before the
// fork, so a resume counts against its session if run n dies. It returns
// the argv and extra environment for the child.
func (s *Supervisor) prepareDelivery(n uint64) (argv []string, env []string) {
	argv = s.cfg.Argv
	path := ResumePath(s.cfg.StateDir)
	pending := s.pending()
	if ids := s.heldSessions(); len(ids) > 0 {
		s.log.Warn("automatic resumes held", "why", s.held(), "sessions", ids)
	}
	if len(pending) == 0 {
		s.task.ran = true
		if s.resumeFile {
			os.Remove(path) // never let a stale file look current
			s.resumeFile = false
		}
		if s.cfg.ResumeSignal != 0 {
			env = append(env, "SUPERVISE_RESUME_FILE="+path)
		}
		return argv, env
	}
	via := "resume file"
	if s.cfg.ResumeExec != nil {
		if !s.task.ran && s.run.Run == 0 {
			s.log.Warn("task mode: a resume is owed from an earlier run of supervise; delivering it instead of starting the task again (the task argv runs only when nothing is owed)",
				"session", pending[0].ID)
		}
		if argv, pending = s.execArgv(pending); pending == nil {
			return s.prepareDelivery(n) // every one was refused and parked
		}
		via = "--resume-exec"
	}
	switch err := resume.WriteFile(path, resume.Items(copies(pending))); {
	case err != nil && s.taskMode():
		// The continuation is in the argv; launching the task instead
		// would run it again as a new session.
		s.log.Error("writing the resume file failed: the --resume-exec launch goes ahead without it", "err", err)
	case err != nil:
		s.log.Error("writing the resume file failed: resumes not delivered this run", "err", err)
		return s.cfg.Argv, nil
	default:
		s.resumeFile = true
		env = append(env, "SUPERVISE_RESUME_FILE="+path)
	}
	ids := s.markDelivered(pending, n)
	if err := s.commitSync(nil); err != nil {
		s.log.Error("journal: recording the deliveries failed", "err", err)
	}
	s.log.Info("delivering resumes", "run", n, "via", via, "sessions", ids)
	return argv, env
}

// execArgv builds the --resume-exec argv of the oldest pending session.
// A session whose id cannot go into an argv (it begins with '-') is parked
// instead, with its reason, and the next one is tried; nil when none is left.
func (s *Supervisor) execArgv(pending []*journal.Session) ([]string, []*journal.Session) {
	for _, sess := range pending {
		if argv, ok := s.templated(sess); ok {
			return argv, []*journal.Session{sess}
		}
	}
	return nil, nil
}

// templated fills the --resume-exec template for sess; a session whose id
// cannot be passed (see resume.ExecArgv) is parked instead, with the reason.
func (s *Supervisor) templated(sess *journal.Session) ([]string, bool) {
	argv, err := resume.ExecArgv(s.cfg.ResumeExec, resume.Items(copies([]*journal.Session{sess}))[0])
	if err == nil {
		return argv, true
	}
	sess.State, sess.Resume = journal.Parked, nil
	sess.Reason = "not resumed with --resume-exec: " + err.Error()
	s.markDirty(sess.ID)
	s.log.Error("session parked: its id cannot be passed to --resume-exec", "session", sess.ID, "err", err)
	return nil, false
}

func copies(ss []*journal.Session) []journal.Session {
	out := make([]journal.Session, len(ss))
	for i, s := range ss {
		out[i] = *s
	}
	return out
}

// markDelivered records that run n got the resumes of ss.
func (s *Supervisor) markDelivered(ss []*journal.Session, n uint64) []string {
	var ids []string
	for _, sess := range ss {
		r := *sess.Resume
		r.Delivered++
		r.Run = n
		sess.Resume = &r
		s.m.resumes.Inc()
		s.markDirty(sess.ID)
		s.touch(sess.ID)
		ids = append(ids, sess.ID)
	}
	return ids
}

// deliverLive hands resumes that became dispatchable while the child runs
// (a manual resume, the guard clearing) to that child: the resume file is
// rewritten and the child gets --resume-signal. Without that flag they
// wait for the next start. It reports whether it delivered.
func (s *Supervisor) deliverLive() bool {
	if s.proc == nil || s.cfg.ResumeSignal == 0 || s.cfg.ResumeExec != nil {
		return false
	}
	all := s.pending()
	var fresh []*journal.Session
	for _, sess := range all {
		if sess.Resume.Run != s.run.Run {
			fresh = append(fresh, sess)
		}
	}
	if len(fresh) == 0 {
		return false
	}
	if err := resume.WriteFile(ResumePath(s.cfg.StateDir), resume.Items(copies(all))); err != nil {
		s.log.Error("writing the resume file failed", "err", err)
		return false
	}
	s.resumeFile = true
	ids := s.markDelivered(fresh, s.run.Run)
	if err := s.commitSync(nil); err != nil {
		s.log.Error("journal: recording the deliveries failed", "err", err)
	}
	if err := s.proc.Signal(s.cfg.ResumeSignal); err != nil {
		s.log.Warn("signalling the resume to the agent failed", "err", err)
		return false
	}
	s.log.Info("delivering resumes to the running agent", "run", s.run.Run, "sessions", ids, "signal", s.cfg.ResumeSignal.String())
	return true
}

// clearGuard records that the agent proved healthy, and delivers what the
// guard held.
func (s *Supervisor) clearGuard(why string) {
	if !s.guard.Open && s.guard.Chain == 0 {
		return
	}
	if s.guard.Open {
		s.log.Info("the agent proved healthy: crash-loop guard cleared", "why", why)
	}
	s.guard = s.cfg.Guard.Healthy(s.guard)
	s.policyDirty = true
	s.flushAsync()
	s.deliverLive()
}

// ErrUnknownSession is returned by a manual resume of a session the
// journal has never seen.
var ErrUnknownSession = errors.New("unknown session")

// manualResume applies `supervise resume ID` on the loop goroutine.
func (s *Supervisor) manualResume(id string) (delivery string, err error) {
	sess, ok := s.sessions[id]
	if !ok {
		var found journal.Session
		err := s.db.View(func(tx *journal.Tx) (err error) {
			found, ok, err = tx.Session(id)
			return err
		})
		if err != nil {
			return "", err
		}
		if !ok {
			return "", fmt.Errorf("%w %q", ErrUnknownSession, id)
		}
		sess = &found
	}
	updated, err := resume.Manual(*sess, time.Now(), s.cfg.Resume.Template)
	if err != nil {
		return "", err
	}
	s.sessions[id] = &updated
	s.markDirty(id)
	if err := s.commitSync(nil); err != nil {
		return "", err
	}
	s.log.Info("session resumed by hand", "session", id, "was", string(sess.State))
	switch {
	case s.deliverLive():
		return "delivered to the running agent", nil
	case s.proc == nil:
		return "delivered when the agent starts", nil
	}
	return "delivered at the agent's next start", nil
}
