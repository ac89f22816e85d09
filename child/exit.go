package child

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/internal/signame"

	"golang.org/x/sys/unix"
)

// Exit codes for an agent that could not be started, as shells, tini and
// runc report them.
const (
	CodeNotExecutable = 126 // found but could not be executed (EACCES, ENOEXEC)
	CodeNotFound      = 127 // no such file or command
)

// Exit is how one child run ended.
type Exit struct {
	PID int
	// Code is the exit status: the process's own status, 128+N when it was
	// killed by signal N, or 126/127 when it could not be started.
	Code int
	// Signal is the signal that killed the process, 0 if it exited.
	Signal   syscall.Signal
	CoreDump bool
	// InnerSignal is the signal that killed a direct child of the process
	// before the process exited by itself (a wrapper CLI whose inner
	// process was killed: see WatchInner); 0 if none is known.
	InnerSignal syscall.Signal
	// ExecErr is set when the agent could not be started at all.
	ExecErr        error
	Started, Ended time.Time
}

// String describes the exit in words, for logs and status.
func (e Exit) String() string {
	switch {
	case e.ExecErr != nil:
		return fmt.Sprintf("could not start (exit %d): %v", e.Code, e.ExecErr)
	case e.Signal != 0:
		s := fmt.Sprintf("killed by signal %d (%s)", int(e.Signal), signame.Of(e.Signal))
		if e.CoreDump {
			s += ", core dumped"
		}
		return s
	}
	return fmt.Sprintf("exited with code %d", e.Code)
}

func exitFromStatus(pid int, ws unix.WaitStatus, started, ended time.Time) Exit {
	e := Exit{PID: pid, Started: started, Ended: ended}
	switch {
	case ws.Signaled():
		e.Signal = syscall.Signal(ws.Signal())
		e.Code = 128 + int(e.Signal)
		e.CoreDump = ws.CoreDump()
	default:
		e.Code = ws.ExitStatus()
	}
	return e
}

// StartError is returned by Reaper.Start when the agent could not be
// started. Code is 127 when the program does not exist, 126 otherwise.
type StartError struct {
	Path string
	Code int
	Err  error
}

func (e *StartError) Error() string { return fmt.Sprintf("start %s: %v", e.Path, e.Err) }
func (e *StartError) Unwrap() error { return e.Err }

func newStartError(path string, err error) *StartError {
	code := CodeNotExecutable
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOENT) || errors.Is(err, exec.ErrNotFound) {
		code = CodeNotFound
	}
	return &StartError{Path: path, Code: code, Err: err}
}

// FailedExit returns the Exit recorded for a run whose agent could not be
// started: err is the error from Reaper.Start.
func FailedExit(err error, at time.Time) Exit {
	e := Exit{Code: CodeNotExecutable, ExecErr: err, Started: at, Ended: at}
	var se *StartError
	if errors.As(err, &se) {
		e.Code = se.Code
	}
	return e
}
