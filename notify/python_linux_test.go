package notify

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/marker"
)

// TestPythonAgent runs examples/python/agent.py against a real Server:
// its markers arrive in order and each of its barriers returns.
func TestPythonAgent(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not on PATH; skipping the examples/python/agent.py test")
	}
	agent, err := filepath.Abs(filepath.Join("..", "examples", "python", "agent.py"))
	if err != nil {
		t.Fatal(err)
	}
	handle, ch := collect() // closes barrier fds at once
	s := serve(t, Config{}, handle)

	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(py, append([]string{agent}, args...)...)
		cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+s.Path())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("agent.py %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), cmd.Process.Pid
	}

	out, pid := run("script", "py1")
	want := []marker.Message{
		{Session: "py1", Event: marker.EventTurnBegin, Turn: "t1", Prompt: "list the files and summarize them"},
		{Barrier: true},
		{Session: "py1", Event: marker.EventPhase, Phase: marker.PhaseTool, Tool: "bash"},
		{Barrier: true},
		{Session: "py1", Event: marker.EventTurnEnd, Turn: "t1", Outcome: marker.OutcomeCompleted},
		{Barrier: true},
	}
	for i, w := range want {
		m := next(t, ch)
		if Credentials && m.PID != int32(pid) {
			t.Errorf("message %d from pid %d, want %d", i, m.PID, pid)
		}
		m.PID, m.UID = 0, 0
		if m != w {
			t.Errorf("message %d = %+v, want %+v", i, m, w)
		}
	}
	for _, step := range []string{"turn-begin", "phase", "turn-end"} {
		if !strings.Contains(out, "barrier ok: "+step) {
			t.Errorf("agent output lacks %q:\n%s", "barrier ok: "+step, out)
		}
	}

	// Single commands, and the client-side flattening of a prompt.
	run("turn-begin", "py2", "t9", "two\nlines")
	run("heartbeat", "py2")
	run("waiting", "py2", "t9")
	for _, w := range []marker.Message{
		{Session: "py2", Event: marker.EventTurnBegin, Turn: "t9", Prompt: "two lines"},
		{Session: "py2", Event: marker.EventHeartbeat, Watchdog: true},
		{Session: "py2", Event: marker.EventWaiting, Turn: "t9", Wait: marker.WaitInput},
	} {
		m := next(t, ch)
		m.PID, m.UID = 0, 0
		if m != w {
			t.Errorf("got %+v, want %+v", m, w)
		}
	}
	if d := s.Stats().Dropped.Total(); d != 0 {
		t.Errorf("%d datagrams dropped", d)
	}
}
