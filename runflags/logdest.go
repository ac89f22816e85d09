package runflags

import (
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/supervise-dev/supervise/internal/statedir"
	"golang.org/x/sys/unix"
)

// LogFile is the name of supervise's log in the state dir, while an
// interactive agent holds the terminal; LogFile+".1" is the previous one.
const LogFile = "supervise.log"

// logFileMax is the size at which the log file is rotated: the current
// file becomes LogFile.1 (the older one is dropped), so the two never
// take more than twice this.
const logFileMax = 4 << 20

// LogDest is where supervise's log goes: stderr until ToFile, then a
// file in the state dir. An interactive agent draws its screen on the
// terminal, and a log line written there while it runs lands in the
// middle of it; supervise's own words go to the file instead, and
// between runs a person reads the one line Notice prints.
//
// A write to the file never blocks on anything the agent controls (a
// regular file in supervise's private state dir); a write that fails
// drops the record rather than fall back to the terminal.
type LogDest struct {
	stderr io.Writer

	mu   sync.Mutex
	path string   // the log file's path once ToFile succeeded
	f    *os.File // the open log file; nil: stderr
	size int64    // bytes in f
}

// NewLogDest returns a LogDest writing to stderr.
func NewLogDest(stderr io.Writer) *LogDest { return &LogDest{stderr: stderr} }

// Stderr is the stream the LogDest was made for.
func (d *LogDest) Stderr() io.Writer { return d.stderr }

// Path is the log file's path, "" while the log goes to stderr.
func (d *LogDest) Path() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.path
}

// ToFile sends the log from now on to LogFile in dir (a state dir that
// statedir.Prepare made private). The file is opened without following a
// symlink and created 0600; an existing file is appended to.
func (d *LogDest) ToFile(dir string) error {
	path := filepath.Join(dir, LogFile)
	f, size, err := statedir.OpenAppend(path)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f != nil {
		d.f.Close()
	}
	d.path, d.f, d.size = path, f, size
	return nil
}

// ToStderr sends the log to stderr again and closes the file.
func (d *LogDest) ToStderr() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f != nil {
		d.f.Close()
	}
	d.path, d.f, d.size = "", nil, 0
}

// Write writes one record (slog handlers write a record per call).
func (d *LogDest) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return d.stderr.Write(p)
	}
	if d.size > 0 && d.size+int64(len(p)) > logFileMax {
		d.rotate()
	}
	if d.f == nil { // rotation could not reopen: the record is dropped
		return len(p), nil
	}
	n, err := d.f.Write(p)
	d.size += int64(n)
	if err != nil {
		return len(p), nil // dropped, never onto the agent's screen
	}
	return n, nil
}

// rotate renames the full file to LogFile.1 and starts a new one.
func (d *LogDest) rotate() {
	d.f.Close()
	d.f = nil
	os.Rename(d.path, d.path+".1") // best effort: a failed rename appends to the full file
	f, size, err := statedir.OpenAppend(d.path)
	if err != nil {
		return
	}
	d.f, d.size = f, size
}

// Close closes the log file, if any; later records go to stderr.
func (d *LogDest) Close() error {
	d.ToStderr()
	return nil
}

// IsTerminal reports whether w is supervise's controlling terminal (the
// one a person watches, with a foreground process group).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err == nil
}
