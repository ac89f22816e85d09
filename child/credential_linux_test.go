//go:build linux && !supervise_portable

package child

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The parent-death signal survives the switch to the agent's user: the
// kernel clears it on a change of credentials, so it must be set after
// them. A supervisor (the test binary) starts sleep as nobody and is
// killed; the sleeper must die with it.
func TestCredentialKeepsPdeathsig(t *testing.T) {
	rootOrSkip(t)
	nobody, err := LookupUser("nobody")
	if errors.Is(err, ErrUnknownUser) {
		t.Skip("this machine has no user nobody")
	}
	if err != nil {
		t.Fatal(err)
	}
	// exec.Cmd, not a Reaper: this test process must not reap the
	// sleeper, whose death is observed through a pidfd.
	sup := exec.Command(os.Args[0])
	sup.Env = append(os.Environ(), "CHILD_HELPER=nobody-sleeper")
	out, err := sup.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Process.Kill(); sup.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "sleeper" {
		t.Fatalf("the supervisor said %q", line)
	}
	pid, _ := strconv.Atoi(f[1])
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd of the sleeper %d: %v", pid, err)
	}
	// The sleeper is re-parented to init, or to this process if an earlier
	// test made it a subreaper: reap it here then, by its pid alone.
	t.Cleanup(func() {
		unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
		unix.Close(fd)
	})
	status, _ := os.ReadFile("/proc/" + f[1] + "/status")
	want := strings.Repeat("\t"+strconv.FormatUint(uint64(nobody.UID), 10), 4)
	if !strings.Contains(string(status), "\nUid:"+want+"\n") {
		t.Fatalf("the sleeper does not run as nobody (uid %d): %s", nobody.UID, status)
	}
	if err := sup.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	sup.Wait()
	// A pidfd polls readable once its process has exited.
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 10_000)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("the agent running as nobody (pid %d) outlived its supervisor's SIGKILL by 10s", pid)
		}
		return
	}
}
