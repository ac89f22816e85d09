//go:build linux

package notify

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/supervise-dev/supervise/internal/statedir"
)

const (
	// maxFDs is the most fds the kernel passes in one datagram (SCM_MAX_FD).
	maxFDs = 253
	// rcvBuf is the socket receive buffer asked for.
	rcvBuf = 4 << 20
)

// oobSize fits one SCM_CREDENTIALS, one SCM_PIDFD and one SCM_RIGHTS with
// maxFDs fds.
func oobSize() int {
	return unix.CmsgSpace(unix.SizeofUcred) + unix.CmsgSpace(4) + unix.CmsgSpace(maxFDs*4)
}

// Listen creates cfg.Dir with mode 0700 if needed, removes a stale socket
// file at Dir/notify.sock (the caller must already hold the single-instance
// lock), and binds a unixgram socket there with mode 0600, SO_PASSCRED set
// and a large receive buffer. The caller must Close the Server.
func Listen(cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("notify: listen: empty Config.Dir")
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Dir), 0o700); err != nil {
		return nil, fmt.Errorf("notify: listen: %w", err)
	}
	// A real directory of ours, 0700: a symbolic link there is refused,
	// never followed or chmod'ed.
	if err := statedir.Private(cfg.Dir); err != nil {
		return nil, fmt.Errorf("notify: listen: %w", err)
	}
	path := filepath.Join(cfg.Dir, SocketName)
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("notify: listen: %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("notify: listen: remove stale socket: %w", err)
		}
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("notify: listen: %w", err)
	}
	s := &Server{path: path, conn: conn, accept: cfg.Accept, log: cfg.Log, oob: oobSize()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.setup(); err != nil {
		conn.Close()
		os.Remove(path)
		return nil, fmt.Errorf("notify: listen: %w", err)
	}
	return s, nil
}

// setup sets the socket file's mode and the socket options.
func (s *Server) setup() error {
	if err := os.Chmod(s.path, 0o600); err != nil {
		return err
	}
	fi, err := os.Lstat(s.path)
	if err != nil {
		return err
	}
	s.file = fi
	raw, err := s.conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
		// SO_PASSPIDFD (Linux 6.5+) adds a pidfd of the sender to every
		// datagram, which tells whether the pid in SCM_CREDENTIALS still
		// names the sender when the datagram is read (see datagram).
		// Older kernels: the pid alone, as before.
		_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSPIDFD, 1)
		// SO_RCVBUFFORCE needs CAP_NET_ADMIN; the plain option is capped
		// at rmem_max. Either is only an improvement, so errors are ignored.
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBuf) != nil {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf)
		}
	})
	if err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("set SO_PASSCRED: %w", serr)
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

// serveState is the Serve goroutine's own state.
type serveState struct {
	parser  parser
	last    [numReasons]time.Time // last warning per reason
	pending [numReasons]uint64    // drops since that warning
}

// datagram checks, parses and delivers one datagram. It owns every fd in
// oob and closes all of them except one it hands to handle.
func (s *Server) datagram(st *serveState, b, oob []byte, flags int, fds []int, handle func(Message)) {
	pid, uid, creds, pidfd, fds := parseControl(oob, fds)
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	var (
		r   reason
		err error
	)
	switch {
	case flags&unix.MSG_CTRUNC != 0:
		r = reasonCTrunc
	case flags&unix.MSG_TRUNC != 0:
		r = reasonTruncated
	case !creds:
		r = reasonNoCreds
	case s.accept != nil && !s.accept(pid):
		r = reasonSender
	case s.accept != nil && !senderAlive(pidfd):
		// The sender is gone (reaped) by now, so its pid may already
		// belong to another process, which the check above may have
		// vetted instead of the sender: never attribute the datagram to
		// it. Checked after accept: alive now means the pid named the
		// sender during that check.
		r, err = reasonSender, errors.New("the sender exited before its datagram was read")
	default:
		var m Message
		m, err = st.parser.parse(b)
		switch {
		case err != nil:
			r = parseReason(err)
		case m.Barrier && len(fds) != 1:
			r, err = reasonProtocol, fmt.Errorf("BARRIER=1 with %d fds: %w", len(fds), ErrProtocol)
		default:
			if m.Barrier {
				m.Fd = os.NewFile(uintptr(fds[0]), "notify-barrier")
				m.Refused = s.refused.Take(pid)
			} else if len(fds) > 0 {
				closeFDs(fds)
				s.drop(st, reasonFDs, pid, nil)
			}
			m.PID, m.UID = pid, uid
			s.accepted.Add(1)
			handle(m)
			return
		}
	}
	closeFDs(fds)
	if creds && r != reasonSender {
		// The sender's next barrier must say that this was not journaled.
		s.refused.Add(pid)
	}
	s.drop(st, r, pid, err)
}

// drop counts a drop and logs it, at most once a second per reason.
func (s *Server) drop(st *serveState, r reason, pid int32, err error) {
	s.dropped[r].Add(1)
	st.pending[r]++
	now := time.Now()
	if now.Sub(st.last[r]) < time.Second {
		return
	}
	if err != nil {
		s.log.Warn("notify datagram dropped", "reason", r.String(), "dropped", st.pending[r], "pid", pid, "err", err)
	} else {
		s.log.Warn("notify datagram dropped", "reason", r.String(), "dropped", st.pending[r], "pid", pid)
	}
	st.pending[r], st.last[r] = 0, now
}

// flush logs the drops not yet logged.
func (st *serveState) flush(log *slog.Logger) {
	for r, n := range st.pending {
		if n > 0 {
			log.Warn("notify datagram dropped", "reason", reason(r).String(), "dropped", n)
		}
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

// closeFDs closes received fds.
func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
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
		n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	})
	return n > 0
}
