package integration

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

// Issue 30 item 4 and issue 31 item 6 with the real Codex CLI: its
// built-in provider and its default model (no -m, no model_provider),
// under supervise --api-proxy on with docs/proxy.md's Codex line
// (examples/codex/codex-proxy). Codex's default model sends Responses
// Lite requests (X-Openai-Internal-Codex-Responses-Lite: true, its tools
// as an additional_tools input item, no tools field); the proxy takes
// them as the agent loop's, so the session is in_turn before a kill -9
// and resumed by its thread id. No process's command line holds the
// proxy's URL.

// forged is the session another local user's request names.
const forged = "chosen-by-another-user"

// codexDefault is Codex as a user with an API key and no configuration
// of a provider runs it, through codex-proxy.
func codexDefault() realCLI {
	examples, _ := filepath.Abs(filepath.Join("..", "examples", "codex"))
	return realCLI{
		bin:      "codex",
		pkg:      "@openai/codex",
		version:  "0.171.0",
		example:  "codex",
		task:     []string{"codex-proxy"},
		template: "codex-proxy resume {session} {message}",
		mock:     mockapi.OpenAI,
		proxyDoc: true,
		env: func(url string) []string {
			// supervise's own OPENAI_BASE_URL is where the proxy forwards:
			// the mock, in place of https://api.openai.com/v1.
			return []string{"OPENAI_API_KEY=sk-mock", "OPENAI_BASE_URL=" + url + "/v1", "RUST_LOG=warn",
				"PATH=" + examples + ":" + realCLIDir() + ":" + filepath.Dir(superviseBin) + ":" + os.Getenv("PATH")}
		},
		setup: func(r *realEnv) {
			writeFile(r.t, filepath.Join(r.home, ".codex", "config.toml"), "check_for_update_on_startup = false\n\n"+
				"[analytics]\nenabled = false\n\n[projects."+`"`+r.proj+`"`+"]\ntrust_level = \"trusted\"\n")
			writeFile(r.t, filepath.Join(r.proj, ".codex", "config.toml"), "[features]\nplugins = false\n"+
				"remote_plugin = false\napps = false\nplugin_sharing = false\nin_app_updates = false\n")
			gitInit(r)
		},
	}
}

func TestRealCodexDefaultModelProxy(t *testing.T) {
	t.Parallel()
	r := newRealEnv(t, codexDefault())
	lite := func(q mockapi.Request) bool {
		return q.Header.Get("X-Openai-Internal-Codex-Responses-Lite") == "true" && q.Contains(`"additional_tools"`)
	}
	r.answer(func(q mockapi.Request) mockapi.Reply {
		switch {
		case q.Session == forged:
			// The provider refuses a caller without the agent's key.
			return mockapi.Reply{Kind: mockapi.Error, Status: 401, Text: "Incorrect API key provided"}
		case continuation(q):
			return mockapi.Reply{Kind: mockapi.Text, Text: "Checked: the parser is renamed."}
		case lite(q) || q.Agent:
			return mockapi.Reply{Kind: mockapi.Stall}
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "Title"}
	})
	sv := r.run("--api-proxy", "on")
	var first mockapi.Request
	waitFor(t, 120*time.Second, "the task's request through the proxy", func() bool {
		for _, q := range r.api.Requests() {
			if strings.Contains(q.FirstUser, realPrompt) {
				first = q
				return true
			}
		}
		return false
	})
	if !lite(first) || first.Agent {
		t.Logf("the task's first request is not the Responses Lite shape (lite %v, tools field %v): the test no longer covers it",
			lite(first), first.Agent)
	}
	if strings.Contains(string(first.Body), `"model":"gpt-mock"`) {
		t.Errorf("the request names a configured model, want Codex's default")
	}
	session, pid := r.waitSession("in_turn", "")
	if first.Session == "" || session != first.Session {
		t.Errorf("status shows session %q in_turn, the request carried thread %q", session, first.Session)
	}
	// R7: the proxy's URL is in the profile codex-proxy wrote, mode 0600,
	// and on no process's command line.
	profiles, _ := filepath.Glob(filepath.Join(r.home, ".codex", "supervise-proxy-*.config.toml"))
	if len(profiles) != 1 {
		t.Fatalf("profiles %q, want one", profiles)
	}
	fi, err := os.Stat(profiles[0])
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("profile %s: %v, mode %v, want 0600", profiles[0], err, fi.Mode().Perm())
	}
	b, _ := os.ReadFile(profiles[0])
	url := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(string(b)), `openai_base_url = "`), `"`)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/openai") {
		t.Fatalf("profile holds %q, want the proxy's URL", b)
	}
	secret := strings.TrimSuffix(url, "/openai")
	secret = secret[strings.LastIndex(secret, "/")+1:]
	if n := argvHolding(secret); n > 0 {
		t.Errorf("%d processes hold the proxy's secret on their command line", n)
	}
	// Were the URL known to another user anyway (R7): its request naming
	// a session of its choice gets the provider's 401, which opens no
	// turn and names no session.
	req, _ := http.NewRequest("POST", url+"/responses", strings.NewReader(
		`{"model":"gpt-6.2-sol","stream":true,"tools":[{"type":"function","name":"shell"}],"input":[{"type":"message","role":"user","content":"x"}]}`))
	req.Header.Set("Session-Id", forged)
	req.Header.Set("Authorization", "Bearer sk-not-the-agents")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("the forged request got %s, want the provider's 401", resp.Status)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	var c mockapi.Request
	waitFor(t, 120*time.Second, "the continuation in an API request", func() bool {
		for _, q := range r.api.Requests() {
			if continuation(q) {
				c = q
				return true
			}
		}
		return false
	})
	if c.Session != session {
		t.Errorf("the continuation went to thread %q, want %q", c.Session, session)
	}
	if code := r.wait(sv, 150*time.Second); code != 0 {
		t.Fatalf("supervise exit code %d, want 0\n%s", code, sv.stderr())
	}
	st := r.statusAllJSON()
	if len(st.Runs) != 2 {
		t.Errorf("%d runs, want 2 (the task and its resume)", len(st.Runs))
	}
	done := false
	for _, s := range st.Sessions {
		done = done || s.ID == session && s.State == "idle" && s.LastOutcome == "completed"
	}
	if !done {
		t.Errorf("sessions %+v, want %s idle, its turn completed", st.Sessions, session)
	}
	for _, s := range st.Sessions {
		if s.ID == forged {
			t.Errorf("a request the provider refused named a session: %+v", s)
		}
	}
	if strings.Contains(sv.stderr(), forged) {
		t.Errorf("supervise's log names the forged session:\n%s", sv.stderr())
	}
	if strings.Contains(sv.stderr(), "hooks are not wired") {
		t.Errorf("supervise blames the hooks although the proxy saw the session:\n%s", sv.stderr())
	}
	t.Logf("summary codex default model proxy kill9: %s", r.summary())
}

// argvHolding counts the processes whose command line contains s.
func argvHolding(s string) int {
	n := 0
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), s) {
			n++
		}
	}
	return n
}

// gitInit makes r's project a Git repository (codex exec runs only in one).
func gitInit(r *realEnv) {
	if out, err := exec.Command("git", "init", "-q", r.proj).CombinedOutput(); err != nil {
		r.t.Fatalf("git init: %v\n%s", err, out)
	}
}
