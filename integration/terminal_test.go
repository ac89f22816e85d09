package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tmuxSession runs supervise -- testagent in a real terminal (a private
// tmux server), so that Ctrl-C is the terminal's, delivered by the kernel
// to the foreground process group.
type tmuxSession struct {
	t        *testing.T
	e        *env
	server   string
	exitFile string
}

func newTmux(t *testing.T, e *env, script string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed: the real-terminal Ctrl-C tests need it")
	}
	ts := &tmuxSession{t: t, e: e, server: fmt.Sprintf("sv%d", time.Now().UnixNano()), exitFile: filepath.Join(e.dir, "exit")}
	wrapper := filepath.Join(e.dir, "run.sh")
	var b strings.Builder
	// The wrapper shell is in the terminal's foreground group too: a no-op
	// trap keeps it alive through Ctrl-C (a trap, not an ignore, so the
	// programs it starts see SIGINT's default as usual).
	b.WriteString("#!/bin/sh\ntrap 'true' INT\n")
	for _, kv := range append(append([]string{}, e.vars...), "TESTAGENT_SCRIPT="+script) {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
	}
	fmt.Fprintf(&b, "%s run --stop-timeout 2s -- %s\necho $? > %s\nsleep 1000\n", superviseBin, agentBin, ts.exitFile)
	os.WriteFile(wrapper, []byte(b.String()), 0o755)
	ts.tmux("-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", "200", "-y", "50", wrapper)
	t.Cleanup(func() { ts.tmux("kill-server") })
	return ts
}

func (ts *tmuxSession) tmux(args ...string) {
	ts.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", ts.server}, args...)...).CombinedOutput()
	if err != nil && args[0] != "kill-server" {
		ts.t.Fatalf("tmux %v: %v %s", args, err, out)
	}
}

func (ts *tmuxSession) ctrlC() { ts.tmux("send-keys", "-t", "main", "C-c") }

// exitCode waits for supervise to exit inside the terminal.
func (ts *tmuxSession) exitCode() string {
	ts.t.Helper()
	var code string
	waitFor(ts.t, 20*time.Second, "supervise to exit in the terminal", func() bool {
		b, err := os.ReadFile(ts.exitFile)
		code = strings.TrimSpace(string(b))
		return err == nil && code != ""
	})
	return code
}

// One Ctrl-C reaches an agent that handles it exactly once (no duplicate
// from supervise forwarding it), and supervise keeps supervising it; two
// within two seconds force-quit, leaving no process behind.
func TestTerminalCtrlC(t *testing.T) {
	e := newEnv(t)
	ts := newTmux(t, e, "int-log; turn-begin s1 t1; barrier; hang")
	e.waitEvent(1, "barrier-ok")
	ts.ctrlC()
	e.waitEvent(1, "got-int")
	// A Ctrl-C counts as the first of a pair again only once the
	// force-quit window (2s) has passed: a rule about time, so the test
	// waits it out. A duplicate SIGINT would have arrived by then as well.
	time.Sleep(2200 * time.Millisecond)
	if n := e.count("got-int"); n != 1 {
		t.Errorf("the agent got %d SIGINTs for one Ctrl-C, want exactly 1", n)
	}
	if n := e.count("start"); n != 1 {
		t.Errorf("the agent was restarted after a Ctrl-C it handled (%d starts)", n)
	}
	if st := e.status(); !st.Supervisor.Running || st.Child.Run != 1 {
		t.Errorf("supervise or the agent did not carry on: %+v", st.Child)
	}
	ts.ctrlC()
	waitFor(t, 10*time.Second, "the agent to get the first Ctrl-C of the pair", func() bool { return e.count("got-int") == 2 })
	ts.ctrlC()
	if code := ts.exitCode(); code != "130" {
		t.Errorf("double Ctrl-C: supervise exit %s, want 130 (force-quit)", code)
	}
	if left := e.tagged(); len(left) > 0 {
		// the wrapper's sleep and shell carry the id too; only the agent
		// tree must be gone
		for _, pid := range left {
			if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(cmd), "testagent") {
				t.Errorf("agent process %d survived the force-quit", pid)
			}
		}
	}
}

// An agent that exits on Ctrl-C was stopped by the user: supervise exits
// 0, records a clean stop, and the interrupted turn is stopped, not resumed.
func TestTerminalCtrlCStopsAgent(t *testing.T) {
	e := newEnv(t)
	ts := newTmux(t, e, "turn-begin s1 t1; barrier; hang")
	e.waitEvent(1, "barrier-ok")
	ts.ctrlC()
	if code := ts.exitCode(); code != "0" {
		t.Errorf("supervise exit %s after the agent exited on Ctrl-C, want 0", code)
	}
	st := e.status()
	if r := st.run(t, 1); r.Dirty || r.Reason != "stopped" || r.Signal != 2 {
		t.Errorf("run 1 = %+v, want a clean stop by SIGINT", r)
	}
	if s, _ := st.session("s1"); s.State != "stopped" {
		t.Errorf("s1 = %+v, want stopped (the user's own stop is never resumed)", s)
	}
}
