package notify

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// returnBound is how long Ack may take before a test calls it blocked:
// generous, so that no verdict depends on the machine's speed.
const returnBound = 10 * time.Second

// answerWithin runs answer(f) on its own goroutine and returns its error,
// failing the test if it has not returned within returnBound.
func answerWithin(t *testing.T, answer func(*os.File) error, f *os.File) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- answer(f) }()
	select {
	case err := <-done:
		return err
	case <-time.After(returnBound):
		t.Fatalf("no return within %v: blocked on the agent's fd", returnBound)
		return nil
	}
}

// agentPipe returns a new pipe, both ends blocking (as an agent's pipe from
// pipe(2) is; os.Pipe would make them non-blocking), closed at cleanup.
// The read end is the test's own: it reads with a deadline.
func agentPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	return reader(t, p[0]), file(t, p[1])
}

// file wraps fd, leaving its flags as they are (a blocking fd stays
// blocking), and closes it at cleanup unless the test did.
func file(t *testing.T, fd int) *os.File {
	f := os.NewFile(uintptr(fd), "test-fd")
	t.Cleanup(func() { f.Close() })
	return f
}

// reader wraps the test's own reading end, made non-blocking so that
// reads take a deadline.
func reader(t *testing.T, fd int) *os.File {
	t.Helper()
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	return file(t, fd)
}

// fdOf returns f's fd. Not f.Fd(): that makes a non-blocking description
// blocking, the very change these tests look for.
func fdOf(t *testing.T, f *os.File) int {
	t.Helper()
	raw, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd := -1
	raw.Control(func(u uintptr) { fd = int(u) })
	return fd
}

// dup returns a second fd for f's open file description: what supervise
// holds of an fd the agent sent (SCM_RIGHTS), while f stays the agent's.
func dup(t *testing.T, f *os.File) *os.File {
	t.Helper()
	fd, err := unix.Dup(fdOf(t, f))
	if err != nil {
		t.Fatal(err)
	}
	return file(t, fd)
}

// flags returns the flags of f's open file description.
func flags(t *testing.T, f *os.File) int {
	t.Helper()
	fl, err := unix.FcntlInt(uintptr(fdOf(t, f)), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fl
}

// readToEOF reads r until EOF, failing the test if that takes longer than
// returnBound (someone still holds a write end).
func readToEOF(t *testing.T, r *os.File) []byte {
	t.Helper()
	if err := r.SetReadDeadline(time.Now().Add(returnBound)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read to EOF: %v (got %d bytes)", err, len(b))
	}
	return b
}

// fill writes 'x' to the pipe or FIFO w until its buffer is full and
// returns the bytes written. It sets O_NONBLOCK for the filling and clears
// it after, so that w's description is blocking again when Ack runs.
func fill(t *testing.T, w *os.File) int {
	t.Helper()
	fd := fdOf(t, w)
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	defer unix.SetNonblock(fd, false)
	chunk := bytes.Repeat([]byte{'x'}, 4096)
	n := 0
	for {
		k, err := unix.Write(fd, chunk)
		n += max(k, 0)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return n
		case err != nil:
			t.Fatal(err)
		}
	}
}

// fillSocket sends 'x' on the socket fd until its send buffer is full and
// returns the bytes sent.
func fillSocket(t *testing.T, fd int) int {
	t.Helper()
	chunk := bytes.Repeat([]byte{'x'}, 4096)
	n := 0
	for {
		k, err := unix.SendmsgN(fd, chunk, nil, nil, unix.MSG_DONTWAIT)
		n += max(k, 0)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return n
		case err != nil:
			t.Fatal(err)
		}
	}
}

// blocking fails the test if f's open file description has O_NONBLOCK.
func blocking(t *testing.T, f *os.File) {
	t.Helper()
	if flags(t, f)&unix.O_NONBLOCK != 0 {
		t.Error("the agent's description was made non-blocking")
	}
}

// onlyFiller checks that b is n filler bytes: no answer byte got in.
func onlyFiller(t *testing.T, b []byte, n int) {
	t.Helper()
	if len(b) != n || bytes.Count(b, []byte{'x'}) != n {
		t.Errorf("read %d bytes (%d of them filler, %q at the end), want the %d filler bytes and EOF",
			len(b), bytes.Count(b, []byte{'x'}), b[max(len(b)-4, 0):], n)
	}
}

// TestAnswerPipe: a pipe with room gets exactly the answer byte, then EOF.
func TestAnswerPipe(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer func(*os.File) error
		want   string
	}{
		{"ack", Ack, "1"},
		{"nack", Nack, "0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, w := agentPipe(t)
			if err := answerWithin(t, c.answer, w); err != nil {
				t.Fatal(err)
			}
			if got := readToEOF(t, r); string(got) != c.want {
				t.Errorf("read %q, want %q then EOF", got, c.want)
			}
		})
	}
}

// TestAnswerNonBlockingPipe: an agent's fd that is already non-blocking
// (what os.Pipe hands out) is answered too and stays non-blocking.
func TestAnswerNonBlockingPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	sent := dup(t, w)
	if err := answerWithin(t, Ack, sent); err != nil {
		t.Fatal(err)
	}
	if flags(t, w)&unix.O_NONBLOCK == 0 {
		t.Error("the agent's description was made blocking")
	}
	w.Close()
	if got := readToEOF(t, r); string(got) != "1" {
		t.Errorf("read %q, want \"1\" then EOF", got)
	}
}

// TestAnswerFullPipe: the agent's own pipe, filled: Ack returns at once
// with ErrBarrierWouldBlock, the reader sees the filler and EOF without
// the byte, and the agent's description is still blocking (Ack did not
// set O_NONBLOCK on it).
func TestAnswerFullPipe(t *testing.T) {
	var a Answerer // one for every answer here, as a supervisor keeps one
	defer a.Close()
	for _, answer := range []func(*os.File) error{Ack, Nack, a.Ack, a.Nack} {
		r, w := agentPipe(t)
		n := fill(t, w)
		if err := answerWithin(t, answer, dup(t, w)); !errors.Is(err, ErrBarrierWouldBlock) {
			t.Fatalf("answer to a full pipe: %v, want ErrBarrierWouldBlock", err)
		}
		blocking(t, w)
		w.Close()
		onlyFiller(t, readToEOF(t, r), n)
		// The byte that found no room is not left in the Answerer's own
		// pipe (kept for the next answer): the next barrier reads one.
		r2, w2 := agentPipe(t)
		if err := answerWithin(t, a.Ack, dup(t, w2)); err != nil {
			t.Fatalf("answer after one to a full pipe: %v", err)
		}
		w2.Close()
		if got := readToEOF(t, r2); string(got) != "1" {
			t.Errorf("the answer after one to a full pipe read %q, want \"1\" then EOF", got)
		}
	}
}

// TestAnswerFullFIFO: a FIFO whose reader never reads (one outside the
// agent's tree), filled: the same as a full pipe.
func TestAnswerFullFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	rfd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := file(t, rfd)
	// Opened by hand: os.OpenFile would make a FIFO non-blocking.
	wfd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := file(t, wfd)
	n := fill(t, w)
	if err := answerWithin(t, Ack, dup(t, w)); !errors.Is(err, ErrBarrierWouldBlock) {
		t.Fatalf("Ack to a full FIFO: %v, want ErrBarrierWouldBlock", err)
	}
	blocking(t, w)
	w.Close()
	onlyFiller(t, readToEOF(t, r), n)
}

// TestAnswerReaderGone: a pipe nobody reads any more gets an error, not
// the byte, and does not kill supervise with SIGPIPE.
func TestAnswerReaderGone(t *testing.T) {
	r, w := agentPipe(t)
	r.Close()
	err := answerWithin(t, Ack, w)
	if !errors.Is(err, unix.EPIPE) {
		t.Errorf("Ack with no reader: %v, want EPIPE", err)
	}
	if errors.Is(err, ErrBarrierWouldBlock) || errors.Is(err, ErrBarrierNotPipe) {
		t.Errorf("Ack with no reader: %v: not a would-block or not-a-pipe case", err)
	}
}

// TestAnswerRegularFile: a regular file is never written to.
func TestAnswerRegularFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := answerWithin(t, Ack, f); !errors.Is(err, ErrBarrierNotPipe) {
		t.Fatalf("Ack to a regular file: %v, want ErrBarrierNotPipe", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("the file after Ack: %v, %v; want it empty", fi, err)
	}
	if err := f.Close(); err == nil {
		t.Error("Ack left the file open")
	}
}

// socketpair returns a unix socket pair of type typ, the agent's end and
// the test's own (non-blocking, for deadlines).
func socketpair(t *testing.T, typ int) (agent, peer *os.File) {
	t.Helper()
	sv, err := unix.Socketpair(unix.AF_UNIX, typ, 0)
	if err != nil {
		t.Fatal(err)
	}
	return file(t, sv[0]), reader(t, sv[1])
}

// TestAnswerSocketpair: a unix socket with room gets the byte.
func TestAnswerSocketpair(t *testing.T) {
	for _, typ := range []int{unix.SOCK_STREAM, unix.SOCK_DGRAM} {
		agent, peer := socketpair(t, typ)
		if err := answerWithin(t, Ack, agent); err != nil {
			t.Fatalf("type %d: %v", typ, err)
		}
		if err := peer.SetReadDeadline(time.Now().Add(returnBound)); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 8)
		n, err := peer.Read(b)
		if err != nil || string(b[:n]) != "1" {
			t.Errorf("type %d: read %q, %v; want \"1\"", typ, b[:n], err)
		}
	}
}

// TestAnswerFullSocketpair: a unix stream socket whose send buffer is full
// gets no byte: ErrBarrierWouldBlock at once, and its peer reads the
// filler, then EOF.
func TestAnswerFullSocketpair(t *testing.T) {
	agent, peer := socketpair(t, unix.SOCK_STREAM)
	n := fillSocket(t, fdOf(t, agent))
	if err := answerWithin(t, Ack, dup(t, agent)); !errors.Is(err, ErrBarrierWouldBlock) {
		t.Fatalf("Ack to a full socket: %v, want ErrBarrierWouldBlock", err)
	}
	blocking(t, agent)
	agent.Close()
	onlyFiller(t, readToEOF(t, peer), n)
}

// lingering returns the agent's end of a TCP connection to a listener
// that never accepts: its buffers are full and SO_LINGER is set, so that
// closing the last copy would wait for the peer to read, up to 30 s (past
// returnBound, so a close that waits fails the test, not much longer, so
// a failed test ends).
func lingering(t *testing.T) *os.File {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() }) // resets the connection: a stuck close ends
	addr := ln.Addr().(*net.TCPAddr)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := file(t, fd)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: addr.Port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	fillSocket(t, fd)
	if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 30}); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAnswerLingeringSocket: a TCP socket is not answered, and closing it
// (the last copy: the agent dropped its own) does not wait for its peer.
func TestAnswerLingeringSocket(t *testing.T) {
	if err := answerWithin(t, Ack, lingering(t)); !errors.Is(err, ErrBarrierNotPipe) {
		t.Errorf("Ack to a TCP socket: %v, want ErrBarrierNotPipe", err)
	}
	if err := answerWithin(t, Release, lingering(t)); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// TestRelease: Release closes without the byte; the reader sees EOF.
func TestRelease(t *testing.T) {
	r, w := agentPipe(t)
	if err := answerWithin(t, Release, w); err != nil {
		t.Fatal(err)
	}
	if got := readToEOF(t, r); len(got) != 0 {
		t.Errorf("read %q after Release, want EOF", got)
	}
}
