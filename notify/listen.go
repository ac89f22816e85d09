//go:build linux || darwin

package notify

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/supervise-dev/supervise/internal/statedir"
	"github.com/supervise-dev/supervise/marker"
)

const (
	// maxFDs is the most fds the kernel passes in one datagram (SCM_MAX_FD).
	maxFDs = 253
	// rcvBuf is the socket receive buffer asked for.
	rcvBuf = 4 << 20
)

// Listen creates cfg.Dir with mode 0700 if needed, removes a stale socket
// file at Dir/notify.sock (the caller must already hold the single-instance
// lock), and binds a unixgram socket there with mode 0600, a large receive
// buffer and, on Linux, SO_PASSCRED set. The caller must Close the Server.
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
	if err := raw.Control(func(fd uintptr) { serr = sockopts(int(fd)) }); err != nil {
		return err
	}
	return serr
}

// serveState is the Serve goroutine's own state.
type serveState struct {
	parser  parser
	last    [numReasons]time.Time // last warning per reason
	pending [numReasons]uint64    // drops since that warning
}

// datagram checks, parses and delivers one datagram. It owns every fd in
// oob and closes all of them except one it hands to handle.
func (s *Server) datagram(st *serveState, b, oob []byte, flags int, fds []int, handle func(marker.Message)) {
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
		var m marker.Message
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

// discard stops the socket taking datagrams where the kernel allows it
// (stopReceiving) and closes the fds of those still queued, as closeFDs
// does. Closing the socket with them queued would have the kernel close
// them on the caller's thread, the last copy of a socket lingering on
// close included, which then waits for its peer.
func (s *Server) discard() {
	raw, err := s.conn.SyscallConn()
	if err != nil {
		return
	}
	var (
		buf = make([]byte, 1) // the payload is not wanted (MSG_TRUNC)
		oob = make([]byte, s.oob)
		fds = make([]int, 0, maxFDs)
	)
	raw.Control(func(fd uintptr) {
		stopReceiving(int(fd))
		for {
			// ForkLock: no child inherits an fd between its receipt and
			// its close (macOS has no MSG_CMSG_CLOEXEC).
			syscall.ForkLock.RLock()
			_, oobn, _, _, err := unix.Recvmsg(int(fd), buf, oob, unix.MSG_DONTWAIT)
			if err == nil {
				_, _, _, pidfd, fds := parseControl(oob[:oobn], fds[:0])
				if pidfd >= 0 {
					unix.Close(pidfd)
				}
				closeFDs(fds)
			}
			syscall.ForkLock.RUnlock()
			if err != nil && err != unix.EINTR {
				return // EAGAIN: the queue is empty
			}
		}
	})
}

// closeFDs closes received fds. Any datagram may carry up to maxFDs of
// the agent's choosing: a socket among them lingering on close (SO_LINGER)
// would hold Serve in close(2) for as long as the agent likes, so that
// stops first.
func closeFDs(fds []int) {
	for _, fd := range fds {
		unlinger(fd)
		unix.Close(fd)
	}
}
