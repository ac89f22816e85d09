//go:build linux && !supervise_portable

package notify

// The Linux backend: SO_PASSCRED makes the kernel attach the sender's pid
// and uid (SCM_CREDENTIALS) to every datagram, and Config.Accept checks
// that pid.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Credentials reports whether datagrams carry the sender's kernel-attested
// pid (SCM_CREDENTIALS): true on this backend.
const Credentials = true

// oobSize fits one SCM_CREDENTIALS, one SCM_PIDFD and one SCM_RIGHTS with
// maxFDs fds.
func oobSize() int {
	return unix.CmsgSpace(unix.SizeofUcred) + unix.CmsgSpace(4) + unix.CmsgSpace(maxFDs*4)
}

// sockopts sets SO_PASSCRED, SO_PASSPIDFD and a large receive buffer on the
// socket.
func sockopts(fd int) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		return fmt.Errorf("set SO_PASSCRED: %w", err)
	}
	// SO_PASSPIDFD (Linux 6.5+) adds a pidfd of the sender to every
	// datagram, which tells whether the pid in SCM_CREDENTIALS still names
	// the sender when the datagram is read (see datagram). Older kernels:
	// the pid alone, as before.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PASSPIDFD, 1)
	// SO_RCVBUFFORCE needs CAP_NET_ADMIN; the plain option is capped at
	// rmem_max. Either is only an improvement, so errors are ignored.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBuf) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf)
	}
	return nil
}

// Serve reads datagrams until Close and calls handle for each accepted
// one, in arrival order, on the calling goroutine. A datagram is dropped
// (counted in Stats, logged at most once a second per reason) if it was
// truncated, carries no credentials, comes from a sender Config.Accept
// rejects, or fails Parse. Every received fd is closed, except the single
// fd of a BARRIER=1 message, which handle receives in Message.Fd and must
// close. Serve returns nil after Close, or the error that stopped it.
// handle must not call Close and wait for Serve to return.
func (s *Server) Serve(handle func(Message)) error {
	raw, err := s.conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("notify: serve: %w", err)
	}
	var (
		buf   = make([]byte, MaxDatagram)
		oob   = make([]byte, s.oob)
		fds   = make([]int, 0, s.oob/4)
		iov   = unix.Iovec{Base: &buf[0]}
		msg   = unix.Msghdr{Iov: &iov, Control: &oob[0]}
		n     int
		errno syscall.Errno
		st    serveState
	)
	iov.SetLen(len(buf))
	msg.SetIovlen(1)
	defer st.flush(s.log)
	// recv reads one datagram without allocating (unix.Recvmsg would
	// allocate the sender's address); false means "wait until readable".
	recv := func(fd uintptr) bool {
		for {
			msg.SetControllen(len(oob))
			msg.Flags = 0
			// A raw syscall: MSG_DONTWAIT never blocks, so the scheduler
			// need not be told (saves ~30% CPU per datagram under a flood).
			r, _, e := unix.RawSyscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&msg)),
				unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
			switch e {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false
			}
			n, errno = int(r), e
			return true
		}
	}
	for {
		if err := raw.Read(recv); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("notify: serve: %w", err)
		}
		if errno != 0 {
			return fmt.Errorf("notify: serve: recvmsg: %w", errno)
		}
		s.datagram(&st, buf[:n], oob[:msg.Controllen], int(msg.Flags), fds[:0], handle)
	}
}

// senderAlive reports whether the process behind a datagram's pidfd is
// still there (running or a zombie, so its pid is not free for reuse).
// pidfd is -1 when the kernel sends none (before Linux 6.5): true, as the
// pid alone is all there is; below -1, the kernel could not make one
// because the sender was already reaped.
func senderAlive(pidfd int) bool {
	switch {
	case pidfd == -1:
		return true
	case pidfd < 0:
		return false
	}
	return unix.PidfdSendSignal(pidfd, 0, nil, 0) == nil
}

// parseControl returns the credentials, the sender's pidfd (-1 if none, a
// negative errno if the kernel could not make one) and the fds in a
// control buffer, appending the fds to fds.
func parseControl(oob []byte, fds []int) (pid int32, uid uint32, creds bool, pidfd int, _ []int) {
	pidfd = -1
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			break
		}
		data := oob[unix.CmsgLen(0):l]
		if h.Level == unix.SOL_SOCKET {
			switch h.Type {
			case unix.SCM_CREDENTIALS:
				if len(data) >= unix.SizeofUcred {
					pid = int32(binary.NativeEndian.Uint32(data[0:4]))
					uid = binary.NativeEndian.Uint32(data[4:8])
					creds = true
				}
			case unix.SCM_PIDFD:
				if len(data) >= 4 {
					pidfd = int(int32(binary.NativeEndian.Uint32(data)))
					if pidfd == -1 {
						pidfd = -int(unix.ESRCH)
					}
				}
			case unix.SCM_RIGHTS:
				for ; len(data) >= 4; data = data[4:] {
					fds = append(fds, int(int32(binary.NativeEndian.Uint32(data))))
				}
			}
		}
		next := unix.CmsgSpace(l - unix.CmsgLen(0))
		if next >= len(oob) {
			break
		}
		oob = oob[next:]
	}
	return pid, uid, creds, pidfd, fds
}

// Pending reports whether datagrams are waiting in the socket's queue,
// not yet read by Serve. A watchdog uses it to drain before it judges: a
// supervisor that was itself frozen must read the pings queued meanwhile
// before it declares the agent hung.
func (s *Server) Pending() bool {
	raw, err := s.conn.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	raw.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), fionread)
	})
	return n > 0
}
