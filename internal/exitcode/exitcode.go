// Package exitcode is supervise's one table of exit codes: the constants
// the code returns, and the text --help prints. README.md and docs/ list the
// same codes (a test in cmd/supervise checks).
package exitcode

// Exit codes of supervise.
const (
	OK       = 0 // clean end: the agent finished, or a requested stop completed
	Internal = 1 // supervise itself failed (journal, sockets, an actor)
	Usage    = 2 // bad command line or SUPERVISE_* value
	Locked   = 3 // another supervise holds this state dir
	GaveUp   = 4 // the give-up limit was reached; an outer manager takes over
	Parked   = 5 // task mode: a session is parked (the resume command is printed)
	// CannotExec and NotFound: the agent could not be started (not
	// executable, not found), as shells, tini and runc report it.
	CannotExec = 126
	NotFound   = 127
	// SignalBase + N: the agent (or, after a second stop signal, supervise
	// forcing it down) was killed by signal N.
	SignalBase = 128
)
