package notify

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// sndBuf is the send buffer a client socket needs on macOS, whose default
// (net.local.dgram.maxdgram, 2048 bytes) is also the largest datagram it
// can send: a MaxDatagram message plus a barrier's fd must fit.
const sndBuf = 2 * MaxDatagram

// dgramSocket opens an unbound unix datagram socket, close-on-exec and
// non-blocking, with a send buffer large enough for MaxDatagram. macOS has
// no SOCK_CLOEXEC: ForkLock keeps a fork from inheriting the fd meanwhile.
func dgramSocket() (int, error) {
	syscall.ForkLock.RLock()
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return -1, err
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	if n, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil && n < sndBuf {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, sndBuf)
	}
	return fd, nil
}

// stopReceiving does nothing on macOS: shutting a socket down for reading
// there flushes its queue on the caller's thread, closing the queued fds
// just as closing the socket would. Datagrams that arrive after discard
// read the queue are closed by the kernel with the socket.
func stopReceiving(int) {}
