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

	"github.com/supervise-dev/supervise/marker"
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

// sockopts sets SO_PASSCRED and a large receive buffer on the socket.
// SO_PASSPIDFD (Linux 6.5+) stays off: Serve turns it on only around the
// reads that need it (see Serve).
func sockopts(fd int) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		return fmt.Errorf("set SO_PASSCRED: %w", err)
	}
	// SO_RCVBUFFORCE needs CAP_NET_ADMIN; the plain option is capped at
	// rmem_max. Either is only an improvement, so errors are ignored.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBuf) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf)
	}
	return nil
}

// passPIDFD turns SO_PASSPIDFD on or off and reports whether the kernel
// has it (Linux 6.5+; older kernels: the pid alone, as before).
func passPIDFD(fd int, on bool) bool {
	v := 0
	if on {
		v = 1
	}
	return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PASSPIDFD, v) == nil
}

// peekOOBSize is the control buffer of Serve's peeks: one SCM_CREDENTIALS,
// and too little room after it for even one fd, so that the kernel
// installs none (a peek would install copies) and sets MSG_CTRUNC when the
// datagram carries some.
var peekOOBSize = unix.CmsgSpace(unix.SizeofUcred) + unix.SizeofCmsghdr

// Serve reads datagrams until Close and calls handle for each accepted
// one, in arrival order, on the calling goroutine. A datagram is dropped
// (counted in Stats, logged at most once a second per reason) if it was
// truncated, carries no credentials, comes from a sender Config.Accept
// rejects, or fails Parse. Every received fd is closed, except the single
// fd of a BARRIER=1 message, which handle receives in Message.Fd and must
// close. Serve returns nil after Close, or the error that stopped it.
// handle must not call Close and wait for Serve to return.
//
// A datagram's sender is the process whose pid the kernel attached, vetted
// by Config.Accept; but a sender that exited before Serve read its
// datagram may have had its pid given to another process, which Accept
// would vet instead (fault-matrix case 36). So every datagram that can
// change anything besides liveness (a marker, a barrier, READY, STOPPING,
// anything with fds) is read with a pidfd of its sender (SO_PASSPIDFD,
// Linux 6.5+) and dropped if that sender is gone. A heartbeat (WATCHDOG=1,
// with or without a session, and nothing else) is taken on its pid alone:
// at worst a recycled pid credits one ping, while a pidfd for every ping
// cost four fifths of the intake (509 k/s before SO_PASSPIDFD, 85 k/s
// with it). To tell them apart before a datagram is consumed, Serve peeks
// at it (MSG_PEEK) with SO_PASSPIDFD off; with SO_PEEK_OFF a peek walks on
// through a run of queued heartbeats, which one recvmmsg then consumes
// without their payloads; anything else is read again in full with
// SO_PASSPIDFD on.
func (s *Server) Serve(handle func(marker.Message)) error {
	raw, err := s.conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("notify: serve: %w", err)
	}
	var (
		buf    = make([]byte, MaxDatagram)
		oob    = make([]byte, max(s.oob, peekOOBSize))
		fds    = make([]int, 0, s.oob/4)
		iov    = unix.Iovec{Base: &buf[0]}
		msg    = unix.Msghdr{Iov: &iov, Control: &oob[0]}
		n      int
		errno  syscall.Errno
		st     serveState
		beats  = make([]marker.Message, 0, maxBeats) // peeked heartbeats, consumed
		skip   = make([]unix.Mmsghdr, maxBeats)
		skipCB = make([]byte, maxBeats*len(oob)) // their control buffers
		read   int                               // what recv read: readBeats, readFull, or readNone
		walk   bool                              // SO_PEEK_OFF works: a peek can look past the last
		deep   int                               // recvs in a row that found a datagram waiting
		pidfds = true                            // the kernel has SO_PASSPIDFD, as far as we know
	)
	iov.SetLen(len(buf))
	msg.SetIovlen(1)
	for i := range skip {
		skip[i].Hdr.Control = &skipCB[i*len(oob)]
	}
	defer st.flush(s.log)
	if err := raw.Control(func(fd uintptr) {
		walk = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEEK_OFF, 0) == nil
	}); err != nil {
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		return fmt.Errorf("notify: serve: %w", err)
	}
	// recvmsg reads or peeks one datagram without allocating (unix.Recvmsg
	// would allocate the sender's address) and reports whether one came.
	// A raw syscall: MSG_DONTWAIT never blocks, so the scheduler need not
	// be told (saves ~30% CPU per datagram under a flood).
	recvmsg := func(fd uintptr, how int) bool {
		for {
			r, _, e := unix.RawSyscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&msg)),
				uintptr(how|unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC))
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
	// consume reads the len(beats) heartbeats peeked, in one recvmmsg,
	// without their payloads. Only Serve and Close's drain read the
	// socket: if the drain took some meanwhile, what this reads is not
	// what was peeked, and nothing of it is handed on (Close discards it
	// all anyway); fds it carried are closed as closeFDs does.
	consume := func(fd uintptr) {
		for i := range beats {
			skip[i].Hdr.SetControllen(len(oob))
			skip[i].Hdr.Flags = 0
		}
		var (
			r uintptr
			e syscall.Errno
		)
		for {
			r, _, e = unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&skip[0])), uintptr(len(beats)),
				unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC, 0, 0)
			if e != unix.EINTR {
				break
			}
		}
		got := 0
		if e == 0 {
			got = int(r)
		}
		ok := got == len(beats)
		for i := range got {
			h := &skip[i].Hdr
			_, _, _, pidfd, rights := parseControl(skipCB[i*len(oob):i*len(oob)+int(h.Controllen)], fds[:0])
			if pidfd >= 0 {
				unix.Close(pidfd)
			}
			closeFDs(rights)
			ok = ok && len(rights) == 0 && h.Flags&unix.MSG_CTRUNC == 0
		}
		if !ok {
			beats = beats[:0]
		}
	}
	// recv reads datagrams: a run of heartbeats, or one other datagram
	// in full; false means "wait until readable".
	// recv walks on past the first heartbeat only while datagrams keep
	// coming faster than it reads them (deep): a walk that ends on an
	// empty queue costs one more peek, for nothing when it took one.
	recv := func(fd uintptr) bool {
		read, beats = readNone, beats[:0]
		other := false // a datagram that is no heartbeat was peeked
		for len(beats) < cap(beats) {
			msg.SetControllen(peekOOBSize)
			msg.Flags = 0
			if !recvmsg(fd, unix.MSG_PEEK) {
				if len(beats) == 0 {
					deep = 0
				}
				break
			}
			if errno != 0 {
				return true
			}
			m, ok := s.heartbeat(&st, buf[:n], oob[:msg.Controllen], int(msg.Flags))
			if !ok {
				other = true
				break
			}
			beats = append(beats, m)
			if !walk || deep < 2 {
				break
			}
		}
		deep++
		if len(beats) > 0 {
			consume(fd)
			if walk && (other || len(beats) == 0) {
				// The peek offset went past a datagram still queued (or
				// the drain raced): back to the head.
				_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEEK_OFF, 0)
			}
			read = readBeats
			return true
		}
		if !other {
			return false // the queue is empty
		}
		// The datagram peeked first is read in full; the read moves the
		// peek offset back by its length, to the head again.
		if pidfds {
			pidfds = passPIDFD(int(fd), true)
		}
		msg.SetControllen(len(oob))
		msg.Flags = 0
		got := recvmsg(fd, 0)
		if pidfds {
			passPIDFD(int(fd), false)
		}
		read = readFull
		return got
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
		switch read {
		case readBeats:
			for _, m := range beats {
				s.deliverBeat(&st, m, handle)
			}
		case readFull:
			s.datagram(&st, buf[:n], oob[:msg.Controllen], int(msg.Flags), fds[:0], handle)
		}
	}
}

// maxBeats bounds the heartbeats Serve peeks before it consumes them in
// one recvmmsg; the kernel queues about 10 datagrams per socket
// (net.unix.max_dgram_qlen) before a sender waits.
const maxBeats = 16

// What Serve's recv read.
const (
	readNone  = iota // nothing to hand on
	readBeats        // heartbeats, peeked and consumed
	readFull         // a datagram read in full, with its sender's pidfd
)

// heartbeat reports whether the datagram b, peeked with the control data
// oob and flags, is a heartbeat that Serve may take on its pid alone (see
// Serve), and returns it parsed, with its sender. Anything else (cut
// short, with fds or without credentials, unparsable, more than a ping) is
// read again in full.
func (s *Server) heartbeat(st *serveState, b, oob []byte, flags int) (marker.Message, bool) {
	if flags&(unix.MSG_CTRUNC|unix.MSG_TRUNC) != 0 {
		return marker.Message{}, false
	}
	pid, uid, creds, _, _ := parseControl(oob, nil)
	if !creds {
		return marker.Message{}, false
	}
	m, err := st.parser.parse(b)
	if err != nil || !m.IsHeartbeatOnly() {
		return marker.Message{}, false
	}
	m.PID, m.UID = pid, uid
	return m, true
}

// deliverBeat vets a heartbeat's sender by its pid (see Serve) and hands
// the heartbeat to handle.
func (s *Server) deliverBeat(st *serveState, m marker.Message, handle func(marker.Message)) {
	if s.accept != nil && !s.accept(m.PID) {
		s.drop(st, reasonSender, m.PID, nil)
		return
	}
	s.accepted.Add(1)
	handle(m)
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
