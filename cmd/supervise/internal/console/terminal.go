// Package console is supervise's terminal when it was started in one: every
// write to it goes through a queue that never blocks supervise, its settings
// are kept to be put back between runs, and an interactive run moves the
// log off it into the state dir and names, before the agent draws, what a
// person left.
package console

import (
	"io"
	"os"
	"time"

	"github.com/supervise-dev/supervise/internal/tty"
	"github.com/supervise-dev/supervise/observe"
	"github.com/supervise-dev/supervise/runflags"
)

// flushWait bounds how long supervise waits, before it launches the next
// run, for its lines to reach the terminal: they must be on the screen
// before the agent draws, but a stopped output must not hold the launch.
const flushWait = time.Second

// closeWait bounds how long supervise waits at its exit for its last lines
// to reach a terminal whose output is stopped.
const closeWait = 2 * time.Second

// Terminal is supervise's stderr when that is its controlling terminal:
// every write to it goes through a tty.Writer, which never blocks
// supervise, and its settings as at supervise's start are kept, to be put
// back between runs of an interactive agent. nil when stderr is no
// terminal.
type Terminal struct {
	f     *os.File
	w     *tty.Writer
	saved *tty.State // nil if they could not be read
}

// Open returns the terminal on stderr, or nil.
func Open(stderr io.Writer) *Terminal {
	f, ok := stderr.(*os.File)
	if !ok || !runflags.IsTerminal(f) {
		return nil
	}
	t := &Terminal{f: f, w: tty.NewWriter(f)}
	t.saved, _ = tty.Save(int(f.Fd())) // unreadable: nothing to restore, the rest still holds
	return t
}

// Writer is what supervise writes to instead of stderr.
func (t *Terminal) Writer(stderr io.Writer) io.Writer {
	if t == nil {
		return stderr
	}
	return t.w
}

func (t *Terminal) IsTerminal() bool { return t != nil }

// Observed is the terminal as observe.Terminal uses it between runs.
func (t *Terminal) Observed() observe.Term {
	return observe.Term{
		W:       t.w,
		Restore: func() { t.saved.Restore() }, // best effort: a terminal gone (hung up) has nothing to restore
		Rows:    func() int { return tty.Rows(int(t.f.Fd())) },
		Flush:   t.Flush,
	}
}

// Flush waits at most flushWait for what supervise wrote to reach the
// terminal.
func (t *Terminal) Flush() {
	if t != nil {
		t.w.Flush(flushWait)
	}
}

// Close lets supervise's last lines reach the terminal, waiting at most
// closeWait for a stopped output.
func (t *Terminal) Close() {
	if t != nil {
		t.w.Close(closeWait)
	}
}
