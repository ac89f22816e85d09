package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

// The interactive setup (docs/interactive.md): a person runs the agent
// CLI in a terminal under supervise, with the CLI's resume template and
// no task prompt. These tests run it in a real terminal (a private tmux
// server) against the mock API and read the screen as the person would.

// interactiveClaude is the documented interactive setup for Claude Code.
const interactiveClaude = "claude -r {session} {message}"

// ttyRun is supervise run in a tmux window, with its exit code written to
// a file when it ends.
type ttyRun struct {
	r        *realEnv
	server   string
	exitFile string
	raw      string // every byte written to the last window's terminal
	n        int    // windows started
	last     string // the last window started
}

func newTTY(r *realEnv) *ttyRun {
	r.t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		r.t.Skip("tmux not installed: the interactive tests need a real terminal")
	}
	tt := &ttyRun{r: r, server: fmt.Sprintf("si%d", time.Now().UnixNano())}
	// A window that only keeps the server up: closing a test's window
	// (a hangup) must not end the server with it.
	tt.tmux("-f", "/dev/null", "new-session", "-d", "-s", "main", "-n", "keep", "-x", "160", "-y", "50", "sleep 100000")
	r.t.Cleanup(func() { tt.tmux("kill-server") })
	r.t.Cleanup(func() {
		if r.t.Failed() && tt.last != "" {
			r.t.Logf("the terminal at the failure:\n%s\nsupervise.log:\n%s", tt.screen(tt.last), readLog(r))
		}
	})
	return tt
}

// start runs `supervise args...` in a new tmux window, in the project directory, and returns the target to address it.
func (tt *ttyRun) start(args ...string) string {
	r := tt.r
	r.t.Helper()
	tt.n++
	tt.exitFile = filepath.Join(r.dir, fmt.Sprintf("exit%d", tt.n))
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	for _, kv := range r.vars {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "export %s=%s\n", k, shq(v))
	}
	// A terminal the CLI draws in, as a person's is.
	// A person's shell is no CI job: Gemini CLI (is-in-ci) takes CI=true,
	// which .ci/run sets, for a headless run and will not draw its prompt.
	b.WriteString("export TERM=xterm-256color\nunset NO_COLOR CI CONTINUOUS_INTEGRATION BUILD_NUMBER RUN_ID GITHUB_ACTIONS\n")
	fmt.Fprintf(&b, "cd %s\n", shq(r.proj))
	// supervise starts once everything written to the pane is recorded.
	gate := filepath.Join(r.dir, fmt.Sprintf("go%d", tt.n))
	fmt.Fprintf(&b, "while [ ! -e %s ]; do sleep 0.05; done\n", shq(gate))
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shq(a)
	}
	fmt.Fprintf(&b, "%s %s\necho $? > %s\nsleep 1000\n", shq(superviseBin), strings.Join(q, " "), shq(tt.exitFile))
	script := filepath.Join(r.dir, fmt.Sprintf("tty%d.sh", tt.n))
	if err := os.WriteFile(script, []byte(b.String()), 0o755); err != nil {
		r.t.Fatal(err)
	}
	target := fmt.Sprintf("w%d", tt.n)
	tt.tmux("new-window", "-d", "-t", "main", "-n", target, script)
	tt.raw = filepath.Join(r.dir, fmt.Sprintf("pane%d.raw", tt.n))
	tt.tmux("pipe-pane", "-t", "main:"+target, "cat >> "+shq(tt.raw))
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		r.t.Fatal(err)
	}
	tt.last = "main:" + target
	return tt.last
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (tt *ttyRun) tmux(args ...string) string {
	tt.r.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", tt.server}, args...)...).CombinedOutput()
	if err != nil && args[0] != "kill-server" {
		tt.r.t.Fatalf("tmux %v: %v %s", args, err, out)
	}
	return string(out)
}

// written is every byte written to the last started window's terminal,
// escape sequences and all: what was drawn, even if the CLI cleared it.
func (tt *ttyRun) written() string {
	b, _ := os.ReadFile(tt.raw)
	return string(b)
}

// screen is what the terminal shows, its scrollback included.
func (tt *ttyRun) screen(target string) string {
	return tt.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", target)
}

// waitScreen waits until the terminal shows want.
func (tt *ttyRun) waitScreen(target, what, want string) string {
	tt.r.t.Helper()
	var s string
	waitFor(tt.r.t, 120*time.Second, what, func() bool {
		s = tt.screen(target)
		return strings.Contains(s, want)
	})
	return s
}

// typeLine types a line and, once the screen shows it, Enter, as a
// person does (a CLI that takes a burst of keys for a paste would take an
// Enter in the same burst for a newline).
func (tt *ttyRun) typeLine(target, line string) {
	tt.r.t.Helper()
	tt.tmux("send-keys", "-t", target, "-l", line)
	tt.waitScreen(target, "the typed line on the screen", line)
	tt.tmux("send-keys", "-t", target, "Enter")
}

// exitCode waits for the supervise of the last start to exit.
func (tt *ttyRun) exitCode(what string) string {
	tt.r.t.Helper()
	var code string
	file := tt.exitFile
	waitFor(tt.r.t, 60*time.Second, what, func() bool {
		b, err := os.ReadFile(file)
		code = strings.TrimSpace(string(b))
		return err == nil && code != ""
	})
	return code
}

// logLine is a log record: supervise's own (text or JSON), or one an
// agent writes to a stderr that is not a terminal (Codex's JSON lines).
var logLine = regexp.MustCompile(`level=|msg=|"level":|"msg":|"timestampMs":`)

// interactiveClaudeEnv is Claude Code set up as a person who has used it
// once: onboarding done, the project trusted, the API key approved, the
// Bash tool allowed in the project, the example's hooks in the user
// settings.
func interactiveClaudeEnv(t *testing.T) *realEnv {
	r := newRealEnv(t, claudeCodeCLI())
	claudeOnboarded(r)
	return r
}

// claudeOnboarded is ~/.claude.json as after a person's first runs:
// onboarding done, the API key approved, the project trusted.
func claudeOnboarded(r *realEnv) {
	t := r.t
	key := "sk-ant-mock"
	state, _ := json.Marshal(map[string]any{
		"hasCompletedOnboarding": true, "theme": "dark", "numStartups": 3,
		"customApiKeyResponses": map[string]any{"approved": []string{key[max(0, len(key)-20):]}, "rejected": []string{}},
		"projects": map[string]any{r.proj: map[string]any{"hasTrustDialogAccepted": true,
			"hasCompletedProjectOnboarding": true}},
	})
	writeFile(t, filepath.Join(r.home, ".claude.json"), string(state))
}

// claudeReady is text Claude Code's prompt shows once it takes input.
const claudeReady = "for shortcuts"

// TestInteractiveClaudeKillMidTool is issue 30's done-when: in a
// terminal, `supervise --resume-exec 'claude -r {session} {message}' --
// claude`, a Bash tool running, then kill -9 of claude: the same terminal
// shows the same conversation continued and Claude's answer to the
// continuation; no supervise log record is drawn on Claude's screen (the
// log is in the state dir's supervise.log); between the runs one line
// says what happened; /exit ends supervise with 0.
func TestInteractiveClaudeKillMidTool(t *testing.T) {
	t.Parallel()
	interactiveKill(t, interactiveClaudeEnv(t), interactiveClaude, "claude", claudeReady, "Bash", "/exit")
}

// TestInteractiveCodexKillMidTool is the same for Codex's TUI: `supervise
// --resume-exec 'codex resume {session} {message}' -- codex`.
func TestInteractiveCodexKillMidTool(t *testing.T) {
	t.Parallel()
	r := newRealEnv(t, codexCLI())
	// A person who let Codex run commands without asking (the TUI would
	// otherwise ask before the shell tool runs).
	p := filepath.Join(r.home, ".codex", "config.toml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, p, "approval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n"+string(b))
	interactiveKill(t, r, interactiveCodex, "codex", "? for shortcuts", "Bash", "/quit")
}

// TestInteractiveGeminiKillMidTool is the same for Gemini CLI's TUI:
// `supervise --resume-exec 'gemini -r {session} -i {message}' -- gemini`
// (-i: run the message, then stay interactive).
func TestInteractiveGeminiKillMidTool(t *testing.T) {
	t.Parallel()
	interactiveKill(t, newRealEnv(t, geminiCLI()), interactiveGemini, "gemini", "Type your message", "run_shell_command", "/quit")
}

// interactiveGemini is the documented interactive setup for Gemini CLI.
const interactiveGemini = "gemini -r {session} -i {message}"

// interactiveCodex is the documented interactive setup for Codex.
const interactiveCodex = "codex resume {session} {message}"

// interactiveKill runs agent under supervise with the resume template in
// a terminal, has the model start a long shell tool, kills the agent
// with SIGKILL in it, and checks the resume in place: the continuation's
// answer on the same screen, one line between the runs, no log record on
// the screen, and quit ending supervise with 0.
func interactiveKill(t *testing.T, r *realEnv, template, agent, ready, tool, quit string) {
	const answer = "Checked: the parser is renamed."
	r.answer(func(q mockapi.Request) mockapi.Reply {
		switch {
		case !q.Agent:
			return mockapi.Reply{Kind: mockapi.Text, Text: "Title"}
		case continuation(q):
			return mockapi.Reply{Kind: mockapi.Text, Text: answer}
		case !q.ToolResult:
			return mockapi.Reply{Kind: mockapi.Tool, Command: "sleep 600"}
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
	})
	tt := newTTY(r)
	args := []string{"--resume-exec", template, "--", agent}
	if template == "" { // nothing configured: the CLI's profile makes it
		args = args[2:]
	}
	w := tt.start(args...)
	tt.waitScreen(w, agent+"'s prompt", ready)
	tt.typeLine(w, realPrompt)
	session, pid := r.waitSession("in_turn", "tool")
	if r.cli.transcript != nil {
		// Claude Code writes its transcript lazily: a kill before the tool
		// call is in it loses the conversation (issue 22's early kill), which
		// no resume can bring back; a person's kill mid-tool comes later.
		waitFor(t, 60*time.Second, "the tool call in claude's transcript", func() bool {
			m, _ := filepath.Glob(filepath.Join(r.home, ".claude", "projects", "*", session+".jsonl"))
			for _, p := range m {
				if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "sleep 600") {
					return true
				}
			}
			return false
		})
	}
	before := tt.screen(w)
	syscall.Kill(pid, syscall.SIGKILL)
	q := r.waitRequest("the continuation in an API request", continuation)
	if q.Session != "" && q.Session != session {
		t.Errorf("the continuation went to session %q, want %q", q.Session, session)
	}
	screen := tt.waitScreen(w, agent+"'s answer to the continuation on the screen", answer)
	if !strings.Contains(screen, realPrompt) {
		t.Errorf("the resumed screen does not show the conversation's first prompt %q:\n%s", realPrompt, screen)
	}
	raw := tt.written()
	if line := agent + " was killed (SIGKILL) mid-tool (" + tool + "); continuing session " + session; !strings.Contains(raw, line) {
		t.Errorf("the terminal never got the line between the runs %q", line)
	}
	for _, s := range []string{before, screen, raw} {
		if logLine.MatchString(s) {
			t.Errorf("a log record was written to the terminal:\n%s", s)
		}
	}
	log, err := os.ReadFile(filepath.Join(r.stateDir, "supervise.log"))
	if err != nil || !strings.Contains(string(log), `msg="child exited"`) {
		t.Errorf("the state dir's supervise.log lacks the death's record (%v):\n%s", err, log)
	}
	if fi, err := os.Stat(filepath.Join(r.stateDir, "supervise.log")); err == nil && fi.Mode().Perm() != 0o600 {
		t.Errorf("supervise.log mode %v, want 0600", fi.Mode().Perm())
	}
	waitFor(t, 120*time.Second, "the resumed turn to end", func() bool {
		st, ok := r.tryStatus()
		s, found := st.session(session)
		return ok && found && s.State == "idle"
	})
	// The hook of the turn's end still runs when supervise has its
	// marker; a line typed then is queued as the next message.
	waitFor(t, 60*time.Second, agent+" to take input after the answer", func() bool {
		v := tt.tmux("capture-pane", "-p", "-J", "-t", w)
		return strings.Contains(v, ready) && !strings.Contains(v, "running stop hook") && !strings.Contains(v, "Executing Hooks")
	})
	tt.typeLine(w, quit)
	if code := tt.exitCode("supervise to exit after " + quit); code != "0" {
		t.Errorf("supervise exit %s after %s, want 0\nscreen:\n%s\nlog:\n%s", code, quit, tt.screen(w), readLog(r))
	}
	st := r.statusAllJSON()
	if s, ok := st.session(session); !ok || s.State != "idle" && s.State != "closed" {
		t.Errorf("session %s = %+v after %s: want idle or closed, not parked", session, s, quit)
	}
	if len(st.Sessions) != 1 && !r.cli.noPrompt {
		t.Errorf("%d sessions, want 1 (the resume kept the id): %+v", len(st.Sessions), st.Sessions)
	}
	// Through the proxy, Codex's TUI shows a side conversation of its own
	// (another thread id, no tool): a session of its own, idle.
	for _, s := range st.Sessions {
		if s.ID != session && (s.State != "idle" || s.CrashCount != 0) {
			t.Errorf("another session %+v: want only idle side conversations", s)
		}
	}
	t.Logf("interactive %s kill -9 mid-tool: %s", agent, r.summary())
}

// TestInteractiveHangupNotice: closing the terminal mid-turn (SIGHUP) is
// a person's own stop: the session is stopped, never resumed silently,
// and the next interactive start names it with the command that
// continues it before the CLI takes the terminal.
func TestInteractiveHangupNotice(t *testing.T) {
	t.Parallel()
	r := interactiveClaudeEnv(t)
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
	tt.waitScreen(w, "Claude's prompt", claudeReady)
	tt.typeLine(w, realPrompt)
	session, _ := r.waitSession("in_turn", "tool")
	// Closing the window hangs up its terminal: SIGHUP to its processes.
	tt.tmux("kill-window", "-t", w)
	waitFor(t, 60*time.Second, "the session to be stopped", func() bool {
		out, err := exec.Command(superviseBin, "status", "--json", "--state-dir", r.stateDir).Output()
		var st status
		if err != nil || json.Unmarshal(out, &st) != nil || st.Supervisor.Running {
			return false
		}
		s, ok := st.session(session)
		return ok && s.State == "stopped"
	})
	w = tt.start("--", "claude")
	screen := tt.waitScreen(w, "Claude's prompt at the next start", claudeReady)
	screen += tt.written()
	want := "session " + session + " was stopped mid-turn"
	if !strings.Contains(screen, want) || !strings.Contains(screen, "supervise resume --state-dir "+r.stateDir+" "+session) {
		t.Errorf("the next start does not name the stopped session and its command (%q):\n%s", want, screen)
	}
	if logLine.MatchString(screen) {
		t.Errorf("a log record is on the terminal:\n%s", screen)
	}
	for _, q := range r.api.AgentRequests() {
		if continuation(q) {
			t.Errorf("the stopped session was resumed silently: request %d carries the continuation", q.N)
		}
	}
	tt.typeLine(w, "/exit")
	if code := tt.exitCode("supervise to exit after /exit"); code != "0" {
		t.Errorf("supervise exit %s after /exit, want 0\n%s", code, readLog(r))
	}
}

// TestInteractiveHangupNoticeTemplate: the same in the documented setup,
// with the resume template: the next start is not refused by the rerun
// rule (an interactive start repeats nothing), names the stopped session
// with supervise's command and Claude's own resume line, and opens a
// blank prompt, the session not resumed silently.
func TestInteractiveHangupNoticeTemplate(t *testing.T) {
	t.Parallel()
	r := interactiveClaudeEnv(t)
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
	w := tt.start("--resume-exec", interactiveClaude, "--", "claude")
	tt.waitScreen(w, "Claude's prompt", claudeReady)
	tt.typeLine(w, realPrompt)
	session, _ := r.waitSession("in_turn", "tool")
	tt.tmux("kill-window", "-t", w)
	waitFor(t, 60*time.Second, "the session to be stopped", func() bool {
		out, err := exec.Command(superviseBin, "status", "--json", "--state-dir", r.stateDir).Output()
		var st status
		if err != nil || json.Unmarshal(out, &st) != nil || st.Supervisor.Running {
			return false
		}
		s, ok := st.session(session)
		return ok && s.State == "stopped"
	})
	w = tt.start("--resume-exec", interactiveClaude, "--", "claude")
	screen := tt.waitScreen(w, "Claude's prompt at the next start", claudeReady) + tt.written()
	for _, want := range []string{"session " + session + " was stopped mid-turn",
		"supervise resume --state-dir " + r.stateDir + " " + session, "claude -r " + session} {
		if !strings.Contains(screen, want) {
			t.Errorf("the next start does not say %q:\n%s", want, screen)
		}
	}
	if logLine.MatchString(screen) {
		t.Errorf("a log record was written to the terminal:\n%s", screen)
	}
	for _, q := range r.api.AgentRequests() {
		if continuation(q) {
			t.Errorf("the stopped session was resumed silently: request %d carries the continuation", q.N)
		}
	}
	tt.typeLine(w, "/exit")
	if code := tt.exitCode("supervise to exit after /exit"); code != "0" {
		t.Errorf("supervise exit %s after /exit, want 0\n%s", code, readLog(r))
	}
}

func readLog(r *realEnv) string {
	b, _ := os.ReadFile(filepath.Join(r.stateDir, "supervise.log"))
	return lastBytes(string(b), 4000)
}
