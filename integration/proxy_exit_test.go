package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

// exitAtFinalAnswer is an agent that makes one model call through the API
// proxy in session exit-s1, reads the stream until the answer's final
// event (message_stop) and exits 0 at once, as a real CLI does: it does
// not wait for the stream's own end.
const exitAtFinalAnswer = `import json, os, urllib.request
req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", method="POST",
    data=json.dumps({"model": "m", "max_tokens": 10, "stream": True,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "go"}]}).encode(),
    headers={"content-type": "application/json", "x-api-key": "test",
        "anthropic-version": "2023-06-01", "X-Claude-Code-Session-Id": "exit-s1"})
with urllib.request.urlopen(req, timeout=60) as resp:
    for line in resp:
        if b"message_stop" in line:
            print("final answer read", flush=True)
            os._exit(0)
os._exit(3)
`

// An agent that exits 0 as soon as it has read its turn's final answer,
// while the upstream has not yet ended the stream, finished its turn: the
// death is a clean end, not a mid-turn crash, and supervise exits 0 with
// the session idle after one run. Before the proxy waited for its handlers
// at the death, the turn's end was lost whenever the stream's end came
// after the agent's exit, so the task was resumed (and, the second time,
// parked with exit 5): CI saw it once with the real Codex CLI.
func TestProxyTurnEndOfAnAgentThatExitsAtItsFinalAnswer(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found: the agent is a Python program")
	}
	api := mockapi.Anthropic(func(q mockapi.Request) mockapi.Reply {
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done.", HoldEnd: true}
	})
	t.Cleanup(api.Close)
	e := newEnv(t)
	prog := filepath.Join(e.dir, "agent.py")
	if err := os.WriteFile(prog, []byte(exitAtFinalAnswer), 0o600); err != nil {
		t.Fatal(err)
	}
	e.set("ANTHROPIC_BASE_URL="+api.URL(), "HTTP_PROXY=", "HTTPS_PROXY=", "http_proxy=", "https_proxy=",
		"ALL_PROXY=", "NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1")
	sv := e.start("run", "--api-proxy", "on", "--restart", "on-failure", "--backoff-initial", "10ms",
		"--", "python3", prog)
	if code := sv.wait(120 * time.Second); code != 0 {
		t.Fatalf("supervise exited %d, want 0 (the agent finished its turn)\n%s", code, sv.stderr())
	}
	st := e.status()
	if len(st.Runs) != 1 || st.Runs[0].Dirty || st.Runs[0].ExitCode != 0 {
		t.Errorf("runs: %+v, want one clean run", st.Runs)
	}
	found := false
	for _, s := range st.Sessions {
		if s.ID == "exit-s1" {
			found = true
			if s.State != "idle" || s.CrashCount != 0 {
				t.Errorf("session exit-s1: %s (crashes %d, %q), want idle", s.State, s.CrashCount, s.Reason)
			}
		}
	}
	if !found {
		t.Errorf("no session exit-s1 in status: %+v", st.Sessions)
	}
}
