package notify

import (
	"errors"
	"iter"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
)

// SocketName is the file name of the socket inside Config.Dir.
const SocketName = "notify.sock"

// Config configures Listen.
type Config struct {
	// Dir is the private directory for the socket. Listen creates it with
	// mode 0700; an existing one must be a real directory (not a symbolic
	// link) owned by the caller and not writable by others, and is
	// tightened to 0700. The socket is Dir/notify.sock.
	Dir string
	// Accept checks the sender of every datagram, by its kernel-attested
	// pid, on the Serve goroutine. It must be fast and must not block. Nil
	// accepts every sender. Where datagrams carry no credentials
	// (Credentials is false: macOS, -tags supervise_portable) it is called
	// with pid 0 and can only decide by the moment, not by the sender.
	Accept func(pid int32) bool
	// Log receives rate-limited warnings about dropped datagrams. Nil
	// discards them.
	Log *slog.Logger
}

// Server is a bound notify socket. Serve reads it; Close closes it and
// removes the socket file. Its methods are safe for concurrent use, but
// Serve must be called at most once.
type Server struct {
	path   string
	conn   *net.UnixConn
	file   os.FileInfo // the socket file we bound, to unlink only our own
	accept func(pid int32) bool
	log    *slog.Logger
	oob    int // size of the control buffer; tests shrink it

	closeOnce sync.Once
	closeErr  error

	accepted atomic.Uint64
	dropped  [numReasons]atomic.Uint64
	// refused remembers senders whose datagrams were refused since their
	// last barrier: that barrier's Message.Refused is set.
	refused Refusals
}

// ForgetRefusals clears the refusals remembered per sender, for a new
// process tree (pids of the last one may be reused).
func (s *Server) ForgetRefusals() { s.refused.Forget() }

// Path returns the socket path: the value of NOTIFY_SOCKET for the child.
func (s *Server) Path() string { return s.path }

// Close closes the socket, which makes Serve return nil, and removes the
// socket file if it is still the one Listen bound. Datagrams still queued
// are discarded, their fds closed as Serve closes those it drops. It is
// safe to call more than once and after Serve returned; later calls return
// nil.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.discard()
		s.closeErr = s.conn.Close()
		if fi, err := os.Lstat(s.path); err == nil && os.SameFile(fi, s.file) {
			if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) && s.closeErr == nil {
				s.closeErr = err
			}
		}
	})
	return s.closeErr
}

// Stats returns the server's counters. It is safe to call concurrently
// with Serve.
func (s *Server) Stats() Stats {
	st := Stats{Accepted: s.accepted.Load()}
	d := &st.Dropped
	for r := range reason(numReasons) {
		*d.field(r) = s.dropped[r].Load()
	}
	return st
}

// Stats counts datagrams since Listen.
type Stats struct {
	// Accepted counts datagrams passed to the handler.
	Accepted uint64
	// Dropped counts datagrams dropped, by reason; Dropped.FDs counts
	// messages delivered without the file descriptors they carried.
	Dropped Drops
}

// Drops counts dropped datagrams by reason. Each field's reason label, as
// yielded by All, is given in its comment.
type Drops struct {
	Empty     uint64 // "empty": zero-length datagram
	Truncated uint64 // "truncated": longer than MaxDatagram (MSG_TRUNC)
	CTrunc    uint64 // "ctrunc": control data truncated (MSG_CTRUNC)
	NUL       uint64 // "nul": embedded NUL byte
	UTF8      uint64 // "utf8": invalid UTF-8
	TooLarge  uint64 // "too_large": over MaxDatagram (not seen with the 4096-byte buffer)
	Malformed uint64 // "malformed": ErrMalformed
	Protocol  uint64 // "protocol": ErrProtocol, or BARRIER=1 without exactly one fd
	Sender    uint64 // "sender": Config.Accept rejected the sender
	NoCreds   uint64 // "no_creds": no SCM_CREDENTIALS
	FDs       uint64 // "fds": fds closed on a message that was still delivered
}

// All yields each reason label with its counter, in a fixed order. The
// labels are stable and suitable as metric label values.
func (d Drops) All() iter.Seq2[string, uint64] {
	return func(yield func(string, uint64) bool) {
		for r := range reason(numReasons) {
			if !yield(r.String(), *d.field(r)) {
				return
			}
		}
	}
}

// reason is why a datagram (or its fds) was dropped.
type reason int

const (
	reasonEmpty reason = iota
	reasonTruncated
	reasonCTrunc
	reasonNUL
	reasonUTF8
	reasonTooLarge
	reasonMalformed
	reasonProtocol
	reasonSender
	reasonNoCreds
	reasonFDs
	numReasons
)

// String returns the reason's label.
func (r reason) String() string {
	switch r {
	case reasonEmpty:
		return "empty"
	case reasonTruncated:
		return "truncated"
	case reasonCTrunc:
		return "ctrunc"
	case reasonNUL:
		return "nul"
	case reasonUTF8:
		return "utf8"
	case reasonTooLarge:
		return "too_large"
	case reasonMalformed:
		return "malformed"
	case reasonProtocol:
		return "protocol"
	case reasonSender:
		return "sender"
	case reasonNoCreds:
		return "no_creds"
	case reasonFDs:
		return "fds"
	}
	return "unknown"
}

func (d *Drops) field(r reason) *uint64 {
	switch r {
	case reasonEmpty:
		return &d.Empty
	case reasonTruncated:
		return &d.Truncated
	case reasonCTrunc:
		return &d.CTrunc
	case reasonNUL:
		return &d.NUL
	case reasonUTF8:
		return &d.UTF8
	case reasonTooLarge:
		return &d.TooLarge
	case reasonMalformed:
		return &d.Malformed
	case reasonProtocol:
		return &d.Protocol
	case reasonSender:
		return &d.Sender
	case reasonNoCreds:
		return &d.NoCreds
	}
	return &d.FDs
}

// parseReason maps a Parse error to its drop reason.
func parseReason(err error) reason {
	switch {
	case errors.Is(err, ErrEmpty):
		return reasonEmpty
	case errors.Is(err, ErrNUL):
		return reasonNUL
	case errors.Is(err, ErrInvalidUTF8):
		return reasonUTF8
	case errors.Is(err, ErrTooLarge):
		return reasonTooLarge
	case errors.Is(err, ErrMalformed):
		return reasonMalformed
	}
	return reasonProtocol
}
