package integration

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

// Issue 44: the real CLIs under supervise with nothing configured: no
// hooks in any settings file, no --resume-exec, no --api-proxy. The
// profiles (package profile) set each run up, and the user's own
// settings files are the same, byte for byte, after the scenario.

// zeroClaude is Claude Code as a user runs it who has never heard of
// supervise: settings of their own without hooks, the project's
// permissions allowing the shell and the folder trusted (as after a first
// interactive run; print mode cannot ask).
func zeroClaude() realCLI {
	c := claudeCodeCLI()
	c.install, c.zero = nil, true
	setup := c.setup
	c.setup = func(r *realEnv) {
		setup(r)
		writeFile(r.t, filepath.Join(r.home, ".claude", "settings.json"), `{"cleanupPeriodDays": 30}`+"\n")
	}
	return c
}

// zeroCodex is Codex with an API key and its built-in provider, no hooks
// and no hooks feature: its profile sees it through the proxy.
func zeroCodex() realCLI {
	c := codexDefault()
	c.task, c.template, c.zero, c.proxyDoc, c.noPrompt = []string{"codex", "exec"}, "", true, false, true
	setup := c.setup
	c.setup = func(r *realEnv) {
		setup(r)
		// A model the mock answers as the agent loop (the default one
		// sends Responses Lite requests: TestRealCodexDefaultModelProxy).
		path := filepath.Join(r.home, ".codex", "config.toml")
		b, err := os.ReadFile(path)
		if err != nil {
			r.t.Fatal(err)
		}
		writeFile(r.t, path, "model = \"gpt-mock\"\n"+string(b))
	}
	return c
}

// zeroGemini is Gemini CLI with the user's settings (an API key, the
// shell allowed, no hooks) in a trusted workspace.
func zeroGemini() realCLI {
	c := geminiCLI()
	c.zero = true
	setup := c.setup
	c.setup = func(r *realEnv) {
		setup(r)
		path := filepath.Join(r.home, ".gemini", "settings.json")
		var m map[string]any
		b, _ := os.ReadFile(path)
		if err := json.Unmarshal(b, &m); err != nil {
			r.t.Fatal(err)
		}
		delete(m, "hooks")
		out, _ := json.MarshalIndent(m, "", "  ")
		writeFile(r.t, path, string(out))
	}
	c.stateDir = secureStateDir
	return c
}

// secureStateDir is a state dir under the real home (a path no other
// user may write, unlike /tmp), removed at the test's end.
func secureStateDir(t *testing.T) string {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory for a state dir Gemini CLI trusts: ", err)
	}
	base := filepath.Join(home, ".cache", "supervise-test")
	if err := os.MkdirAll(base, 0o700); err != nil {
		t.Fatal(err)
	}
	if insecure(base) {
		t.Skipf("%s is under a directory others may write: Gemini CLI would skip the settings there", base)
	}
	d, err := os.MkdirTemp(base, "state")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return filepath.Join(d, "state")
}

func insecure(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o022 != 0 {
			return true
		}
		if d == filepath.Dir(d) {
			return false
		}
	}
}

// userConfig is every settings file of the user's the CLIs read (not the
// state the CLIs write themselves: transcripts, ~/.claude.json's
// counters), by path, as a hash of its bytes.
func (r *realEnv) userConfig() map[string]string {
	out := map[string]string{}
	for _, root := range []string{filepath.Join(r.home, ".claude"), filepath.Join(r.home, ".codex"), filepath.Join(r.home, ".gemini"),
		filepath.Join(r.proj, ".claude"), filepath.Join(r.proj, ".codex"), filepath.Join(r.proj, ".gemini")} {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			name := d.Name()
			if strings.HasSuffix(name, ".json") && strings.Contains(name, "settings") || name == "config.toml" || name == "hooks.json" {
				b, _ := os.ReadFile(path)
				out[path] = fmt.Sprintf("%x", sha256.Sum256(b))
			}
			return nil
		})
	}
	return out
}

// zero runs a scenario with nothing configured and checks that the user's
// settings files are as they were and supervise's profile said what it set up.
func zero(t *testing.T, cli realCLI, scenario func(*realEnv)) {
	r := newRealEnv(t, cli)
	before := r.userConfig()
	if len(before) == 0 {
		t.Fatal("the scenario's user has no settings file to compare")
	}
	scenario(r)
	after := r.userConfig()
	for path, sum := range before {
		if after[path] != sum {
			t.Errorf("%s changed under supervise (sha256 %s, was %s)", path, after[path], sum)
		}
	}
	for path := range after {
		if _, ok := before[path]; !ok {
			t.Errorf("%s appeared under supervise: a settings file of the user's was written", path)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(r.home, ".codex", "supervise-*")); len(left) > 0 {
		t.Errorf("supervise left %v in Codex's home after it ended", left)
	}
	t.Logf("%s with nothing configured: %s", cli.bin, r.summary())
}

func TestZeroConfigClaudeTaskKill(t *testing.T) {
	t.Parallel()
	zero(t, zeroClaude(), (*realEnv).killOnce)
}

func TestZeroConfigClaudeTaskKillTwice(t *testing.T) {
	t.Parallel()
	zero(t, zeroClaude(), (*realEnv).killTwice)
}

func TestZeroConfigCodexTaskKill(t *testing.T) {
	t.Parallel()
	zero(t, zeroCodex(), (*realEnv).killOnce)
}

func TestZeroConfigGeminiTaskKill(t *testing.T) {
	t.Parallel()
	zero(t, zeroGemini(), (*realEnv).killOnce)
}

// Interactive, in a terminal (tmux), with nothing configured: `supervise
// -- claude`, a Bash tool running, kill -9: the same conversation goes on
// in the same terminal, /exit ends supervise with 0.
func TestZeroConfigClaudeInteractive(t *testing.T) {
	t.Parallel()
	zero(t, zeroClaude(), func(r *realEnv) {
		claudeOnboarded(r)
		interactiveKill(t, r, "", "claude", claudeReady, "Bash", "/exit")
	})
}

// The same for `supervise -- gemini`.
func TestZeroConfigGeminiInteractive(t *testing.T) {
	t.Parallel()
	zero(t, zeroGemini(), func(r *realEnv) {
		interactiveKill(t, r, "", "gemini", "Type your message", "run_shell_command", "/quit")
	})
}

// The same for `supervise -- codex` (its TUI), seen through the proxy: a
// person who let Codex run commands without asking.
func TestZeroConfigCodexInteractive(t *testing.T) {
	t.Parallel()
	cli := zeroCodex()
	setup := cli.setup
	cli.setup = func(r *realEnv) {
		setup(r)
		p := filepath.Join(r.home, ".codex", "config.toml")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, "approval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n"+string(b))
		// Logged in with the API key, as `codex login --with-api-key`
		// leaves it (the TUI does not take the key from the environment).
		login := exec.Command(filepath.Join(realCLIDir(), "codex"), "login", "--with-api-key")
		login.Env = append(os.Environ(), "HOME="+r.home, "CODEX_HOME=")
		login.Stdin = strings.NewReader("sk-mock\n")
		if out, err := login.CombinedOutput(); err != nil {
			t.Fatalf("codex login: %v\n%s", err, out)
		}
	}
	zero(t, cli, func(r *realEnv) {
		interactiveKill(t, r, "", "codex", "? for shortcuts", "exec_command", "/quit")
	})
}

// Issue 44 item 5: `supervise -- claude`, killed in the first turn of a
// new conversation before Claude saved it (its transcript is gone, as
// when the kill comes before Claude writes it): the resume cannot work, so
// supervise says so and starts Claude again as a new conversation in the
// same terminal, never parks, never suggests `claude -r ID`; /exit ends 0.
func TestZeroConfigClaudeLostFirstTurn(t *testing.T) {
	t.Parallel()
	zero(t, zeroClaude(), func(r *realEnv) {
		claudeOnboarded(r)
		r.answer(func(q mockapi.Request) mockapi.Reply {
			switch {
			case !q.Agent:
				return mockapi.Reply{Kind: mockapi.Text, Text: "Title"}
			case !q.ToolResult:
				return mockapi.Reply{Kind: mockapi.Tool, Command: "sleep 600"}
			}
			return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
		})
		tt := newTTY(r)
		w := tt.start("--", "claude")
		tt.waitScreen(w, "claude's prompt", claudeReady)
		tt.typeLine(w, realPrompt)
		session, pid := r.waitSession("in_turn", "tool")
		m, _ := filepath.Glob(filepath.Join(r.home, ".claude", "projects", "*", session+".jsonl"))
		for _, p := range m {
			os.Remove(p)
		}
		syscall.Kill(pid, syscall.SIGKILL)
		var st status
		waitFor(t, 120*time.Second, "the session closed as lost and claude started again", func() bool {
			var ok bool
			st, ok = r.tryStatus()
			s, found := st.session(session)
			return ok && found && s.State == "closed" && st.Child.PID > 0 && st.Child.PID != pid && len(st.Runs) >= 3
		})
		if s, _ := st.session(session); !strings.Contains(s.Reason, "lost") {
			t.Errorf("session %s's reason %q does not say its conversation was lost", session, s.Reason)
		}
		tt.waitScreen(w, "claude's prompt again", claudeReady)
		raw := tt.written()
		if strings.Contains(raw, "-r "+session) || strings.Contains(raw, "resume "+session) {
			t.Errorf("the terminal suggests a resume of %s, which cannot work:\n%s", session, tt.screen(w))
		}
		if !strings.Contains(raw, "lost") {
			t.Errorf("nothing on the terminal says the conversation was lost:\n%s", tt.screen(w))
		}
		tt.typeLine(w, "/exit")
		if code := tt.exitCode("supervise to exit after /exit"); code != "0" {
			t.Errorf("supervise exit %s after /exit, want 0\nscreen:\n%s\nlog:\n%s", code, tt.screen(w), readLog(r))
		}
	})
}

// Issue 44 item 6: Gemini CLI in a project with an earlier session, its
// task killed while the model thinks (no tool ran) before it saved the
// conversation (the chat file is gone, as when the kill comes first): the
// resume cannot work (Gemini 0.61 answers "Invalid session identifier",
// exit 42), so the task starts again once as a new session and ends 0;
// nothing suggests `gemini -r ID`.
func TestZeroConfigGeminiLostRerun(t *testing.T) {
	t.Parallel()
	zero(t, zeroGemini(), func(r *realEnv) {
		r.answer(func(q mockapi.Request) mockapi.Reply { return mockapi.Reply{Kind: mockapi.Text, Text: "Done."} })
		if code := r.wait(r.run(), 150*time.Second); code != 0 {
			t.Fatalf("the earlier task: exit %d", code)
		}
		var mu sync.Mutex
		stalled := false
		r.answer(func(q mockapi.Request) mockapi.Reply {
			mu.Lock()
			defer mu.Unlock()
			if q.Agent && !stalled {
				stalled = true
				return mockapi.Reply{Kind: mockapi.Stall}
			}
			return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
		})
		sv := r.run()
		var session string
		var pid int
		waitFor(t, 120*time.Second, "the second task's session in its turn", func() bool {
			st, ok := r.tryStatus()
			for _, s := range st.Sessions {
				if ok && s.State == "in_turn" && st.Child.PID > 0 {
					session, pid = s.ID, st.Child.PID
					return true
				}
			}
			return false
		})
		m, _ := filepath.Glob(filepath.Join(r.home, ".gemini", "tmp", "*", "chats", "session-*-"+session[:8]+".json*"))
		for _, p := range m {
			os.Remove(p)
		}
		syscall.Kill(pid, syscall.SIGKILL)
		if code := r.wait(sv, 150*time.Second); code != 0 {
			t.Fatalf("supervise exit %d after the lost conversation, want 0 (the task started again once)\n%s", code, sv.stderr())
		}
		for _, l := range strings.Split(sv.stderr(), "\n") {
			if strings.Contains(l, "session identifier") || strings.Contains(l, "never saved") || strings.Contains(l, "previous sessions") {
				t.Logf("supervise: %.400s", l)
			}
		}
		if !strings.Contains(sv.stderr(), "lost") {
			t.Errorf("supervise's stderr does not say the conversation was lost:\n%s", sv.stderr())
		}
		if strings.Contains(sv.stderr(), "gemini -r "+session) {
			t.Errorf("supervise suggests a resume of %s, which cannot work", session)
		}
		s, ok := r.statusAllJSON().session(session)
		if !ok || s.State == "parked" {
			t.Errorf("the lost session %+v (found %v): want it not parked", s, ok)
		}
	})
}
