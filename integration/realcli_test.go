package integration

import (
	"encoding/json"
	"fmt"
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

// The real agent CLIs, pinned in realcli/package-lock.json and installed by
// realcli/install.sh, run under the real supervise in task mode with the
// shipped example configuration unchanged, each against a mock of its
// provider's streaming API on 127.0.0.1 (package mockapi). Nothing else is
// contacted: the CLIs' non-essential traffic and telemetry are switched off
// and every base URL points at the mock.

// realPrompt is the task every scenario gives the CLI.
const realPrompt = "rename the parser module"

// realCLI is one agent CLI and how a user sets it up, as its example says.
type realCLI struct {
	bin      string            // program in realcli/node_modules/.bin
	version  string            // the version pinned and verified
	example  string            // examples/ directory
	install  map[string]string // example file -> path under $HOME
	task     []string          // the task command before the prompt
	template string            // the --resume-exec template the README gives
	mock     func(func(mockapi.Request) mockapi.Reply) *mockapi.Server
	env      func(url string) []string // points the CLI at the mock, nothing else
	setup    func(r *realEnv)          // project setup the example README asks for
}

// realEnv is one scenario: a private $HOME with the example installed, a
// project directory supervise runs in, and the mock API.
type realEnv struct {
	*env
	cli  realCLI
	home string
	proj string
	api  *mockapi.Server

	mu     sync.Mutex
	script func(mockapi.Request) mockapi.Reply
}

var realCLIDir = sync.OnceValue(func() string {
	d, _ := filepath.Abs(filepath.Join("realcli", "node_modules", ".bin"))
	return d
})

func newRealEnv(t *testing.T, cli realCLI) *realEnv {
	t.Helper()
	bin := filepath.Join(realCLIDir(), cli.bin)
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("%s is not installed (%v): run integration/realcli/install.sh, which needs npm and the npm registry", cli.bin, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg + "; under CI a missing CLI is a failure")
		}
		t.Skip(msg)
	}
	e := newEnv(t)
	r := &realEnv{env: e, cli: cli, home: filepath.Join(e.dir, "home"), proj: filepath.Join(e.dir, "project")}
	for _, d := range []string{r.home, r.proj} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	r.api = cli.mock(func(req mockapi.Request) mockapi.Reply {
		r.mu.Lock()
		s := r.script
		r.mu.Unlock()
		return s(req)
	})
	t.Cleanup(func() {
		r.api.Close()
		if t.Failed() {
			for _, q := range r.api.Requests() {
				t.Logf("API request %d agent=%v session=%q messages=%d replies=%d last user: %.300q", q.N, q.Agent, q.Session, q.Messages, q.Replies, q.LastUser)
			}
			if o := r.api.Other(); len(o) > 0 {
				t.Logf("other requests to the mock: %q", o)
			}
		}
	})
	e.cwd = r.proj
	e.set("HOME="+r.home, "PATH="+realCLIDir()+":"+filepath.Dir(superviseBin)+":"+os.Getenv("PATH"),
		"XDG_CONFIG_HOME="+filepath.Join(r.home, ".config"), "XDG_CACHE_HOME="+filepath.Join(r.home, ".cache"),
		"XDG_DATA_HOME="+filepath.Join(r.home, ".local", "share"),
		"HTTP_PROXY=", "HTTPS_PROXY=", "http_proxy=", "https_proxy=", "ALL_PROXY=", "NO_PROXY=127.0.0.1,localhost",
		"no_proxy=127.0.0.1,localhost", "TERM=dumb", "NO_COLOR=1")
	e.set(cli.env(r.api.URL())...)
	for src, dst := range cli.install {
		b, err := os.ReadFile(filepath.Join("..", "examples", src))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(r.home, dst)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if tmpl := resumeTemplate(t, cli.example); tmpl != cli.template {
		t.Fatalf("examples/%s/README.md gives --resume-exec %q, the test expects %q", cli.example, tmpl, cli.template)
	}
	if cli.setup != nil {
		cli.setup(r)
	}
	return r
}

// answer sets how the mock answers from now on.
func (r *realEnv) answer(script func(mockapi.Request) mockapi.Reply) {
	r.mu.Lock()
	r.script = script
	r.mu.Unlock()
}

// run starts supervise in task mode on the CLI's task, with the example's
// resume template.
func (r *realEnv) run(flags ...string) *proc {
	args := append([]string{"run", "--resume-exec", r.cli.template}, flags...)
	args = append(append(append(args, "--"), r.cli.task...), realPrompt)
	return r.start(args...)
}

// waitRequest waits for an agent-loop request that satisfies cond.
func (r *realEnv) waitRequest(what string, cond func(mockapi.Request) bool) mockapi.Request {
	r.t.Helper()
	var found mockapi.Request
	waitFor(r.t, 60*time.Second, what, func() bool {
		for _, q := range r.api.AgentRequests() {
			if cond(q) {
				found = q
				return true
			}
		}
		return false
	})
	return found
}

// waitSession waits until status shows a session in state (and, for a
// tool, in phase tool) and returns its id and the child's pid.
func (r *realEnv) waitSession(state, phase string) (string, int) {
	r.t.Helper()
	var id string
	var pid int
	waitFor(r.t, 60*time.Second, "a session "+state+" "+phase, func() bool {
		st, ok := r.tryStatus()
		if !ok {
			return false
		}
		for _, s := range st.Sessions {
			if s.State == state && (phase == "" || s.Phase == phase) {
				id, pid = s.ID, st.Child.PID
				return pid > 0
			}
		}
		return false
	})
	return id, pid
}

// tryStatus is status, false while supervise is not answering yet.
func (r *realEnv) tryStatus() (status, bool) {
	out, err := exec.Command(superviseBin, "status", "--json", "--state-dir", r.stateDir).Output()
	var st status
	if err != nil || json.Unmarshal(out, &st) != nil {
		return st, false
	}
	return st, true
}

// freshStarts counts the agent requests that open a conversation on the
// task: the task as the only message. More than one means the task ran
// again as a new session.
func (r *realEnv) freshStarts() int {
	n := 0
	for _, q := range r.api.AgentRequests() {
		if q.Replies == 0 && strings.Contains(q.FirstUser, realPrompt) {
			n++
		}
	}
	return n
}

// launches is how many runs supervise started.
func (r *realEnv) launches() int { return len(r.statusAllJSON().Runs) }

func (r *realEnv) statusAllJSON() status {
	return (&adapterEnv{env: r.env}).statusAllJSON()
}

// continuation reports whether a request's newest user text is supervise's
// continuation.
func continuation(q mockapi.Request) bool {
	return strings.Contains(q.LastUser, "[supervise: automatic continuation]")
}

// The scenarios, the same for every CLI.

// happy: the task runs a shell command through the CLI's tool and ends; supervise exits 0.
func (r *realEnv) happy() {
	t := r.t
	r.answer(func(q mockapi.Request) mockapi.Reply {
		if q.Agent && !q.ToolResult {
			return mockapi.Reply{Kind: mockapi.Tool, Command: "echo realcli-ok > done.txt"}
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
	})
	sv := r.run()
	if code := sv.wait(90 * time.Second); code != 0 {
		t.Fatalf("supervise exit code %d, want 0", code)
	}
	if b, err := os.ReadFile(filepath.Join(r.proj, "done.txt")); err != nil || strings.TrimSpace(string(b)) != "realcli-ok" {
		t.Errorf("the tool call did not run: done.txt = %q, %v", b, err)
	}
	st := r.statusAllJSON()
	if len(st.Sessions) != 1 || st.Sessions[0].State != "idle" {
		t.Errorf("sessions = %+v, want one, idle", st.Sessions)
	}
	if len(st.Runs) != 1 {
		t.Errorf("%d runs, want 1", len(st.Runs))
	}
	if n := r.freshStarts(); n != 1 {
		t.Errorf("the task opened %d conversations, want 1", n)
	}
}

// killOnce: kill -9 inside the tool call; supervise relaunches the template
// with the same session, whose next API request carries the continuation;
// the resumed turn completes and supervise exits 0.
func (r *realEnv) killOnce() {
	t := r.t
	r.answer(func(q mockapi.Request) mockapi.Reply {
		switch {
		case !q.Agent:
			return mockapi.Reply{Kind: mockapi.Text, Text: "Title"}
		case continuation(q):
			return mockapi.Reply{Kind: mockapi.Text, Text: "Checked: the parser is renamed."}
		case !q.ToolResult:
			return mockapi.Reply{Kind: mockapi.Tool, Command: "sleep 60"}
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
	})
	sv := r.run()
	session, pid := r.waitSession("in_turn", "tool")
	syscall.Kill(pid, syscall.SIGKILL)
	q := r.waitRequest("the continuation in an API request", continuation)
	if q.Session != "" && q.Session != session {
		t.Errorf("the continuation went to session %q, want %q", q.Session, session)
	}
	for _, want := range []string{"signal 9", "check the current state", realPrompt} {
		if !strings.Contains(q.LastUser, want) {
			t.Errorf("continuation lacks %q:\n%s", want, q.LastUser)
		}
	}
	if code := sv.wait(90 * time.Second); code != 0 {
		t.Fatalf("supervise exit code %d after the resumed turn, want 0", code)
	}
	st := r.statusAllJSON()
	s, ok := st.session(session)
	if !ok || s.State != "idle" || s.CrashCount != 0 {
		t.Errorf("session %s = %+v (found %v), want idle with crash count 0", session, s, ok)
	}
	if len(st.Sessions) != 1 {
		t.Errorf("%d sessions, want 1 (the resume kept the id): %+v", len(st.Sessions), st.Sessions)
	}
	if len(st.Runs) != 2 {
		t.Errorf("%d runs, want 2 (the task and its resume)", len(st.Runs))
	}
	if !strings.Contains(sv.stderr(), "agent took the resume") {
		t.Error(`supervise did not log "agent took the resume": the resumed run's hooks did not report resumed`)
	}
	if n := r.freshStarts(); n != 1 {
		t.Errorf("the task opened %d conversations, want 1", n)
	}
}

// killTwice: killed in the tool, then killed again while the resumed turn
// waits on the model: the session is parked, supervise exits 5 and prints
// the resume command, and the task is never run again.
func (r *realEnv) killTwice() {
	t := r.t
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
	session, pid := r.waitSession("in_turn", "tool")
	syscall.Kill(pid, syscall.SIGKILL)
	r.waitRequest("the continuation in an API request", continuation)
	waitFor(t, 30*time.Second, "the resumed run in its turn", func() bool {
		st, ok := r.tryStatus()
		s, found := st.session(session)
		return ok && found && s.State == "in_turn" && st.Child.PID > 0 && st.Child.PID != pid
	})
	syscall.Kill(r.status().Child.PID, syscall.SIGKILL)
	if code := sv.wait(90 * time.Second); code != 5 {
		t.Fatalf("supervise exit code %d after the second kill, want 5 (a session is parked)", code)
	}
	s, ok := r.statusAllJSON().session(session)
	if !ok || s.State != "parked" {
		t.Errorf("session %s = %+v (found %v), want parked", session, s, ok)
	}
	if !strings.Contains(sv.stderr(), session) {
		t.Errorf("supervise's stderr does not name the parked session %s", session)
	}
	if n := r.launches(); n != 2 {
		t.Errorf("%d runs, want 2 (the task and one resume)", n)
	}
	if n := r.freshStarts(); n != 1 {
		t.Errorf("the task opened %d conversations, want exactly 1: it was run again", n)
	}
}

// apiError: every model call fails. supervise resumes at most once and
// exits, without relaunching the task: no loop spending API credit.
func (r *realEnv) apiError() {
	t := r.t
	r.answer(func(q mockapi.Request) mockapi.Reply {
		return mockapi.Reply{Kind: mockapi.Error, Text: "mockapi: invalid request (the test's API error)"}
	})
	sv := r.run()
	code := sv.wait(90 * time.Second)
	if code == 0 {
		t.Errorf("supervise exit code 0 after API errors, want the failure")
	}
	if n := r.launches(); n > 2 {
		t.Errorf("%d runs after API errors, want at most 2 (the task and one resume)", n)
	}
	if n := r.freshStarts(); n != 1 {
		t.Errorf("the task opened %d conversations, want 1", n)
	}
	t.Logf("API error: supervise exit %d after %d runs and %d agent API requests", code, r.launches(), len(r.api.AgentRequests()))
}

// sigterm: a stop asked of supervise mid-turn: exit 0, the turn is
// stopped (not counted, not resumed).
func (r *realEnv) sigterm() {
	t := r.t
	r.answer(func(q mockapi.Request) mockapi.Reply {
		if q.Agent {
			return mockapi.Reply{Kind: mockapi.Stall}
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "Title"}
	})
	sv := r.run()
	session, _ := r.waitSession("in_turn", "")
	r.waitRequest("the task's API request", func(q mockapi.Request) bool { return strings.Contains(q.FirstUser, realPrompt) })
	sv.signal(syscall.SIGTERM)
	if code := sv.wait(60 * time.Second); code != 0 {
		t.Fatalf("supervise exit code %d after SIGTERM, want 0", code)
	}
	s, ok := r.statusAllJSON().session(session)
	if !ok || s.State != "stopped" || s.CrashCount != 0 {
		t.Errorf("session %s = %+v (found %v), want stopped, crash count 0", session, s, ok)
	}
	if n := r.launches(); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}

// runRealCLI runs every scenario for one CLI.
func runRealCLI(t *testing.T, cli realCLI) {
	for _, sc := range []struct {
		name string
		run  func(*realEnv)
	}{
		{"happy", (*realEnv).happy},
		{"kill9", (*realEnv).killOnce},
		{"kill9twice", (*realEnv).killTwice},
		{"apierror", (*realEnv).apiError},
		{"sigterm", (*realEnv).sigterm},
	} {
		t.Run(sc.name, func(t *testing.T) {
			sc.run(newRealEnv(t, cli))
		})
	}
}

// Claude Code: examples/claude-code/settings.json as ~/.claude/settings.json,
// the task `claude -p TASK`, resumed by `claude -p -r {session} {message}`.
func TestRealClaudeCode(t *testing.T) {
	t.Parallel()
	runRealCLI(t, realCLI{
		bin:      "claude",
		version:  "2.1.197",
		example:  "claude-code",
		install:  map[string]string{"claude-code/settings.json": ".claude/settings.json"},
		task:     []string{"claude", "-p"},
		template: "claude -p -r {session} {message}",
		mock:     mockapi.Anthropic,
		env: func(url string) []string {
			return []string{"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=sk-ant-mock",
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1",
				"DISABLE_ERROR_REPORTING=1"}
		},
		setup: func(r *realEnv) {
			// The project allows the shell tool, as a user of -p does (print
			// mode cannot ask), and is trusted, as after a first interactive
			// run there: Claude ignores an untrusted project's permissions.
			// The hooks stay in the user settings, unchanged.
			writeFile(r.t, filepath.Join(r.proj, ".claude", "settings.local.json"),
				`{"permissions":{"allow":["Bash"]}}`)
			trust, _ := json.Marshal(map[string]any{"projects": map[string]any{
				r.proj: map[string]any{"hasTrustDialogAccepted": true}}})
			writeFile(r.t, filepath.Join(r.home, ".claude.json"), string(trust))
		},
	})
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
