package notify

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// dgramSocket opens an unbound unix datagram socket, close-on-exec and
// non-blocking.
func dgramSocket() (int, error) {
	return syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
}

// stopReceiving shuts the socket fd down for reading: a unix datagram sent
// to it from then on fails with EPIPE, so that its queue only shrinks.
func stopReceiving(fd int) { _ = unix.Shutdown(fd, unix.SHUT_RD) }
