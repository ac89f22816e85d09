package notify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/supervise-dev/supervise/marker"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
)

// Defaults for Client.
const (
	// DefaultTimeout bounds one send when Client.Timeout is zero.
	DefaultTimeout = time.Second
	// DefaultBarrierTimeout bounds Barrier when it is given no timeout.
	DefaultBarrierTimeout = 5 * time.Second
)

// Client errors.
var (
	// ErrNoSocket reports that NOTIFY_SOCKET is unset or empty.
	ErrNoSocket = errors.New("notify: NOTIFY_SOCKET not set")
	// ErrUnsupportedSocket reports a socket address that is neither a path
	// ("/...") nor an abstract name ("@..."), such as a vsock address.
	ErrUnsupportedSocket = errors.New("notify: unsupported NOTIFY_SOCKET address")
	// ErrBarrierTimeout reports that the supervisor did not acknowledge a
	// barrier in time.
	ErrBarrierTimeout = errors.New("notify: barrier timed out")
	// ErrBarrierUnconfirmed reports that the receiver closed the barrier
	// without confirming it: supervise went away (its fds close when it
	// dies) before journaling, or the receiver is a plain sd_notify
	// manager such as systemd, which processes but does not journal.
	ErrBarrierUnconfirmed = errors.New("notify: barrier closed without confirmation")
	// ErrBarrierRefused reports that the supervisor answered the barrier
	// with NackByte: at least one datagram this process sent since its
	// previous barrier was refused (malformed, a bad session id, over a
	// limit) and is not journaled. The supervisor logs the reason.
	ErrBarrierRefused = errors.New("notify: barrier answered 0: a message sent before it was refused (see supervise's log)")
)

// AckByte is what a supervisor writes to a barrier's fd, before closing it,
// once everything before the barrier is durable. A bare close (the fd of a
// dying process, or a plain sd_notify manager) carries no such byte.
const AckByte = '1'

// NackByte is what a supervisor writes to a barrier's fd, before closing it,
// when at least one datagram the sender sent since its previous barrier was
// refused. It is written when an AckByte would have been, so everything the
// supervisor did accept before the barrier is durable by then too.
const NackByte = '0'

// Client sends notifications to a supervisor. The zero Client uses
// NOTIFY_SOCKET and DefaultTimeout. Each message goes out on a new socket,
// so a Client keeps working across supervisor restarts; it is safe for
// concurrent use.
type Client struct {
	// Socket is the socket address: a path, or "@name" for an abstract
	// socket. Empty means NOTIFY_SOCKET from the environment.
	Socket string
	// Timeout bounds each send, so that a slow or stopped supervisor never
	// blocks the agent. Zero means DefaultTimeout.
	Timeout time.Duration

	// mu serializes sends, so each one's deadline and cancellation are
	// its own; conn is an unconnected socket reused by every send.
	mu   sync.Mutex
	conn *net.UnixConn
}

// Close releases the client's socket; a later send opens a new one. A
// Client must not be copied after its first send.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn = nil
	return err
}

// FromEnv returns a Client for NOTIFY_SOCKET, or ErrNoSocket if it is unset.
func FromEnv() (*Client, error) {
	s := os.Getenv("NOTIFY_SOCKET")
	if s == "" {
		return nil, ErrNoSocket
	}
	return &Client{Socket: s}, nil
}

// Notify sends state to NOTIFY_SOCKET with DefaultTimeout, like the zero
// Client's Notify.
//
// No binary here calls it: it is the Go client's one-call send for an
// agent written in Go.
func Notify(ctx context.Context, state string) error {
	var c Client
	return c.Notify(ctx, state)
}

// Notify sends state, newline-separated KEY=VALUE assignments, as one
// datagram, unchecked. It returns an error if the datagram could not be
// queued before the send deadline or ctx is done.
func (c *Client) Notify(ctx context.Context, state string) error {
	return c.send(ctx, state, nil)
}

// Barrier sends BARRIER=1 with the write end of a new pipe and waits until
// the supervisor confirms it, which supervise does once every earlier
// message from this process is durable (journaled): it writes AckByte and
// closes the fd, like sd_notify_barrier(3) plus the byte. So nil means
// "journaled". A close without the byte returns ErrBarrierUnconfirmed: the
// supervisor died first (the kernel closes a dead process's fds), dropped
// the barrier (a sender it does not accept), or is a plain sd_notify
// manager. It returns ErrBarrierRefused when the supervisor answers
// NackByte: something this process sent since its previous barrier was
// refused. It returns ErrBarrierTimeout after timeout
// (DefaultBarrierTimeout if zero).
func (c *Client) Barrier(ctx context.Context, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultBarrierTimeout
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	// expired reports the end of ctx: the parent's error if the parent
	// ended it, else ErrBarrierTimeout.
	expired := func() error {
		if err := parent.Err(); err != nil {
			return fmt.Errorf("notify: barrier: %w", err)
		}
		if pd, ok := parent.Deadline(); ok && !pd.After(deadline) {
			return fmt.Errorf("notify: barrier: %w", context.DeadlineExceeded)
		}
		return ErrBarrierTimeout
	}

	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("notify: barrier: %w", err)
	}
	defer r.Close()
	err = c.send(ctx, "BARRIER=1", w)
	w.Close() // the supervisor's copy must be the last one
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return expired()
	}
	if err != nil {
		return err
	}
	if err := r.SetReadDeadline(deadline); err != nil {
		return fmt.Errorf("notify: barrier: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { r.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	var b [64]byte
	acked, nacked := false, false
	for {
		n, err := r.Read(b[:])
		if n > 0 && bytes.IndexByte(b[:n], AckByte) >= 0 {
			acked = true
		}
		if n > 0 && bytes.IndexByte(b[:n], NackByte) >= 0 {
			nacked = true
		}
		switch {
		case err == nil: // the answer byte; EOF follows
		case errors.Is(err, io.EOF):
			switch {
			case nacked:
				return ErrBarrierRefused
			case !acked:
				return ErrBarrierUnconfirmed
			}
			return nil
		case errors.Is(err, os.ErrDeadlineExceeded):
			return expired()
		default:
			return fmt.Errorf("notify: barrier: %w", err)
		}
	}
}

// TurnBegin reports that session started turn (may be empty), with an
// excerpt of the request: prompt is flattened to one line and cut to
// MaxPromptLen bytes.
func (c *Client) TurnBegin(ctx context.Context, session, turn, prompt string) error {
	return c.marker(ctx, marker.EventTurnBegin, session,
		"X_SUPERVISE_TURN", turn, "X_SUPERVISE_PROMPT", flatten(prompt, MaxPromptLen))
}

// TurnEnd reports that session's turn ended with outcome o.
func (c *Client) TurnEnd(ctx context.Context, session, turn string, o marker.Outcome) error {
	return c.marker(ctx, marker.EventTurnEnd, session, "X_SUPERVISE_TURN", turn, "X_SUPERVISE_OUTCOME", string(o))
}

// Waiting reports that session is waiting for the user (WaitInput).
func (c *Client) Waiting(ctx context.Context, session, turn string) error {
	return c.WaitingFor(ctx, session, turn, marker.WaitInput)
}

// WaitingFor reports that session is waiting for w: a person (WaitInput,
// WaitApproval), or the model API the agent is retrying (WaitReconnect,
// resumed like in_turn after a death). An empty w means WaitInput.
func (c *Client) WaitingFor(ctx context.Context, session, turn string, w marker.Wait) error {
	if w == "" {
		w = marker.WaitInput
	}
	return c.marker(ctx, marker.EventWaiting, session, "X_SUPERVISE_TURN", turn, "X_SUPERVISE_WAIT", string(w))
}

// Phase reports that session entered phase p; tool names the tool for
// PhaseTool and may be empty.
func (c *Client) Phase(ctx context.Context, session string, p marker.Phase, tool string) error {
	return c.marker(ctx, marker.EventPhase, session, "X_SUPERVISE_PHASE", string(p), "X_SUPERVISE_TOOL", tool)
}

// ToolPhase reports that session is running tool, with detail saying
// what it runs (a command line, a file path) for the continuation message
// should the agent die meanwhile: "while the tool "Bash" was running
// `npm test`". detail is flattened to one line (control characters become
// spaces) and cut to MaxDetailLen bytes, ending with "…" when cut; it may
// be empty.
func (c *Client) ToolPhase(ctx context.Context, session, tool, detail string) error {
	return c.marker(ctx, marker.EventPhase, session, "X_SUPERVISE_PHASE", string(marker.PhaseTool), "X_SUPERVISE_TOOL", tool,
		"X_SUPERVISE_DETAIL", OneLine(detail, MaxDetailLen))
}

// OneLine flattens s to one line of valid UTF-8 without control characters
// (each becomes a space; the ends are trimmed) and bounds it to n bytes,
// ending with "…" when it was cut: the form of X_SUPERVISE_DETAIL.
func OneLine(s string, n int) string {
	s = strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD")))
	return bounded([]byte(s), n)
}

// Resumed reports that the agent took over session's interrupted turn
// from the resume file.
func (c *Client) Resumed(ctx context.Context, session, turn string) error {
	return c.marker(ctx, marker.EventResumed, session, "X_SUPERVISE_TURN", turn)
}

// Effect declares that a side effect of session's open turn completed;
// key names it, such as "write:src/a.go" or a tool and a hash of its
// arguments. supervise journals it with the turn and names it in the
// resume file ("effects") and the continuation, so that an agent resuming
// the turn can skip it. key is passed through EffectKey first. Send it
// right after the effect and wait for a Barrier before going on, so a
// crash after the barrier cannot lose it.
func (c *Client) Effect(ctx context.Context, session, key string) error {
	k := EffectKey(key)
	if k == "" {
		return fmt.Errorf("notify: effect: empty key: %w", ErrProtocol)
	}
	return c.marker(ctx, marker.EventEffect, session, "X_SUPERVISE_EFFECT", k)
}

// EffectKey makes key a valid X_SUPERVISE_EFFECT value, deterministically:
// flattened to one line (control characters become spaces, the ends are
// trimmed) and, when longer than MaxEffectLen bytes, cut at a rune boundary
// and ended with "#" and the first 16 hex digits of the SHA-256 of the
// whole flattened key, so two long keys that differ only at their ends
// stay apart. "" for a key that is empty once flattened.
func EffectKey(key string) string {
	k := strings.TrimSpace(flatten(key, 3*len(key)))
	if len(k) <= MaxEffectLen {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	tail := "#" + hex.EncodeToString(sum[:8])
	return string(cut([]byte(k), MaxEffectLen-len(tail))) + tail
}

// Closed reports that session is finished and must never be resumed.
func (c *Client) Closed(ctx context.Context, session string) error {
	return c.marker(ctx, marker.EventClosed, session)
}

// Heartbeat sends WATCHDOG=1 for session: a keep-alive for the process
// and a liveness mark for the session.
func (c *Client) Heartbeat(ctx context.Context, session string) error {
	return c.marker(ctx, marker.EventNone, session)
}

// Ready sends READY=1.
func (c *Client) Ready(ctx context.Context) error { return c.Notify(ctx, "READY=1") }

// Stopping sends STOPPING=1.
func (c *Client) Stopping(ctx context.Context) error { return c.Notify(ctx, "STOPPING=1") }

// Watchdog sends WATCHDOG=1.
func (c *Client) Watchdog(ctx context.Context) error { return c.Notify(ctx, "WATCHDOG=1") }

// Status sends STATUS=line, flattened to one line without control
// characters.
func (c *Client) Status(ctx context.Context, line string) error {
	return c.Notify(ctx, "STATUS="+flatten(line, MaxDatagram-len("STATUS=")))
}

// marker sends one private-key datagram for session: event e (or, for
// EventNone, a heartbeat) followed by the non-empty key/value pairs in kv.
// No value may contain a control character, so none can smuggle in a line
// of its own; the datagram is then checked with Parse before it is sent.
func (c *Client) marker(ctx context.Context, e marker.Event, session string, kv ...string) error {
	label := e
	if e == marker.EventNone {
		label = marker.EventHeartbeat
	}
	if !validSession([]byte(session)) {
		return fmt.Errorf("notify: %s: bad session id %q: %w", label, session, ErrProtocol)
	}
	for i := 1; i < len(kv); i += 2 {
		if !validText([]byte(kv[i]), false) {
			return fmt.Errorf("notify: %s: bad %s %q: %w", label, kv[i-1], kv[i], ErrProtocol)
		}
	}
	var b strings.Builder
	if e == marker.EventNone {
		b.WriteString("WATCHDOG=1\n")
	}
	b.WriteString("X_SUPERVISE_SESSION=")
	b.WriteString(session)
	if e != marker.EventNone {
		b.WriteString("\nX_SUPERVISE_EVENT=")
		b.WriteString(string(e))
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			b.WriteString("\n" + kv[i] + "=" + kv[i+1])
		}
	}
	state := b.String()
	if _, err := Parse([]byte(state)); err != nil {
		return fmt.Errorf("notify: %s: %w", label, err)
	}
	return c.Notify(ctx, state)
}

// send sends state as one datagram, with f's descriptor if f is not nil.
func (c *Client) send(ctx context.Context, state string, f *os.File) error {
	addr := c.Socket
	if addr == "" {
		addr = os.Getenv("NOTIFY_SOCKET")
	}
	switch {
	case addr == "":
		return ErrNoSocket
	case addr[0] != '/' && addr[0] != '@':
		return fmt.Errorf("%w: %q", ErrUnsupportedSocket, addr)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("notify: send: %w", err)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := time.Now().Add(timeout)
	ctxDeadline := false
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline, ctxDeadline = d, true
	}
	// One unconnected socket, reused: each send names the address, which the
	// kernel resolves anew, so a supervisor restarted at the same path is
	// reached (a connected socket would stay tied to the dead one).
	c.mu.Lock()
	defer c.mu.Unlock()
	conn, err := c.socket()
	if err != nil {
		return fmt.Errorf("notify: send: %w", err)
	}
	if err := conn.SetWriteDeadline(deadline); err != nil {
		return fmt.Errorf("notify: send: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	var oob []byte
	if f != nil {
		oob = syscall.UnixRights(int(f.Fd()))
	}
	if _, _, err := conn.WriteMsgUnix([]byte(state), oob, &net.UnixAddr{Name: addr, Net: "unixgram"}); err != nil {
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			// Anything but a full queue: start over with a fresh socket.
			conn.Close()
			c.conn = nil
		}
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		} else if ctxDeadline && errors.Is(err, os.ErrDeadlineExceeded) {
			err = context.DeadlineExceeded
		}
		return fmt.Errorf("notify: send: %w", err)
	}
	return nil
}

// socket returns the client's unconnected datagram socket, opening it on
// first use; c.mu is held.
func (c *Client) socket() (*net.UnixConn, error) {
	if c.conn != nil {
		return c.conn, nil
	}
	fd, err := dgramSocket()
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "notify-client")
	pc, err := net.FilePacketConn(f) // dups the fd into the net poller
	f.Close()
	if err != nil {
		return nil, err
	}
	c.conn = pc.(*net.UnixConn)
	return c.conn, nil
}

// flatten makes s one line of valid UTF-8 without control characters
// (tabs and line breaks become spaces) and cuts it to at most n bytes at a
// rune boundary.
func flatten(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	return string(cut([]byte(s), n))
}
