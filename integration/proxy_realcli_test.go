package integration

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

// Issue 23 with the real Claude Code and no hooks at all: supervise learns
// the session, its turns and their ends, rate limits, usage and stalls from
// the model-API proxy alone (--api-proxy on), in front of the mock.

// claudeNoHooks is Claude Code as TestRealClaudeCode sets it up, minus the
// example's hooks: nothing reports a marker but the proxy.
func claudeNoHooks() realCLI {
	cli := claudeCodeCLI()
	cli.install = nil
	return cli
}

// Gemini CLI names no session in its requests: without hooks it cannot be
// resumed by id (supervise never resumes "latest"). With its hooks and the
// proxy together, the traffic is the hooks' session: one session, resumed
// by its id after kill -9, with the proxy's usage on it.
func TestRealGeminiHooksAndProxy(t *testing.T) {
	t.Parallel()
	r := newRealEnv(t, geminiCLI())
	proxyKill9(r)
	st := r.statusAllJSON()
	if len(st.Sessions) != 1 {
		t.Errorf("%d sessions, want 1 (hooks and proxy tell of one): %+v", len(st.Sessions), st.Sessions)
	} else if st.Sessions[0].Tokens == nil {
		t.Errorf("the hooks' session has no tokens from the proxy: %+v", st.Sessions[0])
	}
	t.Logf("summary gemini hooks+proxy kill9: %s", r.summary())
}

// codexNoHooks is Codex CLI as TestRealCodex sets it up, minus its hooks,
// with docs/proxy.md's one line: Codex takes its provider's base URL from
// configuration, so the task and the template pass the proxy's
// OPENAI_BASE_URL on its command line, through sh -c ({session} and
// {message} stay arguments, never shell text).
func codexNoHooks() realCLI {
	cli := codexCLI()
	cli.install, cli.proxyDoc = nil, true
	cli.task = []string{"sh", "-c", `exec codex exec -c model_providers.mock.base_url="$OPENAI_BASE_URL" "$0"`}
	cli.template = `sh -c "exec codex exec -c model_providers.mock.base_url=\"\$OPENAI_BASE_URL\" resume \"\$0\" \"\$1\"" {session} {message}`
	env := cli.env
	cli.env = func(url string) []string { return append(env(url), "OPENAI_BASE_URL="+url+"/v1") }
	return cli
}

// Codex CLI with no hooks: its session header names the thread `codex exec
// resume` takes.
func TestRealCodexProxy(t *testing.T) {
	t.Parallel()
	r := newRealEnv(t, codexNoHooks())
	proxyKill9(r)
	t.Logf("summary codex proxy kill9: %s", r.summary())
}

// The real Codex exits as soon as it has read response.completed, without
// waiting for the stream's end. Against a provider whose stream ends after
// that, its finished task is a clean end: one run, exit 0. Before the proxy
// waited for its handlers at the death, it was taken for a mid-turn death,
// resumed, and parked the second time (exit 5), every time the stream's end
// came after Codex's exit; CI saw it once in TestRealCodexProxy.
func TestRealCodexProxyExitAtFinalAnswer(t *testing.T) {
	t.Parallel()
	r := newRealEnv(t, codexNoHooks())
	r.answer(func(q mockapi.Request) mockapi.Reply {
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done: the tests pass.", HoldEnd: q.Agent}
	})
	sv := r.run("--api-proxy", "on")
	if code := r.wait(sv, 150*time.Second); code != 0 {
		t.Fatalf("supervise exit code %d, want 0 (Codex finished its task)\n%s", code, sv.stderr())
	}
	st := r.statusAllJSON()
	if len(st.Runs) != 1 || st.Runs[0].Dirty {
		t.Errorf("runs %+v, want one clean run", st.Runs)
	}
	for _, s := range st.Sessions {
		if s.State != "idle" || s.CrashCount != 0 {
			t.Errorf("session %s: %s (crashes %d, %q), want idle", s.ID, s.State, s.CrashCount, s.Reason)
		}
	}
}

func TestRealClaudeProxy(t *testing.T) {
	t.Parallel()
	for _, sc := range []struct {
		name string
		run  func(*realEnv)
	}{
		{"kill9", proxyKill9},
		{"ratelimit", proxyRateLimit},
		{"tokens", proxyTokens},
		{"budget", proxyBudget},
		{"stall", proxyStall},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			r := newRealEnv(t, claudeNoHooks())
			sc.run(r)
			t.Logf("summary claude proxy %s: %s", sc.name, r.summary())
		})
	}
}

// proxyKill9: while its request stalls, status shows the session in_turn;
// kill -9 relaunches `claude -p -r <that session>` once, the continuation
// reaches the API, and supervise exits 0.
func proxyKill9(r *realEnv) {
	t := r.t
	r.answer(func(q mockapi.Request) mockapi.Reply {
		switch {
		case !q.Agent:
			return mockapi.Reply{Kind: mockapi.Text, Text: "Title"}
		case continuation(q):
			return mockapi.Reply{Kind: mockapi.Text, Text: "Checked: the parser is renamed."}
		}
		return mockapi.Reply{Kind: mockapi.Stall}
	})
	sv := r.run("--api-proxy", "on")
	q := r.waitRequest("the task's request through the proxy", func(q mockapi.Request) bool { return strings.Contains(q.FirstUser, realPrompt) })
	session, pid := r.waitSession("in_turn", "")
	if q.Session != "" && q.Session != session {
		t.Errorf("status shows session %q, the request carried %q", session, q.Session)
	}
	r.waitTranscript(session)
	syscall.Kill(pid, syscall.SIGKILL)
	c := r.waitRequest("the continuation in an API request", continuation)
	if c.Session != "" && c.Session != session {
		t.Errorf("the continuation went to session %q, want %q", c.Session, session)
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
	if !strings.Contains(sv.stderr(), "agent took the resume") {
		t.Errorf("the resumed run's request did not take the resume:\n%s", sv.stderr())
	}
	if strings.Contains(sv.stderr(), "hooks are not wired") {
		t.Errorf("supervise blames the hooks although the proxy saw the session:\n%s", sv.stderr())
	}
}

// proxyRateLimit: a 429 with retry-after 30: within 15 s the session is
// waiting with retry_at about 30 s ahead, --phase-timeout model=10s does
// not kill it, and the turn completes once Claude retries.
func proxyRateLimit(r *realEnv) {
	t := r.t
	limited := make(chan struct{})
	var once bool
	r.answer(func(q mockapi.Request) mockapi.Reply {
		if !q.Agent {
			return mockapi.Reply{Kind: mockapi.Text, Text: "Title"}
		}
		if !once {
			once = true
			close(limited)
			return mockapi.Reply{Kind: mockapi.Limit, RetryAfter: 30 * time.Second}
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
	})
	sv := r.run("--api-proxy", "on", "--phase-timeout", "model=10s")
	<-limited
	at := time.Now()
	var retryAt time.Time
	waitFor(t, 15*time.Second, "the session waiting with retry_at", func() bool {
		st, ok := r.tryStatus()
		if !ok {
			return false
		}
		for _, s := range st.Sessions {
			if s.State == "waiting" && s.RetryAt != nil {
				retryAt = *s.RetryAt
				return true
			}
		}
		return false
	})
	if d := retryAt.Sub(at); d < 20*time.Second || d > 40*time.Second {
		t.Errorf("retry_at is %s after the 429, want about 30s", d.Round(time.Second))
	}
	if code := r.wait(sv, 150*time.Second); code != 0 {
		t.Fatalf("supervise exit code %d, want 0 (nothing killed during the wait)\n%s", code, sv.stderr())
	}
	if n := r.launches(); n != 1 {
		t.Errorf("%d runs, want 1: the wait was not a hang", n)
	}
}

// proxyTokens: a completed task's session shows its tokens.
func proxyTokens(r *realEnv) {
	t := r.t
	r.answer(func(q mockapi.Request) mockapi.Reply {
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done.", InputTokens: 12, OutputTokens: 7}
	})
	sv := r.run("--api-proxy", "on")
	if code := r.wait(sv, 150*time.Second); code != 0 {
		t.Fatalf("supervise exit code %d, want 0\n%s", code, sv.stderr())
	}
	st := r.statusAllJSON()
	if len(st.Sessions) != 1 || st.Sessions[0].Tokens == nil {
		t.Fatalf("sessions %+v, want one with tokens", st.Sessions)
	}
	tok := st.Sessions[0].Tokens
	agent := len(r.api.AgentRequests())
	if tok.Output < int64(7*agent) || tok.Input < int64(12*agent) {
		t.Errorf("tokens %+v after %d agent answers of 12 in, 7 out", *tok, agent)
	}
}

// proxyBudget: --max-tokens 15 with a 30-token answer parks the session
// for its budget and exits 5.
func proxyBudget(r *realEnv) {
	t := r.t
	r.answer(func(q mockapi.Request) mockapi.Reply {
		if !q.Agent {
			return mockapi.Reply{Kind: mockapi.Text, Text: "Title", InputTokens: 1, OutputTokens: 1}
		}
		return mockapi.Reply{Kind: mockapi.Tool, Command: "sleep 30", InputTokens: 10, OutputTokens: 20}
	})
	sv := r.run("--api-proxy", "on", "--max-tokens", "15")
	if code := r.wait(sv, 150*time.Second); code != 5 {
		t.Fatalf("supervise exit code %d, want 5\n%s", code, sv.stderr())
	}
	st := r.statusAllJSON()
	parked := false
	for _, s := range st.Sessions {
		parked = parked || s.State == "parked" && strings.Contains(s.Reason, "--max-tokens 15")
	}
	if !parked {
		t.Errorf("no session parked for its budget: %+v", st.Sessions)
	}
	if n := r.launches(); n != 1 {
		t.Errorf("%d runs, want 1: a budget park is never resumed", n)
	}
}

// proxyStall: --stream-stall 3s over a stream of pings stops the agent
// (reason stream-stall), resumes it once, and the resumed turn completes.
func proxyStall(r *realEnv) {
	t := r.t
	r.answer(func(q mockapi.Request) mockapi.Reply {
		switch {
		case !q.Agent:
			return mockapi.Reply{Kind: mockapi.Text, Text: "Title"}
		case continuation(q):
			return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
		}
		return mockapi.Reply{Kind: mockapi.Pings, Every: 500 * time.Millisecond}
	})
	sv := r.run("--api-proxy", "on", "--stream-stall", "3s")
	if code := r.wait(sv, 150*time.Second); code != 0 {
		t.Fatalf("supervise exit code %d, want 0\n%s", code, sv.stderr())
	}
	st := r.statusAllJSON()
	if len(st.Runs) != 2 || !strings.Contains(st.Runs[len(st.Runs)-1].Reason+st.Runs[0].Reason, "stream-stall") {
		t.Errorf("runs %+v, want 2, the first ended stream-stall", st.Runs)
	}
	if !strings.Contains(sv.stderr(), "stream-stall") {
		t.Errorf("stderr does not name the stall:\n%s", sv.stderr())
	}
}
