// Package exitcode is supervise's one table of exit codes: the constants
// the code returns, and the text --help prints. README.md and docs/ list the
// same codes (a test in cmd/supervise checks).
package exitcode

import (
	"fmt"
	"strings"
)

// Exit codes of supervise.
const (
	OK       = 0 // clean end: the agent finished, or a requested stop completed
	Internal = 1 // supervise itself failed (journal, sockets, an actor)
	Usage    = 2 // bad command line or SUPERVISE_* value
	Locked   = 3 // another supervise holds this state dir
	GaveUp   = 4 // the give-up limit was reached; an outer manager takes over
	Parked   = 5 // task mode: a session is parked (the resume command is printed)
	// TempFail (EX_TEMPFAIL): task mode, a usage or rate limit ended the
	// turn and supervise does not wait it out (--limit-wait); stderr and
	// status give the reset.
	TempFail = 75
	// NoAccess (EX_NOPERM): `supervise ls` or `status` may not read a state
	// dir (or the state root) it was asked about; the message names its owner.
	NoAccess = 77
	// CannotExec and NotFound: the agent could not be started (not
	// executable, not found), as shells, tini and runc report it.
	CannotExec = 126
	NotFound   = 127
	// SignalBase + N: the agent (or, after a second stop signal, supervise
	// forcing it down) was killed by signal N.
	SignalBase = 128
)

// Row is one line of the exit-code table: the code (or a form such as
// "128+S") and what it means.
type Row struct {
	Code    string
	Meaning string
}

// Table is the exit-code table, in the order --help, README.md and
// docs/design.md list it.
func Table() []Row {
	return []Row{
		{"0", "the agent ended cleanly and is not restarted, or a requested stop completed"},
		{"1", "supervise itself failed (journal, sockets, a failed notify, control or metrics listener); the log says what"},
		{"2", "bad command line or SUPERVISE_* value"},
		{"3", "another supervise holds this state dir (the message names its pid)"},
		{"4", "gave up: --give-up consecutive quick deaths (off by default)"},
		{"5", "task mode (--resume-exec): a session is parked, or its resume is held; stderr names it, says why, and gives the command that resumes it"},
		{"75", "task mode: a usage or rate limit ended the turn and --limit-wait says not to wait it out (off, or a reset further away than its maximum); stderr and status give the reset time (EX_TEMPFAIL)"},
		{"77", "supervise ls or status: this user may not read a state dir (or the state root) it was asked about; the message names its owner (uid and user); ls prints everything it could read first, and the private state dirs of unit-installed agents under /var/lib/supervise, listed by default, do not count (EX_NOPERM)"},
		{"126,127", "the agent could not be started (not executable, not found)"},
		{"N", "with --restart never, or on-failure after a clean exit, or at the end of a task whose last turn did not complete: the agent's own exit status, 128+S when it was killed by signal S"},
		{"128+S", "a second stop signal S forced the agent down during its grace period"},
	}
}

// Help is the table as --help prints it.
func Help() string {
	var b strings.Builder
	b.WriteString("Exit codes:\n")
	const indent, width = 11, 79
	for _, r := range Table() {
		line := fmt.Sprintf("  %-8s", r.Code)
		for _, w := range strings.Fields(r.Meaning) {
			if len(line) > indent && len(line)+1+len(w) > width {
				b.WriteString(line + "\n")
				line = strings.Repeat(" ", indent-1)
			}
			line += " " + w
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
