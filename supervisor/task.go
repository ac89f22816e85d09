package supervisor

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/notify"
)

// Task mode (--resume-exec): the agent argv is a task, such as
// `claude -p "fix the tests"`, and runs once. Every later launch is a resume
// launch for a pending session (the --resume-exec template filled in), and
// when nothing is pending supervise ends:
//
//	a session this invocation saw is parked, or its resume is held   5
//	the last turn this invocation saw completed                      0
//	otherwise                                                        the agent's own exit status
//
// The task is never run again as a new session, whatever --restart says:
// that would repeat its side effects and spend API credit. A resume held by
// the crash-loop guard (or --resume off) is not waited for: supervise ends
// with 5 and says how to resume it by hand. Resumes owed when supervise
// starts (a `supervise resume` while it was not running, or a supervise that
// died mid-task) are delivered first, and the task is then not started: it
// is the rerun of the same command that the exit-5 message gives.

// taskState is task mode's memory of one invocation of supervise.
type taskState struct {
	// id identifies the task command (taskID), recorded on the sessions it
	// opens.
	id string
	// ran is true once the task argv was launched.
	ran bool
	// markers is true once any session marker or heartbeat arrived.
	markers bool
	// touched holds the sessions this invocation saw or resumed.
	touched map[string]bool
	// outcome is the outcome of the last turn-end seen, "" after a
	// turn-begin or resumed.
	outcome notify.Outcome
}

func (s *Supervisor) taskMode() bool { return s.cfg.ResumeExec != nil }

// taskID identifies a task command: its working directory and argv (an
// agent CLI keeps its sessions per project directory, so the same words in
// another directory are another task).
func taskID(dir string, argv []string) string {
	h := sha256.New()
	h.Write([]byte(dir))
	for _, a := range argv {
		h.Write([]byte{0})
		h.Write([]byte(a))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// taskBlocked reports, before the task would start, the sessions an
// earlier run of this same task command left parked or stopped mid-turn.
// Starting the task again would open a new session beside them and repeat
// the side effects they may already have had, at API cost (a cron job or a
// shell loop rerunning the command after exit 5 would do so every time).
// It prints each with its reason and the command that resumes it, and
// returns how many there are; the loop then ends with ExitParked.
func (s *Supervisor) taskBlocked() int {
	var ids []string
	for id, sess := range s.sessions {
		if sess.Task == s.task.id && (sess.State == journal.Parked || sess.State == journal.Stopped) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return 0
	}
	sort.Strings(ids)
	w := s.report()
	for _, id := range ids {
		sess := s.sessions[id]
		what := "is parked: " + sess.Reason
		if sess.State == journal.Stopped {
			what = "was stopped mid-turn"
		}
		fmt.Fprintf(w, "supervise: session %s of this task %s\n", id, what)
		fmt.Fprintf(w, "supervise: to resume it: %s\n", s.rerunCommand(id))
	}
	fmt.Fprintf(w, "supervise: not starting the task again: it would open a new session and repeat what the parked one may already have done. To start it afresh anyway, add --rerun-task.\n")
	s.log.Warn("task not started: an earlier run of the same task left a session parked or stopped",
		"sessions", ids, "exit_code", ExitParked)
	return len(ids)
}

// touch records that session id was seen in this invocation.
func (s *Supervisor) touch(id string) {
	if !s.taskMode() {
		return
	}
	if s.task.touched == nil {
		s.task.touched = map[string]bool{}
	}
	s.task.touched[id] = true
}

// taskMarker records what a marker means for the task's end.
func (s *Supervisor) taskMarker(m notify.Message) {
	if !s.taskMode() {
		return
	}
	s.task.markers = true
	s.touch(m.Session)
	switch m.Event {
	case notify.EventTurnBegin, notify.EventResumed:
		s.task.outcome = ""
	case notify.EventTurnEnd:
		s.task.outcome = m.Outcome
	}
}

// taskNextWords says in the death's log line what follows in task mode.
func (s *Supervisor) taskNextWords(dec crashloop.Decision) string {
	if len(s.pending()) == 0 {
		return "end of task"
	}
	if dec.Action == crashloop.Relaunch && dec.Delay > 0 {
		return "resume launch in " + dec.Delay.Round(time.Millisecond).String()
	}
	return "resume launch now"
}

// taskNext decides what follows a death in task mode: a resume launch for
// a pending session (done false), or the end of supervise with its code.
func (s *Supervisor) taskNext(exit child.Exit) (code int, done bool) {
	if exit.ExecErr != nil {
		// A resume launch whose command cannot start: retrying it cannot
		// help, and the session stays owed its resume.
		s.log.Error("the --resume-exec command could not be started: ending the task; the session stays owed its resume",
			"err", exit.ExecErr)
		s.taskReport()
		return exit.Code, true
	}
	// Park here, not at the launch, a session whose id the template refuses:
	// with none left, the launch would be the task itself again.
	for _, sess := range s.pending() {
		if _, ok := s.templated(sess); ok {
			s.log.Info("task mode: relaunching as --resume-exec for a pending session", "session", sess.ID)
			return 0, false
		}
	}
	return s.taskEnd(exit), true
}

// taskEnd returns supervise's exit code at the end of a task and tells the
// person what they must know.
func (s *Supervisor) taskEnd(exit child.Exit) int {
	stuck := s.taskReport()
	switch {
	case stuck > 0:
		s.log.Warn("task ended with a session that needs a person", "exit_code", ExitParked)
		return ExitParked
	case s.task.outcome == notify.OutcomeCompleted:
		s.log.Info("task ended: its last turn completed", "exit_code", ExitOK)
		return ExitOK
	}
	s.log.Info("task ended: exiting with the agent's own status", "exit_code", exit.Code,
		"last_outcome", string(s.task.outcome))
	return exit.Code
}

// taskStopped tells the person who stopped a task how to continue each
// session of it the stop left stopped mid-turn, or still owed a resume (a
// stop during the backoff before a resume launch).
func (s *Supervisor) taskStopped() {
	if !s.taskMode() {
		return
	}
	w := s.report()
	var ids []string
	for id := range s.task.touched {
		if sess := s.sessions[id]; sess != nil && (sess.State == journal.Stopped || sess.State == journal.ResumePending) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		what := "was stopped mid-turn"
		if s.sessions[id].State == journal.ResumePending {
			what = "is still owed a resume (the stop came before its resume launch)"
		}
		fmt.Fprintf(w, "supervise: session %s %s; to resume it: %s\n", id, what, s.rerunCommand(id))
	}
}

func (s *Supervisor) report() io.Writer {
	s.logHold.release() // the log lines before it come first
	if s.cfg.Report == nil {
		return os.Stderr
	}
	return s.cfg.Report
}

// taskReport prints the no-markers warning, and each session of this
// invocation that is parked or whose resume is held, with the command that
// resumes it. It returns how many such sessions there are.
func (s *Supervisor) taskReport() int {
	w := s.report()
	if !s.task.markers {
		fmt.Fprintln(w, "supervise: warning: no turn markers arrived from the agent, so supervise saw no session and could not resume an interrupted turn.")
		fmt.Fprintln(w, "supervise: the agent's hooks are not wired, or not trusted (Codex runs only hooks a person trusted; Gemini needs a trusted folder): see docs/adapters.md.")
	}
	var ids []string
	for id := range s.task.touched {
		if sess := s.sessions[id]; sess != nil && (sess.State == journal.Parked || sess.State == journal.ResumePending) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		sess := s.sessions[id]
		switch held := s.held(); {
		case sess.State == journal.Parked:
			fmt.Fprintf(w, "supervise: session %s is parked: %s\n", id, sess.Reason)
		case held != "":
			fmt.Fprintf(w, "supervise: session %s is owed a resume that is held (%s): %s\n", id, held, sess.Reason)
		default:
			fmt.Fprintf(w, "supervise: session %s is still owed a resume: %s\n", id, sess.Reason)
		}
		fmt.Fprintf(w, "supervise: to resume it: %s\n", s.rerunCommand(id))
	}
	return len(ids)
}

// rerunCommand is the shell command that resumes session id by hand and
// runs this supervise again, which delivers the resume (and does not start
// the task again).
func (s *Supervisor) rerunCommand(id string) string {
	argv := s.cfg.Rerun
	if len(argv) == 0 {
		argv = append([]string{"supervise", "--state-dir", s.cfg.StateDir, "--resume-exec", strings.Join(s.cfg.ResumeExec, " "), "--"}, s.cfg.Argv...)
	}
	return quoteArgs([]string{argv[0], "resume", "--state-dir", s.cfg.StateDir, id}) + " && " + quoteArgs(argv)
}

func quoteArgs(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}
