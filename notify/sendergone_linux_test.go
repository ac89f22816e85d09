//go:build linux && !supervise_portable

package notify

import (
	"bytes"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestServeSenderGone is the pid-recycling protection (fault-matrix case
// 36) at the socket: a process sends a heartbeat and a marker and is
// reaped before Serve reads them. The marker, which changes state, is
// dropped (its sender's pidfd says it is gone, so its pid may name
// another process by now); the heartbeat, which only says "alive", is
// taken on its pid alone (see Serve). Kernels without SO_PASSPIDFD
// (before 6.5) have only the pid: the test is skipped there.
func TestServeSenderGone(t *testing.T) {
	t.Parallel()
	probe, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ok := passPIDFD(probe, true)
	unix.Close(probe)
	if !ok {
		t.Skip("no SO_PASSPIDFD on this kernel (Linux 6.5+)")
	}
	var helperPID atomic.Int32
	s := listen(t, Config{Accept: func(pid int32) bool {
		return pid == helperPID.Load() || int(pid) == os.Getpid()
	}})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=beat-mark-exit", "NOTIFY_SOCKET="+s.Path())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil { // reaped: its pid is free for reuse
		t.Fatalf("helper: %v: %s", err, stderr.Bytes())
	}
	helperPID.Store(int32(cmd.Process.Pid))

	handle, ch := collect()
	start(t, s, handle)
	c := dial(t, s)
	if m := next(t, ch); !m.Watchdog || m.PID != int32(cmd.Process.Pid) {
		t.Fatalf("first message = %+v, want the helper's heartbeat", m)
	}
	expectStatus(t, c, ch, "after the gone sender") // the marker was not delivered
	if st := s.Stats(); st.Dropped.Sender != 1 || st.Accepted != 2 {
		t.Errorf("Stats() = %+v, want the marker dropped (sender) and the heartbeat and the status accepted", st)
	}
}
