package machine

import (
	"sort"
	"strings"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
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
// is the rerun of the same command that the exit-5 message gives. When none
// may be delivered, the task is not started either while a session it
// opened earlier is parked, stopped, or owed a resume that is held: exit 5
// with the command that resumes that session (--rerun-task starts it anyway).

// TaskConfig is task mode's part of the configuration.
type TaskConfig struct {
	On bool
	// ID identifies the task command (its directory and argv), recorded on
	// the sessions it opens.
	ID string
	// Exec is the parsed --resume-exec template.
	Exec []string
	// Rerun starts the task even when an earlier run of the same command
	// left its session parked, stopped or owed a held resume (--rerun-task).
	Rerun bool
	// Interactive: the AGENT carries no task prompt (InteractiveArgv): a
	// person drives it (Policy.Interactive).
	Interactive bool
	// Command is supervise's own command line, quoted into the message
	// that ends a task with a parked session. nil: "supervise", the flags
	// that matter and the agent argv.
	Command []string
}

// TaskState is task mode's memory of one invocation of supervise.
type TaskState struct {
	// Ran is true once the task argv was launched.
	Ran bool
	// Markers is true once any session marker or heartbeat arrived.
	Markers bool
	// touched holds the sessions this invocation saw or resumed.
	touched map[string]bool
	// outcome is the outcome of the last turn-end seen, "" after a
	// turn-begin or resumed.
	outcome marker.Outcome
	// runMarkers is true once a session marker arrived from the current
	// run: a resume launch that dies without one never took its session.
	runMarkers bool
	// reran is true once the task was started again for a lost
	// conversation (once per invocation); rerunDue while that launch is
	// still to come. inherit is the crash count the lost session had,
	// which the rerun's new session takes at its first turn-begin, so the
	// rerun counts toward the breaker like any resume.
	reran, rerunDue bool
	inherit         int
	// remember: the task's sessions and outcome are kept
	// (Policy.Remember), set by New.
	remember bool
}

// touch records that session id was seen in this invocation.
func (t *TaskState) touch(id string) {
	if !t.remember {
		return
	}
	if t.touched == nil {
		t.touched = map[string]bool{}
	}
	t.touched[id] = true
}

// taskMarker records what a marker means for the task's end.
func (t *TaskState) marker(msg marker.Message) {
	if !t.remember {
		return
	}
	t.Markers, t.runMarkers = true, true
	t.touch(msg.Session)
	switch msg.Event {
	case marker.EventTurnBegin, marker.EventResumed:
		t.outcome = ""
	case marker.EventTurnEnd:
		t.outcome = msg.Outcome
	}
}

// taskBlocked reports, before the task would start, the sessions an
// earlier run of this same task command left parked, stopped mid-turn, or
// owed a resume that is held (the crash-loop guard, --resume off): the
// caller asks only when no resume may be dispatched now, so every one owed
// is held. Starting the task again would open a new session beside them and
// repeat the side effects they may already have had, at API cost (a cron
// job or a shell loop rerunning the command after exit 5 would do so every
// time). It reports each with its reason and the command that resumes it,
// and returns how many there are.
func (b *Book) taskBlocked(o *out, cfg *Config, held string) int {
	var ids []string
	for id, sess := range b.Sessions {
		owed := sess.State == record.ResumePending && sess.Resume != nil
		if sess.Task == cfg.Task.ID && (sess.State == record.Parked || sess.State == record.Stopped || owed) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return 0
	}
	sort.Strings(ids)
	var lines []string
	for _, id := range ids {
		sess := b.Sessions[id]
		var what string
		switch sess.State {
		case record.Stopped:
			what = "was stopped mid-turn"
		case record.ResumePending:
			what = "is owed a resume that is held (" + held + "): " + sess.Reason
		default:
			what = "is parked: " + sess.Reason
		}
		lines = append(lines, "session "+id+" of this task "+what, "to resume it: "+cfg.rerunCommand(id))
	}
	lines = append(lines, "not starting the task again: it would open a new session and repeat what that session may already have done. To start it afresh anyway, add --rerun-task.")
	o.add(Report{Lines: lines})
	o.warn("task not started: an earlier run of the same task left a session parked, stopped or owed a held resume",
		"sessions", ids, "exit_code", ExitParked)
	return len(ids)
}

// taskStopped tells the person who stopped a task how to continue each
// session of it the stop left stopped mid-turn, or still owed a resume (a
// stop during the backoff before a resume launch, or during a run that was
// not handed that session's resume: it was not running, so it was not
// stopped).
func (t *TaskState) stopped(o *out, sessions map[string]*record.Session, cfg *Config, held string) {
	if !t.remember {
		return
	}
	var lines []string
	for _, id := range t.touchedIn(sessions, record.Stopped, record.ResumePending) {
		what := "was stopped mid-turn"
		if sess := sessions[id]; sess.State == record.ResumePending {
			what = "is still owed a resume (the stop came before its resume launch)"
			if held != "" && (sess.Resume == nil || !sess.Resume.Manual) {
				what = "is still owed a resume that is held (" + held + ")"
			}
		}
		lines = append(lines, "session "+id+" "+what+"; to resume it: "+cfg.rerunCommand(id))
	}
	if len(lines) > 0 {
		o.add(Report{Lines: lines})
	}
}

// touchedIn lists the sessions of this invocation in one of states.
func (t *TaskState) touchedIn(sessions map[string]*record.Session, states ...record.SessionState) []string {
	var ids []string
	for id := range t.touched {
		if sess := sessions[id]; sess != nil {
			for _, st := range states {
				if sess.State == st {
					ids = append(ids, id)
					break
				}
			}
		}
	}
	sort.Strings(ids)
	return ids
}

// taskReport reports the no-markers warning, and each session of this
// invocation that is parked or whose resume is held, with the command that
// resumes it. It returns how many such sessions there are.
func (t *TaskState) report(o *out, book *Book, cfg *Config, held string) int {
	var lines []string
	if !t.Markers && !book.taskSeenBefore(cfg.Task.ID) {
		lines = append(lines, "warning: no turn markers arrived from the agent, so supervise saw no session and could not resume an interrupted turn.",
			"the agent's hooks are not wired, or not trusted (Codex runs only hooks a person trusted; Gemini needs a trusted folder): see docs/adapters.md.")
	}
	ids := t.touchedIn(book.Sessions, record.Parked, record.ResumePending)
	for _, id := range ids {
		sess := book.Sessions[id]
		switch {
		case sess.State == record.Parked && strings.HasPrefix(sess.Reason, lostReason):
			lines = append(lines, "session "+id+" is parked: "+sess.Reason,
				"to start the task afresh (check first what the interrupted turn did): "+cfg.rerunTaskCommand(),
				"or, if the CLI can resume it after all: "+cfg.rerunCommand(id))
			continue
		case sess.State == record.Parked:
			lines = append(lines, "session "+id+" is parked: "+sess.Reason)
		case held != "":
			lines = append(lines, "session "+id+" is owed a resume that is held ("+held+"): "+sess.Reason)
		default:
			lines = append(lines, "session "+id+" is still owed a resume: "+sess.Reason)
		}
		lines = append(lines, "to resume it: "+cfg.rerunCommand(id))
	}
	if len(lines) > 0 {
		o.add(Report{Lines: lines})
	}
	return len(ids)
}

// rerunCommand is the shell command that resumes session id by hand and
// runs this supervise again, which delivers the resume (and does not start
// the task again).
func (c *Config) rerunCommand(id string) string {
	argv := c.taskCommand()
	return QuoteArgs([]string{argv[0], "resume", "--state-dir", c.StateDir, id}) + " && " + QuoteArgs(argv)
}

// taskCommand is supervise's own command line (Task.Command), or, when
// unknown, "supervise", the flags that matter and the agent argv.
func (c *Config) taskCommand() []string {
	if argv := c.Task.Command; len(argv) > 0 {
		return argv
	}
	return append([]string{"supervise", "--state-dir", c.StateDir, "--resume-exec", strings.Join(c.Task.Exec, " "), "--"}, c.Argv...)
}

// rerunTaskCommand is this supervise's command line with --rerun-task.
func (c *Config) rerunTaskCommand() string {
	argv := c.taskCommand()
	at := 1
	if len(argv) > 1 && argv[1] == "run" {
		at = 2
	}
	out := append(append(append([]string{}, argv[:at]...), "--rerun-task"), argv[at:]...)
	return QuoteArgs(out)
}

// plainWord reports whether s is made only of bytes a shell leaves alone:
// ASCII letters, digits and -_./:@=+,
func plainWord(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_./:@=+,", c) >= 0) {
			return false
		}
	}
	return true
}

// QuoteArgs quotes argv for a POSIX shell.
func QuoteArgs(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = ShellQuote(a)
	}
	return strings.Join(q, " ")
}

// ResumeCommand is the exact command that resumes session id.
func ResumeCommand(stateDir, id string) string {
	return "supervise resume --state-dir " + ShellQuote(stateDir) + " " + ShellQuote(id)
}

// ShellQuote quotes s for a POSIX shell, leaving plain words bare.
func ShellQuote(s string) string {
	if s != "" && plainWord(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
