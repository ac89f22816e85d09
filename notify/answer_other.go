//go:build !linux

package notify

import "golang.org/x/sys/unix"

// sendFlags make one send non-blocking, whatever the socket's own flags.
// A reader that went away raises SIGPIPE, which the Go runtime ignores for
// a raw send.
const sendFlags = unix.MSG_DONTWAIT

// fileType returns the S_IFMT bits of fd's mode.
func fileType(fd int) (uint32, error) {
	var st unix.Stat_t
	if err := retry(func() error { return unix.Fstat(fd, &st) }); err != nil {
		return 0, err
	}
	return uint32(st.Mode) & unix.S_IFMT, nil
}

// unixSocket reports whether the socket fd is a unix-domain one.
func unixSocket(fd int) bool {
	sa, err := unix.Getsockname(fd)
	_, ok := sa.(*unix.SockaddrUnix)
	return err == nil && ok
}

// relayPipe keeps nothing here: writePipe needs no pipe of its own.
type relayPipe struct{}

func (relayPipe) close() error { return nil }

// writePipe writes b to the pipe or FIFO fd, or fails with EAGAIN if it is
// full. Without splice(2) or /proc (macOS has neither; /dev/fd/N there
// duplicates the fd, same open file description), the write is made
// non-blocking by setting O_NONBLOCK on fd itself, which the agent's copies
// share, and the flags are put back right after. That is acceptable here:
// the barrier fd is the agent's to give (Client.Barrier closes its copy as
// soon as it is sent), and an agent that kept a copy sees O_NONBLOCK for
// the length of one write.
func (relayPipe) writePipe(fd int, b byte) error {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	if fl&unix.O_NONBLOCK == 0 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl|unix.O_NONBLOCK); err != nil {
			return err
		}
		defer unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl)
	}
	return retry(func() error { _, err := unix.Write(fd, []byte{b}); return err })
}
