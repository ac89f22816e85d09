package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A supervisor must outlive its log reader: `supervise ... 2>&1 | tee log`
// whose tee dies, or a log shipper that restarts, closes the read end of
// supervise's stderr. Go kills a program with SIGPIPE when it writes to a
// broken pipe on fd 1 or 2 unless SIGPIPE is notified, and the agent then
// dies with supervise (parent-death signal).
func TestLogReaderGoneKeepsSupervising(t *testing.T) {
	e := newEnv(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the reader is gone before supervise writes its first line
	cmd := exec.Command(superviseBin, "run", "--backoff-initial", "10ms", "--backoff-max", "50ms",
		"--guard-trip", "0", "--", "sh", "-c", "exit 1")
	cmd.Env = append(os.Environ(), e.vars...)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
	})
	// Several deaths, each logged to the broken pipe, and supervise still runs.
	waitFor(t, 20*time.Second, "three runs journaled", func() bool {
		select {
		case <-done:
			t.Fatalf("supervise ended while its agent was being restarted: %v", waitErr)
		default:
		}
		out, err := exec.Command(superviseBin, "status", "--json", "--state-dir", e.stateDir).Output()
		if err != nil { // not listening yet
			return false
		}
		var st status
		return json.Unmarshal(out, &st) == nil && len(st.Runs) >= 3
	})
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		if waitErr != nil {
			t.Fatalf("supervise after SIGTERM: %v; want exit 0", waitErr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("supervise did not stop after SIGTERM")
	}
}

// `supervise notify --barrier=false` from a shell loop: the notify process
// exits right after sending, and supervise hears only live processes of the
// agent's tree, so without waiting for supervise to read the datagram every
// heartbeat was dropped as a foreign sender and the watchdog killed a
// healthy agent.
func TestNotifyWithoutBarrierIsHeard(t *testing.T) {
	e := newEnv(t)
	loop := `for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do "$0" notify heartbeat --barrier=false || exit 9; sleep 0.2; done`
	p := e.start("run", "--watchdog", "3s", "--restart", "never", "--stop-timeout", "1s", "--", "sh", "-c", loop, superviseBin)
	if code := p.wait(60 * time.Second); code != 0 {
		t.Fatalf("supervise exited %d, want 0 (the agent's heartbeats were not heard?)\n%s", code, p.stderr())
	}
	if st := e.status(); len(st.Runs) != 1 || st.Runs[0].Reason != "exit" {
		t.Fatalf("runs %+v: want one run that exited by itself", st.Runs)
	}
	if strings.Contains(p.stderr(), "reason=sender") {
		t.Fatalf("heartbeats of the agent's own tree were dropped as foreign:\n%s", p.stderr())
	}
}
