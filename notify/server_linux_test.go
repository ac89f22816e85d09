package notify

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"golang.org/x/sys/unix"
)

// waitTimeout bounds every wait for an event in these tests.
const waitTimeout = 10 * time.Second

// serve listens in a new temporary directory (unless cfg.Dir is set),
// runs Serve with handle, and registers Close plus a check that Serve
// returned nil.
func serve(t testing.TB, cfg Config, handle func(marker.Message)) *Server {
	t.Helper()
	s := listen(t, cfg)
	start(t, s, handle)
	return s
}

func listen(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(t.TempDir(), "run")
	}
	s, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func start(t testing.TB, s *Server, handle func(marker.Message)) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Serve(handle) }()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}

// collect returns a handler that forwards messages to a channel and
// closes barrier fds at once.
func collect() (func(marker.Message), <-chan marker.Message) {
	ch := make(chan marker.Message, 64)
	return func(m marker.Message) {
		if m.Fd != nil {
			Ack(m.Fd)
			m.Fd = nil
		}
		ch <- m
	}, ch
}

func next(t testing.TB, ch <-chan marker.Message) marker.Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(waitTimeout):
		t.Fatal("no message delivered")
		return marker.Message{}
	}
}

// dial returns a datagram socket connected to s.
func dial(t testing.TB, s *Server) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: s.Path(), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func send(t testing.TB, c *net.UnixConn, payload string, fds ...int) {
	t.Helper()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if err := sendmsg(c, []byte(payload), oob); err != nil {
		t.Fatalf("send %.40q with %d fds: %v", payload, len(fds), err)
	}
}

// expectStatus sends STATUS=line and checks that it is the next message
// delivered: everything sent before it was handled or dropped.
func expectStatus(t testing.TB, c *net.UnixConn, ch <-chan marker.Message, line string) {
	t.Helper()
	send(t, c, "STATUS="+line)
	if m := next(t, ch); m.Status != line {
		t.Fatalf("next message = %+v, want STATUS=%s", m, line)
	}
}

func drops(s *Server) map[string]uint64 {
	m := make(map[string]uint64)
	for r, n := range s.Stats().Dropped.All() {
		m[r] = n
	}
	return m
}

// pipe returns a pipe whose write end the test sends away; the read end
// sees EOF once every copy of the write end is closed.
func pipe(t testing.TB) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// waitEOF waits until every copy of r's write end is closed.
func waitEOF(t testing.TB, r *os.File) {
	t.Helper()
	r.SetReadDeadline(time.Now().Add(waitTimeout))
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Fatalf("waiting for the server to close the fd: %v", err)
	}
}

// requireCredentials skips a test of what only SCM_CREDENTIALS gives: the
// portable backend (macOS, -tags supervise_portable) identifies no sender.
func requireCredentials(t testing.TB) {
	t.Helper()
	if !Credentials {
		t.Skip("needs SCM_CREDENTIALS (Linux backend): the portable backend cannot identify a datagram's sender")
	}
}

// countFDs counts this process's fds open on /dev/null, the file every
// test here passes: only those can leak from a received datagram, and an
// unrelated socket an earlier test left to its finalizer may close at any
// moment (it did, under the portable backend's busier garbage collector).
func countFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == os.DevNull {
			n++
		}
	}
	return n
}

func TestListen(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A stale socket from a previous instance.
	stale, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, SocketName), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	stale.Close()

	s := listen(t, Config{Dir: dir})
	if want := filepath.Join(dir, SocketName); s.Path() != want {
		t.Errorf("Path() = %q, want %q", s.Path(), want)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700}, {s.Path(), 0o600}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != c.mode {
			t.Errorf("%s mode = %v, want %v", c.path, fi.Mode().Perm(), c.mode)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(s.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.Serve(func(marker.Message) { t.Error("handler called after Close") }); err != nil {
		t.Errorf("Serve after Close = %v, want nil", err)
	}
}

func TestListenRefusesNonSocket(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, SocketName), []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := Listen(Config{Dir: dir}); err == nil {
		s.Close()
		t.Fatal("Listen over a regular file succeeded")
	}
}

// TestCloseKeepsNewSocket: closing an old Server must not unlink the
// socket a newer Server bound at the same path.
func TestCloseKeepsNewSocket(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := listen(t, Config{Dir: dir})
	handle, ch := collect()
	s := serve(t, Config{Dir: dir}, handle)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, dial(t, s), ch, "still here")
}

func TestServeDeliversCredentials(t *testing.T) {
	t.Parallel()
	handle, ch := collect()
	s := serve(t, Config{}, handle)
	send(t, dial(t, s), "READY=1\nSTATUS=up")
	m := next(t, ch)
	want := marker.Message{PID: int32(os.Getpid()), UID: uint32(os.Getuid()), Ready: true, Status: "up", HasStatus: true}
	if !Credentials {
		want.PID, want.UID = 0, 0 // the portable backend identifies no sender
	}
	if m != want {
		t.Errorf("got %+v, want %+v", m, want)
	}
	if st := s.Stats(); st.Accepted != 1 || st.Dropped.Total() != 0 {
		t.Errorf("Stats() = %+v", st)
	}
}

// TestServeBadInput covers reliability.md 5 D cases 31-34: each bad
// datagram is dropped (or its bad part ignored) and counted, and the next
// valid datagram is still delivered.
func TestServeBadInput(t *testing.T) {
	t.Parallel()
	// A turn-end whose first 4096 bytes parse on their own: a server that
	// ignored MSG_TRUNC would apply it.
	turnEnd := "X_SUPERVISE_SESSION=s1\nX_SUPERVISE_EVENT=turn-end\nX_SUPERVISE_OUTCOME=completed\nX_PAD="
	oversized := func(n int) string { return turnEnd + strings.Repeat("p", n-len(turnEnd)) }
	sess := "X_SUPERVISE_SESSION=s1\n"
	tests := []struct {
		name    string
		payload string
		reason  string          // drop reason, or "" if delivered
		want    *marker.Message // delivered message, without credentials
	}{
		{name: "31 zero length", payload: "", reason: "empty"},
		{name: "32 oversized 4097", payload: oversized(MaxDatagram + 1), reason: "truncated"},
		{name: "32 oversized 64KiB", payload: oversized(64 << 10), reason: "truncated"},
		{name: "32 10000 lines", payload: strings.Repeat("A=\n", 10000), reason: "truncated"},
		{name: "33 embedded NUL", payload: "READY=1\x00STOPPING=1", reason: "nul"},
		{name: "33 trailing NUL", payload: "READY=1\x00", want: &marker.Message{Ready: true}},
		{name: "33 invalid UTF-8", payload: "STATUS=\xc3\x28", reason: "utf8"},
		{name: "33 CRLF", payload: "READY=1\r\nSTATUS=x\r\n", want: &marker.Message{}},
		{name: "33 CRLF private", payload: "X_SUPERVISE_SESSION=s1\r\nX_SUPERVISE_EVENT=closed\r\n", reason: "protocol"},
		{name: "33 no equals", payload: "READY", reason: "malformed"},
		{name: "33 empty key", payload: "=1", reason: "malformed"},
		{name: "33 duplicate private key", payload: sess + sess + "X_SUPERVISE_EVENT=closed", reason: "malformed"},
		{name: "33 duplicate standard key", payload: "STATUS=a\nSTATUS=b", want: &marker.Message{Status: "b", HasStatus: true}},
		{name: "33 value of 4000 bytes", payload: "STATUS=" + strings.Repeat("v", 4000), want: &marker.Message{Status: strings.Repeat("v", 4000), HasStatus: true}},
		{name: "33 unknown keys", payload: "X_OTHER=1\nERRNO=5\nFDSTORE=1", want: &marker.Message{}},
		{name: "33 READY=0", payload: "READY=0", want: &marker.Message{}},
		{name: "33 WATCHDOG_USEC=0", payload: "WATCHDOG_USEC=0", want: &marker.Message{}},
		{name: "33 WATCHDOG_USEC=-1", payload: "WATCHDOG_USEC=-1", want: &marker.Message{}},
		{name: "33 WATCHDOG_USEC=2^64", payload: "WATCHDOG_USEC=18446744073709551616", want: &marker.Message{}},
		{name: "33 EXTEND_TIMEOUT_USEC=huge", payload: "EXTEND_TIMEOUT_USEC=" + strings.Repeat("9", 30), want: &marker.Message{}},
		{name: "33 event without session", payload: "X_SUPERVISE_EVENT=turn-begin", reason: "protocol"},
		{name: "33 unknown event", payload: sess + "X_SUPERVISE_EVENT=explode", reason: "protocol"},
		{name: "34 MAINPID=1", payload: "MAINPID=1\nREADY=1", want: &marker.Message{Ready: true}},
		{name: "34 MAINPID=supervisor", payload: "MAINPID=" + strconv.Itoa(os.Getpid()), want: &marker.Message{}},
		{name: "34 MAINPID=unrelated", payload: "MAINPID=999999", want: &marker.Message{}},
	}
	handle, ch := collect()
	s := serve(t, Config{}, handle)
	c := dial(t, s)
	pid, uid := int32(os.Getpid()), uint32(os.Getuid())
	if !Credentials {
		pid, uid = 0, 0
	}
	for i, tt := range tests {
		before := drops(s)
		send(t, c, tt.payload)
		if tt.want != nil {
			want := *tt.want
			want.PID, want.UID = pid, uid
			if m := next(t, ch); m != want {
				t.Errorf("%s: got %+v, want %+v", tt.name, m, want)
			}
		}
		expectStatus(t, c, ch, "next "+strconv.Itoa(i))
		after := drops(s)
		for r, n := range after {
			want := before[r]
			if r == tt.reason {
				want++
			}
			if n != want {
				t.Errorf("%s: Dropped[%s] = %d, want %d", tt.name, r, n, want)
			}
		}
	}
}

// TestServeFDSpam is reliability.md 5 D case 37: every fd received is
// closed and the fd count stays flat. Not parallel: it counts the
// process's fds.
func TestServeFDSpam(t *testing.T) {
	handle, ch := collect()
	s := serve(t, Config{}, func(m marker.Message) {
		if m.HasStatus {
			handle(m)
		}
	})
	c := dial(t, s)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	spam := func(n int) []int {
		fds := make([]int, n)
		for i := range fds {
			fds[i] = int(null.Fd())
		}
		return fds
	}
	before := countFDs(t)
	var sent uint64
	for _, tc := range []struct{ fds, messages int }{{1, 3000}, {253, 500}} {
		fds := spam(tc.fds)
		for range tc.messages {
			send(t, c, "WATCHDOG=1", fds...)
			sent++
		}
		expectStatus(t, c, ch, strconv.Itoa(tc.fds)+" fds")
	}
	// More than SCM_MAX_FD (253) fds: the sender's kernel refuses them.
	if err := sendmsg(c, []byte("WATCHDOG=1"), unix.UnixRights(spam(254)...)); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("send with 254 fds: %v, want EINVAL", err)
	}
	expectStatus(t, c, ch, "after 254")
	if after := countFDs(t); after != before {
		t.Errorf("open fds: %d before, %d after", before, after)
	}
	if st := s.Stats(); st.Dropped.FDs != sent || st.Accepted != sent+3 {
		t.Errorf("Stats() = %+v, want %d messages delivered without their fds", st, sent)
	}
}

// TestServeCTrunc checks that control data cut short (MSG_CTRUNC) drops
// the datagram, closes the fds that did arrive, and does not stall the
// server (systemd#17795). Not parallel: it counts the process's fds.
func TestServeCTrunc(t *testing.T) {
	s := listen(t, Config{})
	// Room for what the backend needs besides fds, and for 4 fds.
	s.oob = oobSize() - unix.CmsgSpace(maxFDs*4) + unix.CmsgSpace(4*4)
	handle, ch := collect()
	start(t, s, handle)
	c := dial(t, s)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	fds := make([]int, 10)
	for i := range fds {
		fds[i] = int(null.Fd())
	}
	before := countFDs(t)
	for range 100 {
		send(t, c, "READY=1", fds...)
	}
	expectStatus(t, c, ch, "after ctrunc")
	if after := countFDs(t); after != before {
		t.Errorf("open fds: %d before, %d after", before, after)
	}
	if d := s.Stats().Dropped; d.CTrunc != 100 {
		t.Errorf("Dropped.CTrunc = %d, want 100", d.CTrunc)
	}
}

// TestServeBarrier is reliability.md 5 D case 38: misused barriers are
// dropped with their fds closed; a valid one hands its fd to the handler.
func TestServeBarrier(t *testing.T) {
	t.Parallel()
	handle, ch := collect()
	s := serve(t, Config{}, handle)
	c := dial(t, s)

	t.Run("no fd", func(t *testing.T) {
		send(t, c, "BARRIER=1")
		expectStatus(t, c, ch, "after no fd")
	})
	t.Run("two fds", func(t *testing.T) {
		r1, w1 := pipe(t)
		r2, w2 := pipe(t)
		send(t, c, "BARRIER=1", int(w1.Fd()), int(w2.Fd()))
		w1.Close()
		w2.Close()
		waitEOF(t, r1)
		waitEOF(t, r2)
		expectStatus(t, c, ch, "after two fds")
	})
	t.Run("mixed", func(t *testing.T) {
		r, w := pipe(t)
		send(t, c, "BARRIER=1\nREADY=1", int(w.Fd()))
		w.Close()
		waitEOF(t, r)
		expectStatus(t, c, ch, "after mixed")
	})
	if d := s.Stats().Dropped; d.Protocol != 3 {
		t.Errorf("Dropped.Protocol = %d, want 3", d.Protocol)
	}

	t.Run("fd on another message", func(t *testing.T) {
		r, w := pipe(t)
		send(t, c, "READY=1", int(w.Fd()))
		w.Close()
		if m := next(t, ch); !m.Ready || m.Fd != nil {
			t.Errorf("got %+v, want READY=1 without fd", m)
		}
		waitEOF(t, r)
		if d := s.Stats().Dropped; d.FDs != 1 {
			t.Errorf("Dropped.FDs = %d, want 1", d.FDs)
		}
	})
	t.Run("valid", func(t *testing.T) {
		r, w := pipe(t)
		send(t, c, "BARRIER=1\n", int(w.Fd()))
		w.Close()
		if m := next(t, ch); !m.Barrier {
			t.Errorf("got %+v, want a barrier", m)
		}
		waitEOF(t, r) // collect closed it
	})
}

// TestServeLingeringFD: fds the Server closes itself (on a message that
// takes none, on a dropped barrier) may be sockets the agent set to linger
// on close, whose peer never reads; with the agent's own copy gone, the
// Server's close is the last one and must not wait for that peer.
func TestServeLingeringFD(t *testing.T) {
	t.Parallel()
	s := listen(t, Config{})
	c := dial(t, s)
	// Sent and closed before Serve runs: the Server's copy is the last.
	for _, payload := range []string{"READY=1", "BARRIER=1\nREADY=1"} {
		f := lingering(t)
		send(t, c, payload, fdOf(t, f))
		f.Close()
	}
	handle, ch := collect()
	start(t, s, handle)
	if m := next(t, ch); !m.Ready || m.Barrier {
		t.Errorf("got %+v, want READY=1 (the barrier with it is dropped)", m)
	}
	expectStatus(t, c, ch, "after")
}

// TestCloseLingeringFD: Close with datagrams still queued, one carrying a
// socket that lingers on close, returns at once: the queue is drained and
// its fds closed as Serve closes them, not left to the kernel's close of
// the socket, which would wait for that socket's peer.
func TestCloseLingeringFD(t *testing.T) {
	t.Parallel()
	s := listen(t, Config{})
	c := dial(t, s)
	f := lingering(t)
	send(t, c, "READY=1", fdOf(t, f))
	f.Close() // the queued copy is the last one
	r, w := pipe(t)
	send(t, c, "BARRIER=1", int(w.Fd()))
	w.Close()
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Close waited for a queued fd's peer")
	}
	waitEOF(t, r) // the queued barrier's fd is closed too
}

// TestServeAccept is reliability.md 5 D case 35 for a same-uid process:
// Config.Accept sees the kernel-attested pid of a child process.
func TestServeAccept(t *testing.T) {
	requireCredentials(t)
	t.Parallel()
	for _, accept := range []bool{false, true} {
		var helperPID atomic.Int32
		handle, ch := collect()
		s := serve(t, Config{Accept: func(pid int32) bool {
			return (pid == helperPID.Load()) == accept
		}}, handle)

		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"=closed-after-stdin", "NOTIFY_SOCKET="+s.Path())
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		helperPID.Store(int32(cmd.Process.Pid))
		io.WriteString(stdin, "go\n")
		// The helper stays alive until its datagram was handled (stdin
		// closed): one whose sender is gone is dropped, whatever Accept says.
		var m marker.Message
		if accept {
			m = next(t, ch)
		} else {
			deadline := time.Now().Add(10 * time.Second)
			for s.Stats().Dropped.Sender == 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
		}
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper: %v: %s", err, stderr.Bytes())
		}
		if accept {
			if m.PID != int32(cmd.Process.Pid) || m.Event != marker.EventClosed || m.Session != "helper" {
				t.Errorf("got %+v, want closed from pid %d", m, cmd.Process.Pid)
			}
			continue
		}
		// Our own pid is not the helper's, so this one is accepted.
		c := dial(t, s)
		expectStatus(t, c, ch, "from the test")
		if d := s.Stats().Dropped; d.Sender != 1 {
			t.Errorf("Dropped.Sender = %d, want 1", d.Sender)
		}
	}
}

// TestServeCloseUnblocks checks oklog/run's contract: Close makes a
// blocked Serve return nil.
func TestServeCloseUnblocks(t *testing.T) {
	t.Parallel()
	s := listen(t, Config{})
	done := make(chan error, 1)
	go func() { done <- s.Serve(func(marker.Message) {}) }()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Serve did not return after Close")
	}
}

// TestStatsConcurrent guards against Stats and Serve racing; run with
// -race.
func TestStatsConcurrent(t *testing.T) {
	t.Parallel()
	handle, ch := collect()
	s := serve(t, Config{}, handle)
	c := dial(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			_ = s.Stats()
		}
	}()
	for i := range 20 {
		send(t, c, "")
		expectStatus(t, c, ch, strconv.Itoa(i))
	}
	if d := s.Stats().Dropped; d.Empty != 20 {
		t.Errorf("Dropped.Empty = %d, want 20", d.Empty)
	}
}

// TestServeDropLog checks that drops are logged at most once a second per
// reason, each line carrying the drops since the previous one, and that
// Serve logs the rest when it returns.
func TestServeDropLog(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer // written by Serve only; read after it returned
	s := listen(t, Config{Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	handle, ch := collect()
	done := make(chan error, 1)
	go func() { done <- s.Serve(handle) }()
	c := dial(t, s)
	begin := time.Now()
	const drops = 100
	for range drops {
		send(t, c, "")
	}
	expectStatus(t, c, ch, "done")
	elapsed := time.Since(begin)
	s.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	var lines int
	var total uint64
	sc := bufio.NewScanner(&logs)
	for sc.Scan() {
		var rec struct {
			Level, Msg, Reason string
			Dropped            uint64
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Level != "WARN" || rec.Msg != "notify datagram dropped" || rec.Reason != "empty" {
			t.Errorf("unexpected log line %s", sc.Bytes())
		}
		lines++
		total += rec.Dropped
	}
	if total != drops {
		t.Errorf("log lines account for %d drops, want %d", total, drops)
	}
	if limit := 2 + int(elapsed/time.Second); lines > limit {
		t.Errorf("%d log lines in %v, want at most %d", lines, elapsed, limit)
	}
}

// sendmsg sends one datagram with control data on a connected socket,
// waiting for room in the receiver's queue until the write deadline.
// (UnixConn.WriteMsgUnix refuses connected datagram sockets.)
func sendmsg(conn *net.UnixConn, b, oob []byte) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Write(func(fd uintptr) bool {
		serr = syscall.Sendmsg(int(fd), b, oob, nil, 0)
		return serr != syscall.EAGAIN
	})
	if err != nil {
		return err
	}
	return serr
}

// Total returns the sum of all drop counters.
func (d Drops) Total() uint64 {
	var n uint64
	for _, v := range d.All() {
		n += v
	}
	return n
}
