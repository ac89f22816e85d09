package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

// budgetAgent is an agent that calls the model through the API proxy in
// one session of a fixed id, three times a run, then dies (exit 1): under
// --restart on-failure it is relaunched again and again, the way a CLI
// whose relaunch opens a new turn in the same session would be. Each
// answer reports 600 tokens. Every call's answer goes to $OUT/run-N.
const budgetAgent = `n=0
while [ $n -lt 3 ]; do
  n=$((n+1))
  curl -sS -N --max-time 30 -X POST "$ANTHROPIC_BASE_URL/v1/messages" \
    -H 'X-Claude-Code-Session-Id: budget-s1' -H 'content-type: application/json' \
    -H 'anthropic-version: 2023-06-01' -H 'x-api-key: test' \
    -d '{"model":"m","max_tokens":10,"stream":true,"tools":[{"name":"Bash","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"go"}]}' \
    >> "$OUT/run-$SUPERVISE_RUN" 2>&1
  echo >> "$OUT/run-$SUPERVISE_RUN"
done
exit 1`

// budgetRun starts supervise --max-tokens 1000 --restart on-failure over
// budgetAgent and waits for ten relaunches; it returns the env, the
// supervise, the mock and the answers' directory.
func budgetRun(t *testing.T) (*env, *proc, *mockapi.Server, string) {
	t.Helper()
	api := mockapi.Anthropic(func(q mockapi.Request) mockapi.Reply {
		return mockapi.Reply{Kind: mockapi.Text, Text: "ok", InputTokens: 400, OutputTokens: 200}
	})
	t.Cleanup(api.Close)
	e := newEnv(t)
	out := filepath.Join(e.dir, "answers")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	e.set("ANTHROPIC_BASE_URL="+api.URL(), "OUT="+out, "HTTP_PROXY=", "HTTPS_PROXY=", "http_proxy=", "https_proxy=",
		"ALL_PROXY=", "NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1")
	sv := e.start("run", "--api-proxy", "on", "--max-tokens", "1000", "--restart", "on-failure",
		"--backoff-initial", "10ms", "--backoff-max", "100ms", "--guard-trip", "0", "--", "sh", "-c", budgetAgent)
	waitFor(t, 120*time.Second, "ten relaunches", func() bool {
		st, ok := e.tryStatus()
		return ok && st.Child.Restarts >= 10
	})
	return e, sv, api, out
}

// tryStatus is status, or false while it cannot be read (supervise not
// up yet).
func (e *env) tryStatus() (status, bool) {
	var st status
	out, err := exec.Command(superviseBin, "status", "--json", "--state-dir", e.stateDir).Output()
	if err != nil || json.Unmarshal(out, &st) != nil {
		return st, false
	}
	return st, true
}

func budgetSession(t *testing.T, e *env) (state, reason string, tokens int64) {
	t.Helper()
	for _, s := range e.status().Sessions {
		if s.ID == "budget-s1" {
			if s.Tokens != nil {
				tokens = s.Tokens.Input + s.Tokens.Output
			}
			return s.State, s.Reason, tokens
		}
	}
	t.Fatalf("no session budget-s1 in status: %+v", e.status().Sessions)
	return "", "", 0
}

// A session parked for --max-tokens stays parked over ten relaunches of
// the agent under --restart on-failure: the relaunched agent's model calls
// in it never open a turn that lifts the park.
func TestBudgetParkHoldsAcrossRelaunches(t *testing.T) {
	t.Parallel()
	e, sv, _, _ := budgetRun(t)
	state, reason, tokens := budgetSession(t, e)
	if state != "parked" || !strings.Contains(reason, "--max-tokens 1000") {
		t.Errorf("after ten relaunches: %s (%q), %d tokens; want parked for its budget\n%s", state, reason, tokens, sv.stderr())
	}
	e.stop(sv)
}

// The budget the agent cannot outspend: over ten relaunches the parked
// session's tokens stay under twice --max-tokens, since the proxy answers
// its model calls itself (the agent sees the refusal, naming the budget
// and the command that lifts it), never forwarding them.
// (apiproxy.Config.Refuse, wired in supervisor/proxy.go to
// Supervisor.refuseModelCall.)
func TestBudgetRefusedAcrossRelaunches(t *testing.T) {
	t.Parallel()
	e, sv, api, out := budgetRun(t)
	_, _, tokens := budgetSession(t, e)
	if tokens >= 2000 {
		t.Errorf("the parked session spent %d tokens over ten relaunches, want under twice --max-tokens 1000", tokens)
	}
	forwarded := 0
	for _, q := range api.Requests() {
		if q.Agent {
			forwarded++
		}
	}
	t.Logf("over ten relaunches: %d tokens, %d model calls forwarded", tokens, forwarded)
	if forwarded > 3 {
		t.Errorf("%d model calls forwarded to the API, want at most 3 (the first run's)", forwarded)
	}
	files, _ := filepath.Glob(filepath.Join(out, "run-*"))
	seen := false
	for _, f := range files {
		b, _ := os.ReadFile(f)
		seen = seen || (strings.Contains(string(b), "--max-tokens") && strings.Contains(string(b), "supervise resume"))
	}
	if !seen {
		t.Errorf("no answer the agent got names the budget and supervise resume (%d runs' answers)", len(files))
	}
	e.stop(sv)
}
