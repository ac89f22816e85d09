package console

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/observe"
	"github.com/supervise-dev/supervise/runflags"
	"github.com/supervise-dev/supervise/supervisor"
)

// Interactive is a run whose agent holds the terminal (stdin is the
// controlling terminal, the agent in its foreground group, and stderr the
// terminal too): supervise's log goes to a file in the state dir.
type Interactive struct {
	dest   *runflags.LogDest
	stderr io.Writer
	flush  func() // waits, a bounded time, for stderr to reach the terminal
}

// NewInteractive is an interactive run whose log is dest and whose lines
// go to the terminal t (each line ended "\r\n").
func NewInteractive(dest *runflags.LogDest, t *Terminal) *Interactive {
	return &Interactive{dest: dest, stderr: crlf{t.w}, flush: t.Flush}
}

// Stderr is where the lines a person must read go.
func (t *Interactive) Stderr() io.Writer { return t.stderr }

// crlf ends each line with "\r\n": a CLI killed in raw mode leaves the
// terminal without output processing, where a bare "\n" would not return
// the cursor to the start of the line.
type crlf struct{ w io.Writer }

func (c crlf) Write(p []byte) (int, error) {
	if _, err := c.w.Write(bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// DropLog removes the log file of a state dir that is removed as unused.
func (t *Interactive) DropLog() {
	if t == nil {
		return
	}
	if p := t.dest.Path(); p != "" {
		t.dest.ToStderr()
		os.Remove(p)
		os.Remove(p + ".1")
	}
}

// maxNotice bounds the lines of the start notice.
const maxNotice = 5

// Start moves the log into the state dir and names, before the agent
// takes the terminal, the sessions a person stopped mid-turn (a hangup, a
// Ctrl-C) or that are parked, with the command that continues each: they
// are never resumed silently, and never forgotten silently either.
func (t *Interactive) Start(cfg supervisor.Config, db *journal.DB) {
	if t == nil {
		return
	}
	if err := t.dest.ToFile(cfg.StateDir); err != nil {
		// Fail towards being heard: the log stays on the terminal.
		fmt.Fprintf(t.stderr, "supervise: cannot write the log to the state dir (%v): it goes to the terminal\n", err)
	}
	if st, err := supervisor.ReadStatus(db, cfg.Name, cfg.StateDir, false); err == nil {
		for _, l := range observe.StartNotice(st, cfg.ResumeExec, maxNotice) {
			fmt.Fprintln(t.stderr, l)
		}
	}
	t.flush() // on the screen before the agent draws
}
