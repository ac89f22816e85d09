package tty

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, s, err := OpenPTY()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// A terminal whose output is stopped (tcflow TCOOFF, as ^S does) holds
// every write on it; through a Writer each returns at once, the queue
// reaches the terminal in order once output flows again, and the writes
// the full queue dropped are counted in one line then.
func TestWriterStoppedOutput(t *testing.T) {
	m, s := openPTY(t)
	if err := unix.IoctlSetInt(int(s.Fd()), unix.TCXONC, unix.TCOOFF); err != nil {
		t.Fatal(err)
	}
	w := NewWriter(s)
	// More than the queue holds (the drain holds one more queue's worth
	// in its blocked write), so some are dropped, all returning at once:
	// this goroutine would block forever on a direct write.
	line := strings.Repeat("x", 1000) + "\r\n"
	for i := 0; w.Dropped() < 10; i++ {
		if i > 3*QueueMax/len(line) {
			t.Fatalf("%d writes, %d dropped: the queue is not bounded", i, w.Dropped())
		}
		if k, err := io.WriteString(w, line); k != len(line) || err != nil {
			t.Fatalf("write %d: %d, %v", i, k, err)
		}
	}
	io.WriteString(w, "last\r\n")
	// Output flows again: everything queued arrives, then the count.
	if err := unix.IoctlSetInt(int(s.Fd()), unix.TCXONC, unix.TCOON); err != nil {
		t.Fatal(err)
	}
	got := readUntil(t, m, "the terminal's output was stopped")
	if !strings.Contains(got, "last\r") || strings.Index(got, "last\r") > strings.Index(got, "lines were not shown") {
		t.Errorf("the queue did not reach the terminal in order before the count:\n%q", lastBytes(got, 300))
	}
	if !strings.Contains(got, "supervise: ") || !strings.Contains(got, " lines were not shown") {
		t.Errorf("no count of the dropped lines: %q", lastBytes(got, 300))
	}
	if !w.Close(10 * time.Second) {
		t.Error("Close: the queue did not drain with output flowing")
	}
}

// Close gives up after its bound when output stays stopped.
func TestWriterCloseStopped(t *testing.T) {
	_, s := openPTY(t)
	unix.IoctlSetInt(int(s.Fd()), unix.TCXONC, unix.TCOOFF)
	w := NewWriter(s)
	io.WriteString(w, "held\r\n")
	if w.Close(50 * time.Millisecond) {
		t.Error("Close reported a drained queue on a stopped terminal")
	}
	unix.IoctlSetInt(int(s.Fd()), unix.TCXONC, unix.TCOON) // let the drain end
}

// Restore brings back the settings saved at the start after a CLI left
// the terminal raw, and output flowing after it stopped it.
func TestRestore(t *testing.T) {
	m, s := openPTY(t)
	fd := int(s.Fd())
	st, err := Save(fd)
	if err != nil {
		t.Fatal(err)
	}
	want := st.Termios()
	// What a CLI in raw mode sets, and an odd speed and control char.
	raw := want
	raw.Iflag &^= unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 0, 3
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetInt(fd, unix.TCXONC, unix.TCOOFF); err != nil {
		t.Fatal(err)
	}
	if err := st.Restore(); err != nil {
		t.Fatal(err)
	}
	got, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if got.Iflag != want.Iflag || got.Oflag != want.Oflag || got.Lflag != want.Lflag || got.Cflag != want.Cflag || got.Cc != want.Cc {
		t.Errorf("termios after Restore = %+v, want %+v", *got, want)
	}
	// Output flows: a plain write reaches the master (it would block forever
	// on a stopped terminal).
	done := make(chan error, 1)
	go func() { _, err := s.WriteString("flowing\n"); done <- err }()
	readUntil(t, m, "flowing")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestClear(t *testing.T) {
	c := Clear(3)
	if !strings.HasSuffix(c, ClearSeq) || strings.Count(c, "\r\n") != 3 {
		t.Errorf("Clear(3) = %q", c)
	}
}

// readUntil reads the master until it has read want, or fails after a
// generous bound.
func readUntil(t *testing.T, m *os.File, want string) string {
	t.Helper()
	var got bytes.Buffer
	m.SetReadDeadline(time.Now().Add(60 * time.Second)) // a read blocked for good fails instead of hanging
	defer m.SetReadDeadline(time.Time{})
	buf := make([]byte, 64<<10)
	for !strings.Contains(got.String(), want) {
		n, err := m.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("reading the terminal for %q: %v; read %q", want, err, lastBytes(got.String(), 300))
		}
	}
	return got.String()
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Flush returns once the queue reached the terminal, and gives up after
// its bound while output is stopped.
func TestWriterFlush(t *testing.T) {
	m, s := openPTY(t)
	w := NewWriter(s)
	go io.Copy(io.Discard, m)
	io.WriteString(w, "one\r\n")
	if !w.Flush(30 * time.Second) {
		t.Error("Flush: the queue did not reach a terminal whose output flows")
	}
	unix.IoctlSetInt(int(s.Fd()), unix.TCXONC, unix.TCOOFF)
	io.WriteString(w, "two\r\n")
	if w.Flush(50 * time.Millisecond) {
		t.Error("Flush reported the queue written on a stopped terminal")
	}
	unix.IoctlSetInt(int(s.Fd()), unix.TCXONC, unix.TCOON)
	if !w.Flush(30 * time.Second) {
		t.Error("Flush: the queue did not reach the terminal once output flowed again")
	}
	w.Close(time.Second)
}
