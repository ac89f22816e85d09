package integration

import (
	"crypto/sha256"
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
	pkg      string            // its npm package
	version  string            // the version pinned and verified
	example  string            // examples/ directory
	install  map[string]string // example file -> path under $HOME
	task     []string          // the task command before the prompt
	template string            // the --resume-exec template the README gives
	mock     func(func(mockapi.Request) mockapi.Reply) *mockapi.Server
	env      func(url string) []string // points the CLI at the mock, nothing else
	setup    func(r *realEnv)          // project setup the example README asks for
	// failHook: the CLI reports a turn that an API error ended (Claude's
	// StopFailure), so supervise ends the task without a resume.
	failHook bool
	// transcript, when set, reports whether the CLI has written session's
	// conversation down: Claude Code writes it lazily, and a kill before
	// that loses the conversation ("No conversation found"), which no
	// resume can bring back. A scenario that means to test the resume waits
	// for it, as a user's kill cannot (issue 22 handles the early kill).
	transcript func(r *realEnv, session string) bool
	// proxyDoc: task and template are docs/proxy.md's for this CLI
	// without hooks, not its example README's.
	proxyDoc bool
	// zero: nothing of supervise's is installed and no flag names a
	// template: the CLI's profile sets the run up (zeroconfig_realcli_test.go).
	zero bool
	// stateDir, when set, makes the scenario's state dir (Gemini CLI reads
	// no system settings under a directory others may write, as /tmp is).
	stateDir func(t *testing.T) string
	// noPrompt: supervise sees the CLI's turns through the proxy, which
	// reads no prompt, so the continuation cannot quote the request (the
	// conversation, resumed by its id, holds it).
	noPrompt bool
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
	codes  []int // supervise's exit codes, in order
}

// wait waits for one supervise to end and records its exit code for the
// scenario's summary line.
func (r *realEnv) wait(p *proc, d time.Duration) int {
	code := p.wait(d)
	r.mu.Lock()
	r.codes = append(r.codes, code)
	r.mu.Unlock()
	return code
}

// summary is one row of the scenarios-by-CLI table: supervise's exit
// codes, its runs, the agent's API requests and the conversations.
func (r *realEnv) summary() string {
	r.mu.Lock()
	codes := fmt.Sprint(r.codes)
	r.mu.Unlock()
	runs := 0
	if st, err := exec.Command(superviseBin, "status", "--json", "--all", "--state-dir", r.stateDir).Output(); err == nil {
		var v status
		if json.Unmarshal(st, &v) == nil {
			runs = len(v.Runs)
		}
	}
	return fmt.Sprintf("exit %s, runs %d, API requests %d (agent %d), conversations %d",
		codes, runs, len(r.api.Requests()), len(r.api.AgentRequests()), r.conversations())
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
	if os.Getenv("SUPERVISE_REALCLI") == "off" {
		t.Skip("SUPERVISE_REALCLI=off")
	}
	if raceEnabled {
		t.Skip("the real CLIs run in the pass without -race: they test the adapters, and a race build of supervise adds nothing but time")
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
	if cli.stateDir != nil {
		e.stateDir = cli.stateDir(t)
		e.set("SUPERVISE_STATE_DIR=" + e.stateDir)
	}
	if tmpl := resumeTemplate(t, cli.example); tmpl != cli.template && !cli.proxyDoc && !cli.zero {
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
	if r.cli.zero {
		args = append([]string{"run"}, flags...)
	}
	args = append(append(append(args, "--"), r.cli.task...), realPrompt)
	return r.start(args...)
}

// waitRequest waits for an agent-loop request that satisfies cond.
func (r *realEnv) waitRequest(what string, cond func(mockapi.Request) bool) mockapi.Request {
	r.t.Helper()
	var found mockapi.Request
	waitFor(r.t, 120*time.Second, what, func() bool {
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
	waitFor(r.t, 120*time.Second, "a session "+state+" "+phase, func() bool {
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
// task: no reply from the model yet and no continuation. More than one
// means the task ran again as a new session.
func (r *realEnv) freshStarts() int {
	n, sessions := 0, map[string]bool{}
	for _, q := range r.api.AgentRequests() {
		if strings.Contains(q.FirstUser, realPrompt) {
			sessions[q.Session] = true
		}
		if q.Replies == 0 && strings.Contains(q.FirstUser, realPrompt) && !q.Contains(continuationMark) {
			n++
		}
	}
	if len(sessions) > 1 {
		r.t.Errorf("the task's requests carry %d session ids, want 1: %v", len(sessions), sessions)
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
	return strings.Contains(q.LastUser, continuationMark)
}

const continuationMark = "[supervise: automatic continuation]"

// The scenarios, the same for every CLI.

// happy: the task runs a shell command through the CLI's tool and ends;
// supervise exits 0.
func (r *realEnv) happy() {
	t := r.t
	r.answer(func(q mockapi.Request) mockapi.Reply {
		if q.Agent && !q.ToolResult {
			return mockapi.Reply{Kind: mockapi.Tool, Command: "echo realcli-ok | tr a-z A-Z"}
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
	})
	sv := r.run()
	if code := r.wait(sv, 150*time.Second); code != 0 {
		t.Fatalf("supervise exit code %d, want 0", code)
	}
	ran := false
	for _, q := range r.api.AgentRequests() {
		ran = ran || q.ToolResult && strings.Contains(q.LastUser, "REALCLI-OK")
	}
	if !ran {
		t.Error("no API request carried the tool's output REALCLI-OK: the tool call did not run")
	}
	st := r.statusAllJSON()
	if len(st.Sessions) != 1 || st.Sessions[0].State != "idle" || st.Sessions[0].LastOutcome != "completed" {
		t.Errorf("sessions = %+v, want one, idle, its last turn completed", st.Sessions)
	}
	if len(st.Runs) != 1 {
		t.Errorf("%d runs, want 1", len(st.Runs))
	}
	if n := r.freshStarts(); n != 1 {
		t.Errorf("the task opened %d conversations, want 1", n)
	}
}

// waitTranscript waits until the CLI has written session's conversation,
// for a CLI that writes it lazily (realCLI.transcript).
func (r *realEnv) waitTranscript(session string) {
	if r.cli.transcript == nil {
		return
	}
	waitFor(r.t, 60*time.Second, r.cli.bin+"'s transcript of the session", func() bool { return r.cli.transcript(r, session) })
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
	r.waitTranscript(session)
	syscall.Kill(pid, syscall.SIGKILL)
	q := r.waitRequest("the continuation in an API request", continuation)
	if q.Session != "" && q.Session != session {
		t.Errorf("the continuation went to session %q, want %q", q.Session, session)
	}
	for _, want := range []string{"signal 9", "sleep 60", "check the current state", realPrompt} {
		if want == realPrompt && r.cli.noPrompt {
			continue
		}
		if !strings.Contains(q.LastUser, want) {
			t.Errorf("continuation lacks %q:\n%s", want, q.LastUser)
		}
	}
	if q.Contains("Continue from where you left off") {
		t.Logf("the CLI added %q to the resumed conversation", "Continue from where you left off.")
	}
	if code := r.wait(sv, 150*time.Second); code != 0 {
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
	if strings.Contains(sv.stderr(), "out of sequence") {
		t.Errorf("a normal resume logged an out-of-sequence marker:\n%s", sv.stderr())
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
	r.waitTranscript(session)
	syscall.Kill(pid, syscall.SIGKILL)
	r.waitRequest("the continuation in an API request", continuation)
	waitFor(t, 120*time.Second, "the resumed run in its turn", func() bool {
		st, ok := r.tryStatus()
		s, found := st.session(session)
		return ok && found && s.State == "in_turn" && st.Child.PID > 0 && st.Child.PID != pid
	})
	syscall.Kill(r.status().Child.PID, syscall.SIGKILL)
	if code := r.wait(sv, 150*time.Second); code != 5 {
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
	code := r.wait(sv, 150*time.Second)
	if code == 0 {
		t.Errorf("supervise exit code 0 after API errors, want the failure")
	}
	// At most: the task, one resume, and, when that resume cannot find
	// the conversation (Gemini after an API error), the task once again.
	if n := r.launches(); n > 3 {
		t.Errorf("%d runs after API errors, want at most 3 (the task, one resume, the task again)", n)
	}
	if r.cli.failHook {
		// The turn ended failed: nothing to resume, the agent's status.
		if n := r.launches(); n != 1 || code != 1 {
			t.Errorf("%d runs, exit code %d after an API error the hooks reported, want 1 run and the agent's status 1", n, code)
		}
	}
	switch n := r.conversations(); {
	case n == 2 && !strings.Contains(sv.stderr(), "starting the task again once"):
		t.Errorf("the task opened 2 conversations without saying it started the task again")
	case n > 2:
		t.Errorf("the task opened %d conversations, want at most 2", n)
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
	if code := r.wait(sv, 60*time.Second); code != 0 {
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

// heldRerun: with --guard-trip 1 the first kill mid-turn holds the
// session's resume: supervise exits 5, and the same command run again
// exits 5 too, sending nothing to the API (issue 22's rerun rule).
func (r *realEnv) heldRerun() {
	t := r.t
	r.answer(func(q mockapi.Request) mockapi.Reply {
		switch {
		case !q.Agent:
			return mockapi.Reply{Kind: mockapi.Text, Text: "Title"}
		case !q.ToolResult:
			return mockapi.Reply{Kind: mockapi.Tool, Command: "sleep 60"}
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
	})
	sv := r.run("--guard-trip", "1")
	session, pid := r.waitSession("in_turn", "tool")
	r.waitTranscript(session)
	syscall.Kill(pid, syscall.SIGKILL)
	if code := r.wait(sv, 150*time.Second); code != 5 {
		t.Fatalf("supervise exit code %d after a kill with --guard-trip 1, want 5\n%s", code, sv.stderr())
	}
	before := len(r.api.Requests())
	again := r.run("--guard-trip", "1")
	if code := r.wait(again, 150*time.Second); code != 5 {
		t.Fatalf("the same command again: exit code %d, want 5\n%s", code, again.stderr())
	}
	if n := len(r.api.Requests()); n != before {
		t.Errorf("the rerun sent %d requests to the API, want none", n-before)
	}
	if !strings.Contains(again.stderr(), "session "+session+" of this task is owed a resume that is held") {
		t.Errorf("the rerun does not say the session's resume is held:\n%s", again.stderr())
	}
	if n := r.launches(); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}

// conversations counts the distinct sessions the task's agent requests
// carried (the CLI's session id), or the fresh starts when the CLI sends
// none.
func (r *realEnv) conversations() int {
	ids, fresh := map[string]bool{}, 0
	for _, q := range r.api.AgentRequests() {
		if !strings.Contains(q.FirstUser, realPrompt) {
			continue
		}
		if q.Session != "" {
			ids[q.Session] = true
		}
		if q.Replies == 0 && !q.Contains(continuationMark) {
			fresh++
		}
	}
	if len(ids) > 0 {
		return len(ids)
	}
	return fresh
}

// earlyKill (CLIs that write their conversation lazily: Claude Code):
// killed while its first request waits on the model, before it wrote the
// conversation down. Its resume cannot work ("No conversation found"), and
// nothing ran: the task runs again once as a new session, completes, and
// supervise exits 0, without blaming the hooks.
func (r *realEnv) earlyKill() {
	t := r.t
	if r.cli.transcript == nil {
		t.Skip(r.cli.bin + " writes its conversation at once: a kill cannot lose it")
	}
	var first sync.Once
	r.answer(func(q mockapi.Request) mockapi.Reply {
		stall := false
		if q.Agent {
			first.Do(func() { stall = true })
		}
		if stall {
			return mockapi.Reply{Kind: mockapi.Stall}
		}
		if !q.Agent {
			return mockapi.Reply{Kind: mockapi.Text, Text: "Title"}
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
	})
	sv := r.run()
	session, pid := r.waitSession("in_turn", "")
	r.waitRequest("the task's first API request", func(q mockapi.Request) bool { return strings.Contains(q.FirstUser, realPrompt) })
	if r.cli.transcript(r, session) {
		t.Skipf("%s wrote its transcript before its first answer: this version cannot lose the conversation this way", r.cli.bin)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	if code := r.wait(sv, 150*time.Second); code != 0 {
		t.Fatalf("supervise exit code %d, want 0 (the task run again once)\n%s", code, sv.stderr())
	}
	errs := sv.stderr()
	if !strings.Contains(errs, "starting the task again once, as a new session") {
		t.Errorf("supervise did not start the task again for the lost conversation:\n%s", errs)
	}
	if strings.Contains(errs, "hooks are not wired") {
		t.Errorf("supervise blames the hooks:\n%s", errs)
	}
	if n := r.conversations(); n != 2 {
		t.Errorf("the mock saw %d conversations, want 2 (the lost one and the rerun)", n)
	}
	if n := r.launches(); n != 3 {
		t.Errorf("%d runs, want 3 (the task, the refused resume, the task again)", n)
	}
	s, ok := r.statusAllJSON().session(session)
	if !ok || s.State != "closed" {
		t.Errorf("the lost session %s = %+v, want closed", session, s)
	}
}

// errorThenResume: the first model call fails, later ones answer. A CLI
// whose hooks report the failed turn (Claude's StopFailure) ends with its
// own status and nothing resumed; one whose turn stays open is resumed, and
// when its resume cannot find the conversation (Gemini after an API error:
// "No previous sessions found", exit 42), the task runs again once as a
// new session; either way no loop, and never "hooks are not wired".
func (r *realEnv) errorThenResume() {
	t := r.t
	var first sync.Once
	r.answer(func(q mockapi.Request) mockapi.Reply {
		fail := false
		if q.Agent {
			first.Do(func() { fail = true })
		}
		switch {
		case fail:
			return mockapi.Reply{Kind: mockapi.Error, Text: "mockapi: invalid request (the test's API error)"}
		case !q.Agent:
			return mockapi.Reply{Kind: mockapi.Text, Text: "Title"}
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
	})
	sv := r.run()
	code := r.wait(sv, 150*time.Second)
	errs := sv.stderr()
	t.Logf("API error then answers: exit %d after %d runs, %d agent requests, %d conversations", code, r.launches(), len(r.api.AgentRequests()), r.conversations())
	if strings.Contains(errs, "hooks are not wired") {
		t.Errorf("supervise blames the hooks:\n%s", errs)
	}
	if n := r.launches(); n > 3 {
		t.Errorf("%d runs, want at most 3 (the task, one resume, the task again)", n)
	}
	switch {
	case r.cli.failHook:
		if code != 1 || r.launches() != 1 {
			t.Errorf("exit %d after %d runs, want the agent's status 1 after 1 run (the hooks said the turn failed)", code, r.launches())
		}
	case strings.Contains(errs, "starting the task again once"):
		if code != 0 || r.conversations() != 2 {
			t.Errorf("the task run again: exit %d, %d conversations; want 0 and 2\n%s", code, r.conversations(), errs)
		}
	default:
		if code != 0 {
			t.Errorf("exit %d, want 0 (the resumed turn completes)\n%s", code, errs)
		}
	}
}

// runRealCLI runs every scenario for one CLI.
func runRealCLI(t *testing.T, cli realCLI) {
	// The installed package must be the pinned version (its package.json:
	// running the CLI for --version costs a Node start).
	if b, err := os.ReadFile(filepath.Join("realcli", "node_modules", cli.pkg, "package.json")); err == nil {
		var pkg struct{ Version string }
		if json.Unmarshal(b, &pkg) != nil || pkg.Version != cli.version {
			t.Fatalf("%s %s is installed, want %s: run integration/realcli/install.sh", cli.pkg, pkg.Version, cli.version)
		}
	}
	for _, sc := range []struct {
		name string
		run  func(*realEnv)
	}{
		{"happy", (*realEnv).happy},
		{"kill9", (*realEnv).killOnce},
		{"kill9twice", (*realEnv).killTwice},
		{"apierror", (*realEnv).apiError},
		{"sigterm", (*realEnv).sigterm},
		{"heldrerun", (*realEnv).heldRerun},
		{"earlykill", (*realEnv).earlyKill},
		{"errorthenresume", (*realEnv).errorThenResume},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			r := newRealEnv(t, cli)
			sc.run(r)
			t.Logf("summary %s %s: %s", cli.bin, sc.name, r.summary())
		})
	}
}

// Claude Code: examples/claude-code/settings.json as ~/.claude/settings.json,
// the task `claude -p TASK`, resumed by `claude -p -r {session} {message}`.
func TestRealClaudeCode(t *testing.T) {
	t.Parallel()
	runRealCLI(t, claudeCodeCLI())
}

// claudeCodeCLI is the CLI as TestRealClaudeCode sets it up (also used by the chaos test).
func claudeCodeCLI() realCLI {
	return realCLI{
		bin:      "claude",
		pkg:      "@anthropic-ai/claude-code",
		version:  "2.1.197",
		example:  "claude-code",
		install:  map[string]string{"claude-code/settings.json": ".claude/settings.json"},
		task:     []string{"claude", "-p"},
		template: "claude -p -r {session} {message}",
		mock:     mockapi.Anthropic,
		failHook: true,
		transcript: func(r *realEnv, session string) bool {
			m, _ := filepath.Glob(filepath.Join(r.home, ".claude", "projects", "*", session+".jsonl"))
			for _, p := range m {
				if fi, err := os.Stat(p); err == nil && fi.Size() > 0 {
					return true
				}
			}
			return false
		},
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
	}
}

// Codex CLI: examples/codex/config.toml and hooks.json in ~/.codex, the
// hooks trusted as `codex` records it after "Trust all and continue", the
// task `codex exec TASK`, resumed by `codex exec resume {session} {message}`.
func TestRealCodex(t *testing.T) {
	t.Parallel()
	runRealCLI(t, codexCLI())
}

// codexCLI is the CLI as TestRealCodex sets it up (also used by the chaos test).
func codexCLI() realCLI {
	return realCLI{
		bin:      "codex",
		pkg:      "@openai/codex",
		version:  "0.171.0",
		example:  "codex",
		install:  map[string]string{"codex/hooks.json": ".codex/hooks.json"},
		task:     []string{"codex", "exec"},
		template: "codex exec resume {session} {message}",
		mock:     mockapi.OpenAI,
		env: func(url string) []string {
			return []string{"MOCK_OPENAI_API_KEY=sk-mock", "OPENAI_API_KEY=", "RUST_LOG=warn"}
		},
		setup: func(r *realEnv) {
			hooks, err := os.ReadFile(filepath.Join("..", "examples", "codex", "hooks.json"))
			if err != nil {
				r.t.Fatal(err)
			}
			if sum := fmt.Sprintf("%x", sha256.Sum256(hooks)); sum != codexTrustedHooks {
				r.t.Fatalf("examples/codex/hooks.json changed (sha256 %s): Codex makes changed hooks untrusted. "+
					"Ask the pinned codex for the new hashes: with HOME a temporary directory whose .codex/hooks.json "+
					"is the new file, run `codex app-server` and send it, one line each on stdin, "+
					`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"t","version":"1"}}}, `+
					`{"jsonrpc":"2.0","method":"initialized"} and `+
					`{"jsonrpc":"2.0","id":2,"method":"hooks/list","params":{"cwd":"/tmp/somedir"}}; `+
					"the answer with id 2 gives each hook's key (<path>:<event>:0:0) and currentHash. "+
					"Copy the hashes into codexHookTrust and the file's sha256 into codexTrustedHooks", sum)
			}
			example, err := os.ReadFile(filepath.Join("..", "examples", "codex", "config.toml"))
			if err != nil {
				r.t.Fatal(err)
			}
			// The user's own settings: the mock as the model provider, no
			// update check or analytics, then the example unchanged, then
			// what trusting the project and the hooks once records.
			var b strings.Builder
			fmt.Fprintf(&b, "model = \"gpt-mock\"\nmodel_provider = \"mock\"\ncheck_for_update_on_startup = false\n\n")
			fmt.Fprintf(&b, "[model_providers.mock]\nname = \"mock\"\nbase_url = %q\nwire_api = \"responses\"\nenv_key = \"MOCK_OPENAI_API_KEY\"\n\n", r.api.URL()+"/v1")
			fmt.Fprintf(&b, "[analytics]\nenabled = false\n\n%s\n", example)
			fmt.Fprintf(&b, "[projects.%q]\ntrust_level = \"trusted\"\n\n", r.proj)
			for _, h := range codexHookTrust {
				fmt.Fprintf(&b, "[hooks.state.%q]\ntrusted_hash = %q\n\n", filepath.Join(r.home, ".codex", "hooks.json")+":"+h[0]+":0:0", h[1])
			}
			writeFile(r.t, filepath.Join(r.home, ".codex", "config.toml"), b.String())
			// Nothing but the model API: no plugin or app sync (they call
			// github.com and chatgpt.com), in the trusted project's config.
			writeFile(r.t, filepath.Join(r.proj, ".codex", "config.toml"), "[features]\nplugins = false\n"+
				"remote_plugin = false\napps = false\nplugin_sharing = false\nin_app_updates = false\n")
			// codex exec runs only in a Git repository (a trusted folder is
			// not enough in 0.171.0) unless given --skip-git-repo-check.
			if out, err := exec.Command("git", "init", "-q", r.proj).CombinedOutput(); err != nil {
				r.t.Fatalf("git init: %v\n%s", err, out)
			}
		},
	}
}

// Gemini CLI: examples/gemini/settings.json merged into
// ~/.gemini/settings.json, the workspace trusted through
// GEMINI_CLI_TRUST_WORKSPACE, the task `gemini -p TASK`, resumed by
// `gemini -r {session} -p {message}`.
func TestRealGemini(t *testing.T) {
	t.Parallel()
	runRealCLI(t, geminiCLI())
}

// geminiCLI is the CLI as TestRealGemini sets it up (also used by the chaos test).
func geminiCLI() realCLI {
	return realCLI{
		bin:      "gemini",
		pkg:      "@google/gemini-cli",
		version:  "0.61.0",
		example:  "gemini",
		task:     []string{"gemini", "-p"},
		template: "gemini -r {session} -p {message}",
		mock:     mockapi.Gemini,
		env: func(url string) []string {
			return []string{"GEMINI_API_KEY=mock", "GOOGLE_GEMINI_BASE_URL=" + url, "GOOGLE_API_KEY=",
				"GOOGLE_GENAI_USE_VERTEXAI=", "GOOGLE_CLOUD_PROJECT=", "GEMINI_CLI_TRUST_WORKSPACE=true",
				"GEMINI_CLI_NO_RELAUNCH=true"}
		},
		setup: func(r *realEnv) {
			b, err := os.ReadFile(filepath.Join("..", "examples", "gemini", "settings.json"))
			if err != nil {
				r.t.Fatal(err)
			}
			// The user's settings: the example's hooks unchanged, plus an
			// API key as the auth method, no usage statistics or
			// telemetry, and the shell tool allowed (headless mode
			// cannot ask).
			var settings map[string]any
			if err := json.Unmarshal(b, &settings); err != nil {
				r.t.Fatal(err)
			}
			settings["security"] = map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}
			settings["privacy"] = map[string]any{"usageStatisticsEnabled": false}
			settings["telemetry"] = map[string]any{"enabled": false}
			settings["tools"] = map[string]any{"allowed": []string{"run_shell_command"}}
			out, _ := json.MarshalIndent(settings, "", "  ")
			writeFile(r.t, filepath.Join(r.home, ".gemini", "settings.json"), string(out))
		},
	}
}

// codexTrustedHooks is the sha256 of the examples/codex/hooks.json that
// codexHookTrust trusts: the currentHash values Codex 0.171.0 gives its
// hooks (what it writes to config.toml as trusted_hash after "Trust all
// and continue"; keys "<path>:<event>:<group>:<handler>"; the hash does not
// depend on the path).
const codexTrustedHooks = "484680504ca675fbe1848280be63b528370f7c7fa4e31681a628f9a1196113f0"

var codexHookTrust = [][2]string{
	{"session_start", "sha256:e8b3b2a94e0886baa06b61166453763ffac8cf31fd2cff676509528908c60f66"},
	{"user_prompt_submit", "sha256:ad4b3e671db6a8a85f493f701cc94eb5a7672e797f8d3a1535fa10ac21dc8f72"},
	{"pre_tool_use", "sha256:182f630874f084e169f10d97b38fd7fa77bf88868a3ab2c9c3a858e2a0c27c1f"},
	{"post_tool_use", "sha256:8a7dce3fca0b4caeb3bc626318db82a863e948bf371f586b1c55e9dc5c66cfc6"},
	{"permission_request", "sha256:f2ad744a5352bb92565c886425e1b328b54ce87ef12b2a4f7b7085ae3f336ccf"},
	{"stop", "sha256:349835dc7b2b48ae0581ed5381ddd455e7d35aa1759a47f89d189bc294c0bac9"},
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
