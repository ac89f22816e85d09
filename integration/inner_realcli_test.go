package integration

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/integration/mockapi"
)

// innerOf is the one direct child of pid (Gemini CLI's outer node waits
// for an inner one it spawned), 0 while there is none.
func innerOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// Gemini CLI re-spawns itself and turns a SIGKILL of its inner process
// into an exit 1 of its own, with no words. Two such kills mid-turn are two
// kills from outside: each run's reason is signal (supervise saw the inner
// death through a pidfd), and the park's advice does not blame the agent's
// own error. Where the kernel cannot say (before Linux 6.15's
// PIDFD_GET_INFO) the runs read as exits, and the test says so and skips.
func TestRealGeminiInnerKilled(t *testing.T) {
	t.Parallel()
	cli := geminiCLI()
	env := cli.env
	cli.env = func(url string) []string {
		// As a person runs it: Gemini CLI re-spawns itself (the other
		// tests turn that off, so that a kill reaches the CLI itself).
		var out []string
		for _, kv := range env(url) {
			if !strings.HasPrefix(kv, "GEMINI_CLI_NO_RELAUNCH=") {
				out = append(out, kv)
			}
		}
		return out
	}
	r := newRealEnv(t, cli)
	r.answer(func(q mockapi.Request) mockapi.Reply {
		switch {
		case !q.Agent:
			return mockapi.Reply{Kind: mockapi.Text, Text: "Title"}
		case continuation(q):
			return mockapi.Reply{Kind: mockapi.Stall}
		case !q.ToolResult:
			return mockapi.Reply{Kind: mockapi.Tool, Command: "sleep 60"}
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
	})
	sv := r.run()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("supervise's stderr:\n%s", sv.stderr())
		}
	})
	session, outer := r.waitSession("in_turn", "tool")
	r.waitTranscript(session)
	killInner := func(outer int) {
		t.Helper()
		var inner int
		waitFor(t, 60*time.Second, "gemini's inner process", func() bool { inner = innerOf(outer); return inner > 0 })
		// supervise takes a pidfd on it at its once-a-second tick: wait
		// until its fd table holds one.
		sv := r.status().Supervisor.PID
		waitFor(t, 60*time.Second, "supervise's pidfd on gemini's inner process", func() bool { return holdsPidfd(sv, inner) })
		if err := syscall.Kill(inner, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	killInner(outer)
	r.waitRequest("the continuation in an API request", continuation)
	var second int
	waitFor(t, 120*time.Second, "the resumed run in its turn", func() bool {
		st, ok := r.tryStatus()
		s, found := st.session(session)
		second = st.Child.PID
		return ok && found && s.State == "in_turn" && second > 0 && second != outer
	})
	killInner(second)
	if code := r.wait(sv, 150*time.Second); code != 5 {
		t.Fatalf("supervise exit code %d after the second kill, want 5 (a session is parked)", code)
	}
	st := r.statusAllJSON()
	var reasons []string
	for _, run := range st.Runs {
		reasons = append(reasons, run.Reason+"/"+strconv.Itoa(run.ExitCode))
	}
	if len(st.Runs) < 2 || st.Runs[0].Reason != "signal" || st.Runs[1].Reason != "signal" {
		if !child.InnerDeathsSeen() {
			t.Skipf("runs %v: this kernel has no PIDFD_GET_INFO, so a wrapper's inner death is not seen", reasons)
		}
		t.Fatalf("runs %v, want both ended by signal (the inner process was killed)", reasons)
	}
	s, _ := st.session(session)
	if s.State != "parked" || strings.Contains(s.Reason, "its own error") {
		t.Errorf("session %+v: want parked, not blamed on the agent's own error", s)
	}
	t.Logf("gemini inner killed twice: runs %v, session reason %q", reasons, s.Reason)
}

// holdsPidfd reports whether process pid holds a pidfd on target (its
// fdinfo says "Pid:\ttarget").
func holdsPidfd(pid, target int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err != nil || !strings.Contains(l, "pidfd") {
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/fdinfo/" + e.Name())
		if err == nil && strings.Contains(string(b), "\nPid:\t"+strconv.Itoa(target)+"\n") {
			return true
		}
	}
	return false
}
