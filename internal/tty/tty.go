// Package tty keeps the terminal an interactive agent draws on usable
// between its runs: it saves the terminal's settings once, restores them
// after a CLI that died in raw mode (output restarted, modes off, screen
// cleared), and writes supervise's own lines through a Writer that never
// blocks its caller, however long terminal output stays stopped (^S, an
// agent's tcflow(TCOOFF), a terminal nobody reads).
//
// Leaf package: it knows termios and escape sequences, nothing of
// supervise.
package tty

import (
	"golang.org/x/sys/unix"
)

// State is a terminal's settings as saved by Save.
type State struct {
	fd      int
	termios unix.Termios
}

// Save reads the settings of the terminal on fd, to be restored later.
// It fails when fd is not a terminal.
func Save(fd int) (*State, error) {
	t, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return nil, err
	}
	return &State{fd: fd, termios: *t}, nil
}

// Restore sets the saved settings again, at once (TCSANOW: it never waits
// for output to drain, which a stopped terminal never does), and restarts
// output a dead agent may have stopped (tcflow TCOON). It does not write to
// the terminal: the escape sequences that undo the modes a CLI set are
// Reset, for the caller to write after it (through a Writer).
func (s *State) Restore() error {
	if s == nil {
		return nil
	}
	t := s.termios
	err := unix.IoctlSetTermios(s.fd, ioctlSetTermios, &t)
	if ferr := startOutput(s.fd); err == nil {
		err = ferr
	}
	return err
}

// Termios is the saved settings (for tests and checks).
func (s *State) Termios() unix.Termios { return s.termios }

// Reset undoes, in any terminal, the modes a full-screen CLI sets and
// leaves set when it is killed: the alternate screen is left, the cursor
// shown, the colours and attributes reset, mouse reporting (every
// protocol), focus reporting and bracketed paste turned off, and the
// keyboard's enhanced reporting (the kitty protocol's pushed flags, as
// Codex sets them; xterm's modifyOtherKeys) undone. Each is a no-op where
// the mode was not set.
const Reset = "\x1b[?1049l" + // the main screen (after the alternate one)
	"\x1b[?25h" + // cursor shown
	"\x1b[0m" + // attributes off
	"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l" + // mouse reporting off
	"\x1b[?1004l" + // focus reporting off
	"\x1b[?2004l" + // bracketed paste off
	"\x1b[<u" + // the kitty keyboard protocol's flags popped
	"\x1b[>4;0m" // modifyOtherKeys off

// Clear moves what the screen shows into the terminal's scrollback (rows
// newlines from the bottom row, so a person can still scroll back to the
// dead frame) and leaves the cursor at the top left of a clear screen, so
// the next run draws on a clean screen rather than over the dead frame.
// ClearSeq is its last, the clear itself.
func Clear(rows int) string {
	if rows <= 0 || rows > 1000 {
		rows = 0
	}
	b := make([]byte, 0, 16+2*rows+len(ClearSeq))
	b = append(b, "\x1b[9999;1H"...) // the bottom row
	for range rows {
		b = append(b, '\r', '\n')
	}
	return string(b) + ClearSeq
}

// ClearSeq homes the cursor and erases the whole screen.
const ClearSeq = "\x1b[H\x1b[2J"

// Rows is the height of the terminal on fd, 0 if unknown.
func Rows(fd int) int {
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Row)
}
