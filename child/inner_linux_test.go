//go:build linux && !supervise_portable

package child

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// wrapper starts a shell that runs an inner process, prints its pid, waits
// for it and then exits 1 whatever became of it: what Gemini CLI's outer
// process does with its inner one. It returns the process, the inner pid,
// and the write end of the inner's stdin.
func wrapper(t *testing.T, r *Reaper) (*Process, int, *os.File) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inW.Close(); outR.Close() })
	// The shell gives an asynchronous list /dev/null as its stdin unless
	// the list redirects it (POSIX, without job control): cat reads the
	// pipe through fd 3, so it lives until the test closes the pipe. With
	// a bare `cat &` it read /dev/null and exited at once, and only a
	// WatchInner quicker than that exit found it (a loaded CI machine
	// was not).
	p, err := r.Start(Spec{Args: []string{"sh", "-c", "exec 3<&0; cat <&3 >/dev/null 3<&- & echo $!; exec 3<&-; wait $!; exit 1"}, Stdin: inR, Stdout: outW, Stderr: outW})
	inR.Close()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(); <-p.Done() })
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(line[:len(line)-1])
	if err != nil {
		t.Fatal(err)
	}
	// The shell may not have forked cat yet when the line is read (echo
	// comes after &, so it has): watch until the pidfd is held.
	deadline := time.Now().Add(time.Minute) // a safety net, not a speed check
	for time.Now().Before(deadline) {
		p.WatchInner()
		p.r.mu.Lock()
		_, held := p.inner[pid]
		p.r.mu.Unlock()
		if held {
			return p, pid, inW
		}
		runtime.Gosched()
	}
	children, _ := os.ReadFile("/proc/" + strconv.Itoa(p.PID()) + "/task/" + strconv.Itoa(p.PID()) + "/children")
	t.Fatalf("no pidfd held on the inner process %d (the shell's children: %q)", pid, children)
	return nil, 0, nil
}

// A wrapper whose inner process was killed by SIGKILL exits 1; the exit
// says the inner was killed. One whose inner ended by itself says nothing.
func TestInnerSignal(t *testing.T) {
	if !InnerDeathsSeen() {
		t.Skip("this kernel has no PIDFD_GET_INFO (Linux 6.15): an inner death is not seen, and nothing is claimed")
	}
	r := newReaper(t)

	p, inner, _ := wrapper(t, r)
	if err := syscall.Kill(inner, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if e := wait(t, p); e.Code != 1 || e.Signal != 0 || e.InnerSignal != syscall.SIGKILL {
		t.Errorf("inner killed: %+v, want exit 1 with InnerSignal SIGKILL", e)
	}

	p, _, in := wrapper(t, r)
	in.Close() // cat reads EOF and exits 0
	if e := wait(t, p); e.Code != 1 || e.InnerSignal != 0 {
		t.Errorf("inner ended by itself: %+v, want exit 1 with no InnerSignal", e)
	}
}
