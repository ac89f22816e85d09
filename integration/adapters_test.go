package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// adapterBins are the stand-in CLIs (testdata/fakecli, installed as claude,
// codex, gemini and hermes in dir) and the Go example agent.
type adapterBins struct {
	dir     string
	goAgent string
}

// buildAdapters builds them once per test run, next to supervise.
var buildAdapters = sync.OnceValues(func() (adapterBins, error) {
	base := filepath.Dir(superviseBin)
	b := adapterBins{dir: filepath.Join(base, "fakebin"), goAgent: filepath.Join(base, "go-agent")}
	fake := filepath.Join(base, "fakecli")
	for bin, pkg := range map[string]string{fake: "./testdata/fakecli", b.goAgent: "../examples/go-agent"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			return b, fmt.Errorf("building %s: %v\n%s", pkg, err, out)
		}
	}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return b, err
	}
	for _, name := range []string{"claude", "codex", "gemini", "hermes"} {
		if err := os.Symlink(fake, filepath.Join(b.dir, name)); err != nil {
			return b, err
		}
	}
	return b, nil
})

// adapterEnv is an env whose agents find the stand-ins and supervise on
// PATH and a private $HOME to hold the products' configuration.
type adapterEnv struct {
	*env
	home string
	bins adapterBins
}

func newAdapterEnv(t *testing.T) *adapterEnv {
	t.Helper()
	bins, err := buildAdapters()
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	a := &adapterEnv{env: e, home: filepath.Join(e.dir, "home"), bins: bins}
	e.set("HOME="+a.home, "PATH="+bins.dir+":"+filepath.Dir(superviseBin)+":"+os.Getenv("PATH"),
		"FAKECLI_HANG_RUN=1",
		// The stand-ins are run as the examples set the real CLIs up;
		// the profiles (zeroconfig_realcli_test.go) are the real CLIs'.
		"SUPERVISE_PROFILES=off")
	return a
}

// install copies a shipped example file to where the product reads it
// under $HOME, so the test checks the wiring we ship.
func (a *adapterEnv) install(example, dest string) {
	a.t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", example))
	if err != nil {
		a.t.Fatal(err)
	}
	path := filepath.Join(a.home, dest)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		a.t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		a.t.Fatal(err)
	}
}

// resumeTemplate is the --resume-exec template an example's README gives.
func resumeTemplate(t *testing.T, example string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", example, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`--resume-exec '([^']+)'`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("examples/%s/README.md gives no --resume-exec '...' template", example)
	}
	return string(m[1])
}

// statusAllJSON is `supervise status --json --all`, settled sessions too.
func (a *adapterEnv) statusAllJSON() status {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, superviseBin, "status", "--json", "--all", "--state-dir", a.stateDir).Output()
	if err != nil {
		a.t.Fatalf("supervise status --all: %v", err)
	}
	var st status
	if err := json.Unmarshal(out, &st); err != nil {
		a.t.Fatalf("status JSON: %v\n%s", err, out)
	}
	return st
}

// noHookTrouble fails the test if a stand-in logged a hook that failed,
// blocked, printed on stdout (Claude Code adds that to the prompt), or
// refused its command line.
func (a *adapterEnv) noHookTrouble() {
	a.t.Helper()
	for _, ev := range a.events() {
		switch ev.kind {
		case "hook-failed", "hook-blocked", "hook-stdout", "refused", "hooks-off":
			a.t.Errorf("run %d: %s %s", ev.run, ev.kind, ev.arg)
		}
	}
}

// adapterCase is one agent CLI driven through its shipped hooks and its
// documented --resume-exec template.
type adapterCase struct {
	example  string            // examples/ directory
	install  map[string]string // example file -> path under $HOME
	template string            // the template the README must give
	argv     []string          // the original command
	tool     string            // the tool the stand-in's turn calls
	turnIDs  bool              // the product's hooks carry turn ids
	// resumed is the argv after the program name that the template must
	// produce for session and message.
	resumed func(session, message string) []string
}

// check runs the case: the stand-in runs its hooks (supervise-notify hook
// from the shipped config) and is killed -9 inside its tool call; supervise
// must relaunch it through the template with the session id the hooks
// reported and an honest continuation; the resumed run's own hooks must
// report that it took the resume, and complete the turn.
func (c adapterCase) check(t *testing.T, a *adapterEnv) {
	const prompt = "rename the parser module"
	for src, dst := range c.install {
		a.install(src, dst)
	}
	tmpl := resumeTemplate(t, c.example)
	if tmpl != c.template {
		t.Errorf("examples/%s/README.md template = %q, want %q", c.example, tmpl, c.template)
	}
	sv := a.start(append([]string{"run", "--resume-exec", tmpl, "--"}, append(c.argv, prompt)...)...)
	hung := a.waitEvent(1, "tool-running")
	session := a.waitEvent(1, "session").arg
	s, ok := a.status().session(session)
	if !ok || s.State != "in_turn" || s.Phase != "tool" || s.Tool != c.tool {
		t.Fatalf("before the kill, session %s = %+v (found %v), want in_turn in tool %s", session, s, ok, c.tool)
	}
	if c.turnIDs && !strings.HasPrefix(s.Turn, "turn-") {
		t.Errorf("turn = %q, want the product's turn id", s.Turn)
	}
	syscall.Kill(hung.pid, syscall.SIGKILL)
	if code := sv.wait(30 * time.Second); code != 0 {
		t.Fatalf("supervise exit code %d after the resumed run, want 0", code)
	}

	var argv []string
	if err := json.Unmarshal([]byte(a.waitEvent(2, "start").arg), &argv); err != nil {
		t.Fatal(err)
	}
	if len(argv) == 0 {
		t.Fatal("run 2 got no arguments")
	}
	msg := argv[len(argv)-1]
	if want := c.resumed(session, msg); !slices.Equal(argv, want) {
		t.Errorf("run 2 argv = %q, want %q", argv, want)
	}
	for _, want := range []string{"[supervise: automatic continuation]", "signal 9", `"` + c.tool + `"`,
		"check the current state", prompt} {
		if !strings.Contains(msg, want) {
			t.Errorf("continuation lacks %q:\n%s", want, msg)
		}
	}
	if got := a.waitEvent(2, "resumed").arg; got != session {
		t.Errorf("run 2 resumed session %q, want %q", got, session)
	}
	if err := sv.stderr(); !strings.Contains(err, "agent took the resume") || strings.Contains(err, "supersedes") {
		t.Error(`the resumed run's prompt hook did not report resumed: supervise did not log "agent took the resume"`)
	}
	s2, ok := a.statusAllJSON().session(session)
	if !ok || s2.State != "idle" || s2.CrashCount != 0 {
		t.Errorf("after the resumed turn, session = %+v (found %v), want idle with crash count 0", s2, ok)
	}
	if a.count("session") != 2 {
		t.Errorf("%d sessions started, want 2 (the original and its resume)", a.count("session"))
	}
	a.noHookTrouble()
}

// Claude Code: the settings.json hooks report the session, and a kill -9
// mid-tool relaunches `claude -p -r SESSION MESSAGE` in the same directory.
func TestAdapterClaudeCode(t *testing.T) {
	t.Parallel()
	adapterCase{
		example:  "claude-code",
		install:  map[string]string{"claude-code/settings.json": ".claude/settings.json"},
		template: "claude -p -r {session} {message}",
		argv:     []string{"claude", "-p"},
		tool:     "Bash",
		resumed:  func(s, m string) []string { return []string{"-p", "-r", s, m} },
	}.check(t, newAdapterEnv(t))
}

// Codex CLI: hooks.json (behind [features] hooks) and
// `codex exec resume SESSION MESSAGE`.
func TestAdapterCodex(t *testing.T) {
	t.Parallel()
	adapterCase{
		example:  "codex",
		install:  map[string]string{"codex/hooks.json": ".codex/hooks.json", "codex/config.toml": ".codex/config.toml"},
		template: "codex exec resume {session} {message}",
		argv:     []string{"codex", "exec"},
		tool:     "Bash",
		turnIDs:  true,
		resumed:  func(s, m string) []string { return []string{"exec", "resume", s, m} },
	}.check(t, newAdapterEnv(t))
}

// Gemini CLI: settings.json hooks and `gemini -r SESSION -p MESSAGE`.
func TestAdapterGemini(t *testing.T) {
	t.Parallel()
	adapterCase{
		example:  "gemini",
		install:  map[string]string{"gemini/settings.json": ".gemini/settings.json"},
		template: "gemini -r {session} -p {message}",
		argv:     []string{"gemini", "-p"},
		tool:     "run_shell_command",
		resumed:  func(s, m string) []string { return []string{"-r", s, "-p", m} },
	}.check(t, newAdapterEnv(t))
}

// hermes: shell hooks in config.yaml (accepted for an unattended run) and
// `hermes --resume SESSION -z MESSAGE`.
func TestAdapterHermes(t *testing.T) {
	t.Parallel()
	a := newAdapterEnv(t)
	a.set("HERMES_ACCEPT_HOOKS=1")
	adapterCase{
		example:  "hermes",
		install:  map[string]string{"hermes/config.yaml": ".hermes/config.yaml"},
		template: "hermes --resume {session} -z {message}",
		argv:     []string{"hermes", "-z"},
		tool:     "terminal",
		turnIDs:  true,
		resumed:  func(s, m string) []string { return []string{"--resume", s, "-z", m} },
	}.check(t, a)
}

// The Go example agent: killed after the barrier that journaled its tool
// phase and before the side effect, it is relaunched with the resume file;
// the resume names the tool, the agent finds the effect not done, does it
// once and completes the turn.
func TestAdapterGoAgent(t *testing.T) {
	t.Parallel()
	a := newAdapterEnv(t)
	out := filepath.Join(a.dir, "deploy.log")
	sv := a.start("run", "--", a.bins.goAgent, "-session", "g1", "-out", out, "-tool-time", "1h", "deploy", "v2")
	waitFor(t, 20*time.Second, "the tool phase barrier", func() bool {
		return strings.Contains(sv.stderr(), "tool phase journaled")
	})
	st := a.status()
	if s, ok := st.session("g1"); !ok || s.State != "in_turn" || s.Phase != "tool" || s.Tool != "append_file" {
		t.Fatalf("g1 = %+v (found %v), want in_turn in tool append_file", s, ok)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("the side effect happened before the kill")
	}
	syscall.Kill(st.Child.PID, syscall.SIGKILL)
	if code := sv.wait(30 * time.Second); code != 0 {
		t.Fatalf("supervise exit code %d after the resumed run, want 0", code)
	}
	log := sv.stderr()
	for _, want := range []string{`msg="resuming an interrupted turn" session=g1 turn=t1 attempt=1 phase=tool tool=append_file`,
		`while the tool \"append_file\" was running`, "deploy v2"} {
		if !strings.Contains(log, want) {
			t.Errorf("the resumed agent's log lacks %q:\n%s", want, log)
		}
	}
	if b, _ := os.ReadFile(out); string(b) != "g1/t1: deploy v2\n" {
		t.Errorf("side effects = %q, want exactly one", b)
	}
	if s, ok := a.statusAllJSON().session("g1"); !ok || s.State != "idle" || s.CrashCount != 0 {
		t.Errorf("g1 after the resumed turn = %+v (found %v), want idle", s, ok)
	}
}

// supervise notify hook and supervise-notify hook (what the shipped configs
// run), as the real binaries: each reads the payload on stdin and the
// resume file from the environment, prints the marker with --print (which
// sends nothing), and never exits 2, which every one of these agents reads
// as "block". The whole mapping table, payload by payload, is
// cmd/internal/hook's TestMap.
func TestAdapterHookMapping(t *testing.T) {
	t.Parallel()
	for _, client := range [][]string{{superviseBin, "notify", "hook"}, {notifyBin, "hook"}} {
		t.Run(filepath.Base(client[0]), func(t *testing.T) { hookMapping(t, client) })
	}
}

// hookMapping is TestAdapterHookMapping for one client, the argv before
// the hook's own arguments.
func hookMapping(t *testing.T, client []string) {
	hook := func(args ...string) *exec.Cmd {
		return exec.Command(client[0], slices.Concat(client[1:], args)...)
	}
	dir := t.TempDir()
	resumeFile := filepath.Join(dir, "resume.json")
	if err := os.WriteFile(resumeFile, []byte(`[{"session":"r1","turn":"t0","attempt":1,
		"message":"[supervise: automatic continuation] go on"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, payload, want string }{
		{"claude prompt", `{"hook_event_name":"UserPromptSubmit","session_id":"s1","prompt":"fix it"}`,
			`turn-begin --session "s1" --prompt "fix it"`},
		{"claude resumed", `{"hook_event_name":"UserPromptSubmit","session_id":"r1","prompt":"[supervise: automatic continuation] go on"}`,
			`resumed --session "r1" --turn "t0"`},
		{"codex prompt", `{"hook_event_name":"UserPromptSubmit","session_id":"c1","turn_id":"u1","prompt":"go"}`,
			`turn-begin --session "c1" --turn "u1" --prompt "go"`},
		{"gemini tool", `{"hook_event_name":"BeforeTool","session_id":"g1","tool_name":"run_shell_command"}`,
			`phase --session "g1" --phase "tool" --tool "run_shell_command"`},
		{"hermes user stop", `{"hook_event_name":"on_session_end","session_id":"h1","extra":{"completed":false,"interrupted":true,"turn_exit_reason":"interrupted_by_user","turn_id":"t9"}}`,
			`turn-end --session "h1" --turn "t9" --outcome "cancelled"`},
		{"unknown event", `{"hook_event_name":"PreCompact","session_id":"s1"}`, ``},
	} {
		cmd := hook("--print")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "SUPERVISE_RESUME_FILE=" + resumeFile}
		cmd.Stdin = strings.NewReader(c.payload)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != c.want {
			t.Errorf("%s: got %q (%v), want %q", c.name, out, err, c.want)
		}
	}

	// Codex's notify passes the payload as the last argument.
	out, err := hook("--print", `{"type":"agent-turn-complete","thread-id":"c9"}`).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != `turn-end --session "c9" --outcome "completed"` {
		t.Errorf("codex notify argument: %q %v", out, err)
	}

	// Failures exit 1, never 2; outside supervise nothing is read or said.
	for _, c := range []struct {
		name, payload string
		args          []string
		env           []string
		code          int
		quiet         bool
	}{
		{"not JSON", "not json", nil, []string{"NOTIFY_SOCKET=/nonexistent/sock"}, 1, false},
		{"no session", `{"hook_event_name":"Stop"}`, nil, []string{"NOTIFY_SOCKET=/nonexistent/sock"}, 1, false},
		{"bad flag", `{}`, []string{"--no-such-flag"}, nil, 1, false},
		{"no supervise", `{"hook_event_name":"Stop","session_id":"s1"}`, nil, nil, 0, true},
		{"no supervise, garbage", "garbage", nil, nil, 0, true},
		{"unknown event under supervise", `{"hook_event_name":"PreCompact","session_id":"s1"}`, nil,
			[]string{"NOTIFY_SOCKET=/nonexistent/sock"}, 0, true},
		{"supervise gone", `{"hook_event_name":"Stop","session_id":"s1"}`, nil, []string{"NOTIFY_SOCKET=/nonexistent/sock"}, 1, false},
	} {
		cmd := hook(c.args...)
		cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, c.env...)
		cmd.Stdin = strings.NewReader(c.payload)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != c.code || (c.quiet && len(out) > 0) {
			t.Errorf("%s: exit %d, output %q; want exit %d (quiet %v)", c.name, code, out, c.code, c.quiet)
		}
	}
}
