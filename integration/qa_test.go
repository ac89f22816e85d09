package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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

// timeout(1) signals its child and then its whole process group, so a
// supervise run under `timeout 1h supervise ...` gets SIGTERM twice within
// microseconds. That is one request to stop, not the "second signal" that
// forces the tree down: the agent still gets its grace period.
func TestDuplicateStopSignalIsOneRequest(t *testing.T) {
	e := newEnv(t)
	flushed := filepath.Join(e.dir, "flushed")
	agent := `trap 'sleep 0.3; echo done > "$0"; exit 0' TERM; echo up > "$0.up"; while :; do sleep 0.05; done`
	cmd := exec.Command(superviseBin, "run", "--foreground", "never", "--", "sh", "-c", agent, flushed)
	cmd.Env = append(os.Environ(), e.vars...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a group of its own, as timeout(1) makes
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
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
	waitFor(t, 20*time.Second, "the agent's trap set", func() bool {
		_, err := os.Stat(flushed + ".up")
		return err == nil
	})
	// As timeout(1) does: the child, then the group.
	// (A pause between, or the kernel merges the two pending signals.)
	syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
	time.Sleep(10 * time.Millisecond)
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("supervise did not stop")
	}
	if waitErr != nil {
		t.Errorf("supervise: %v; want exit 0 (a requested stop)", waitErr)
	}
	if _, err := os.Stat(flushed); err != nil {
		t.Errorf("the agent was not given its grace period to flush: %v", err)
	}
}
