// Package observe carries supervisor.Observer events from a `supervise run`
// to the chaos harness that started it, over a socket the harness passes
// down as an inherited file descriptor named by SUPERVISE_CHAOS_FD.
//
// The wire is one JSON object per line (a supervisor.Event) from supervise,
// answered by one line from the harness once it has acted on the event; the
// loop of supervise waits for that answer. If the harness goes away,
// supervise logs it once and carries on unobserved.
//
// Terminal is the other observer: for an interactive agent it words each
// death in one line on the terminal, between runs (terminal.go).
package observe

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/supervise-dev/supervise/supervisor"
)

// EnvFD names the inherited descriptor of the harness's socket.
const EnvFD = "SUPERVISE_CHAOS_FD"

// FromEnv returns the Observer for the descriptor named by SUPERVISE_CHAOS_FD,
// or nil when it is not set. It unsets the variable, so the agent (and a
// supervise it might run) never sees it, and marks the descriptor
// close-on-exec, so the agent never inherits it. Close the returned
// closer when supervise ends.
func FromEnv(log *slog.Logger) (supervisor.Observer, func(), error) {
	v, ok := os.LookupEnv(EnvFD)
	if !ok {
		return nil, func() {}, nil
	}
	os.Unsetenv(EnvFD)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, nil, fmt.Errorf("%s=%q: want an inherited file descriptor number", EnvFD, v)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		return nil, nil, fmt.Errorf("%s=%d: %w", EnvFD, fd, err)
	}
	unix.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "chaos-observer")
	c := &client{f: f, r: bufio.NewReader(f), log: log}
	return c.observe, func() { f.Close() }, nil
}

type client struct {
	mu   sync.Mutex
	f    *os.File
	r    *bufio.Reader
	log  *slog.Logger
	dead bool
}

func (c *client) observe(ev supervisor.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	b, err := json.Marshal(ev)
	if err == nil {
		_, err = c.f.Write(append(b, '\n'))
	}
	if err == nil {
		_, err = c.r.ReadString('\n')
	}
	if err != nil {
		c.dead = true
		if c.log != nil {
			c.log.Warn("chaos harness went away: carrying on unobserved", "err", err)
		}
	}
}

// Conn is the harness's end: it reads events and answers them.
type Conn struct {
	f *os.File
	d *json.Decoder
}

// Pair makes the socket pair: the harness keeps the Conn and passes the
// *os.File to supervise (exec.Cmd.ExtraFiles) with SUPERVISE_CHAOS_FD set
// to its number there, then closes its own copy of it.
func Pair() (*Conn, *os.File, error) {
	// ForkLock: no fork may inherit the pair before it is close-on-exec
	// (SOCK_CLOEXEC is Linux-only).
	syscall.ForkLock.RLock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fds[0])
		unix.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, err
	}
	mine := os.NewFile(uintptr(fds[0]), "chaos-harness")
	theirs := os.NewFile(uintptr(fds[1]), "chaos-observer")
	return &Conn{f: mine, d: json.NewDecoder(mine)}, theirs, nil
}

// ErrClosed is returned by Next once supervise closed its end (it exited).
var ErrClosed = errors.New("observer connection closed")

// Next reads the next event; supervise waits until Done is called.
func (c *Conn) Next() (supervisor.Event, error) {
	var ev supervisor.Event
	if err := c.d.Decode(&ev); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
			return ev, ErrClosed
		}
		return ev, err
	}
	return ev, nil
}

// Done lets supervise go on after the event Next returned.
func (c *Conn) Done() error {
	_, err := c.f.Write([]byte("ok\n"))
	return err
}

// Close closes the harness's end; a supervise still running carries on
// unobserved.
func (c *Conn) Close() error { return c.f.Close() }
