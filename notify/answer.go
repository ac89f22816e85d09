package notify

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Answer errors. Each means that no answer byte was written and the fd was
// closed bare, which the agent's Barrier reads as ErrBarrierUnconfirmed:
// "outcome unknown".
var (
	// ErrBarrierWouldBlock reports a barrier fd whose buffer is full: the
	// answer byte could only have been written by waiting for whoever
	// reads the other end, which the agent controls.
	ErrBarrierWouldBlock = errors.New("notify: barrier answer not written: the fd would block")
	// ErrBarrierNotPipe reports a barrier fd that is neither a pipe (or
	// FIFO) nor a unix-domain socket: a regular file, a device, a TCP
	// socket. Nothing is ever written to one.
	ErrBarrierNotPipe = errors.New("notify: barrier answer not written: the fd is not a pipe or unix socket")
)

// Ack confirms a barrier: it writes AckByte to the barrier's fd and closes
// it. Call it only once everything received before the barrier is durable.
//
// Ack never blocks, whatever the agent handed over. The byte goes only to a
// pipe, a FIFO or a unix-domain socket, and only if it fits at once;
// otherwise the fd is closed without it and Ack returns an error wrapping
// ErrBarrierNotPipe or ErrBarrierWouldBlock (other errors, such as EPIPE
// when nobody reads the pipe any more, are returned wrapped too). The
// agent's open file description is left as it was: its flags are not
// changed on Linux (see writePipe for macOS). Nor does the close wait for
// a socket the agent set to linger on close (SO_LINGER; see unlinger). A
// supervisor counts the errors; the agent already reads the missing byte as
// "unconfirmed".
//
// What no call can avoid is the kernel waiting on a FUSE daemon: the close
// of a file on a FUSE file system flushes it through the daemon, and a
// pipe's lock may be held by a writer faulting on a page such a file
// backs. Only an agent that can mount a FUSE file system can do either.
//
// No binary here calls it: it is the Go client's one-call answer for an
// agent; the runner keeps an Answerer.
func Ack(f *os.File) error {
	var a Answerer
	defer a.Close()
	return a.Ack(f)
}

// Nack answers a barrier with NackByte and closes its fd. Like Ack it never
// blocks and returns the same errors.
//
// No binary here calls it: it is the Go client's one-call answer for an
// agent; the runner keeps an Answerer.
func Nack(f *os.File) error {
	var a Answerer
	defer a.Close()
	return a.Nack(f)
}

// Answerer answers barriers as Ack and Nack do, keeping what one answer
// sets up for the next: on Linux the pipe that carries the byte (see
// writePipe), which Ack and Nack make and close on every call. A
// supervisor that answers many barriers holds one and closes it at the
// end. The zero Answerer is ready; it is safe for concurrent use and must
// not be copied after its first answer.
type Answerer struct {
	relay relayPipe
}

// Ack is the package's Ack.
func (a *Answerer) Ack(f *os.File) error { return a.answer(f, AckByte) }

// Nack is the package's Nack.
func (a *Answerer) Nack(f *os.File) error { return a.answer(f, NackByte) }

// Close releases what a kept; a later answer sets it up again.
func (a *Answerer) Close() error { return a.relay.close() }

// Release closes a barrier's fd without an answer byte, which the agent
// reads as ErrBarrierUnconfirmed, never as an ack: for a barrier dropped
// unanswered. Unlike f.Close, it does not wait in close(2) for a socket the
// agent set to linger on close (SO_LINGER; see unlinger).
func Release(f *os.File) error {
	if f == nil {
		return fmt.Errorf("notify: release: %w", os.ErrInvalid)
	}
	if raw, err := f.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) { unlinger(int(fd)) })
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("notify: release: %w", err)
	}
	return nil
}

// answer writes b to the barrier fd f without blocking, if f is a pipe or
// a unix socket with room for it, and closes f.
func (a *Answerer) answer(f *os.File, b byte) error {
	if f == nil {
		return fmt.Errorf("notify: barrier answer: %w", os.ErrInvalid)
	}
	// SyscallConn, not Fd: Fd would put an fd the agent made non-blocking
	// back into blocking mode, a change to the agent's own description.
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return fmt.Errorf("notify: barrier answer: %w", err)
	}
	var werr error
	if err := raw.Control(func(fd uintptr) {
		werr = a.answerFD(int(fd), b)
		unlinger(int(fd))
	}); err != nil && werr == nil {
		werr = fmt.Errorf("notify: barrier answer: %w", err)
	}
	if err := f.Close(); err != nil && werr == nil {
		werr = fmt.Errorf("notify: barrier answer: %w", err)
	}
	return werr
}

// answerFD writes b to fd if it is a pipe, a FIFO or a unix socket and the
// byte fits without waiting.
func (a *Answerer) answerFD(fd int, b byte) error {
	mode, err := fileType(fd)
	if err != nil {
		return fmt.Errorf("notify: barrier answer: %w", err)
	}
	switch mode {
	case unix.S_IFIFO:
		err = a.relay.writePipe(fd, b)
	case unix.S_IFSOCK:
		if !unixSocket(fd) {
			return fmt.Errorf("%w: a socket of another family", ErrBarrierNotPipe)
		}
		// Per call, not per description: the agent's flags stay as they are.
		err = retry(func() error { return unix.Sendto(fd, []byte{b}, sendFlags, nil) })
	default:
		return fmt.Errorf("%w: %s", ErrBarrierNotPipe, typeName(mode))
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EWOULDBLOCK):
		return fmt.Errorf("%w: %w", ErrBarrierWouldBlock, err)
	}
	return fmt.Errorf("notify: barrier answer: %w", err)
}

// unlinger turns off SO_LINGER on a socket that has it on, so that closing
// the last copy returns at once (the kernel still sends what is queued, in
// the background) instead of waiting up to the linger time, which the
// agent chose, for a peer that may be the agent's too and never read (a
// TCP connection in FIN_WAIT1 behind a zero window). It does nothing to
// anything else. The agent's copies, if any, share the change: the fd was
// handed over to be closed, and the change only shortens a close. An
// agent that re-arms SO_LINGER between this and the close, and drops its
// own last copy in that window, still makes the close wait.
func unlinger(fd int) {
	l, err := unix.GetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER)
	if err != nil || l.Onoff == 0 {
		return
	}
	_ = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{})
}

// retry calls op until it fails with anything but EINTR.
func retry(op func() error) error {
	for {
		if err := op(); err != unix.EINTR {
			return err
		}
	}
}

// typeName names a file type (the S_IFMT bits of a mode) in an error.
func typeName(mode uint32) string {
	switch mode {
	case unix.S_IFREG:
		return "a regular file"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFLNK:
		return "a symbolic link"
	}
	return fmt.Sprintf("file type %#o", mode)
}
