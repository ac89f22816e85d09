package supervisor

import (
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// The agent's environment under --api-proxy on: the base URLs are the
// proxy's (supervise's own are forwarded to, never passed down), and
// 127.0.0.1 is in NO_PROXY so an HTTP(S)_PROXY of the agent's does not
// route the proxy's requests elsewhere.
func TestProxyEnv(t *testing.T) {
	s := &Supervisor{cfg: Config{APIProxy: true}}
	s.log = slog.New(slog.DiscardHandler)
	s.px.c = make(chan proxied, 1)
	env := s.startProxy(1, []string{"PATH=/bin", "ANTHROPIC_BASE_URL=https://gw.example", "NO_PROXY=corp.example", "HTTPS_PROXY=http://corp:3128"})
	defer s.stopProxy()
	if s.px.p == nil {
		t.Fatal("no proxy started")
	}
	got := map[string][]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = append(got[k], v)
	}
	if a := got["ANTHROPIC_BASE_URL"]; len(a) != 1 || !strings.HasPrefix(a[0], "http://127.0.0.1:") {
		t.Errorf("ANTHROPIC_BASE_URL = %q, want the proxy's alone", a)
	}
	for _, k := range []string{"OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"} {
		if len(got[k]) != 1 || !strings.HasPrefix(got[k][0], "http://127.0.0.1:") {
			t.Errorf("%s = %q", k, got[k])
		}
	}
	if n := got["NO_PROXY"]; len(n) != 1 || n[0] != "corp.example,127.0.0.1" {
		t.Errorf("NO_PROXY = %q", n)
	}
	if n := got["no_proxy"]; len(n) != 1 || n[0] != "127.0.0.1" {
		t.Errorf("no_proxy = %q", n)
	}
	if got["HTTPS_PROXY"][0] != "http://corp:3128" || got["PATH"][0] != "/bin" {
		t.Errorf("other variables changed: %v", got)
	}
}

// The proxy's refusal callback answers from the snapshot the loop
// publishes: a session parked for --max-tokens by name, every session once
// the state dir's --max-tokens-total is spent, each with the command that
// lifts it; safe from many goroutines while the loop publishes. The
// state dir's spend is journaled and read back at boot.
func TestRefuseModelCall(t *testing.T) {
	s := newTestSupervisorWith(t, Config{Name: "t", Argv: []string{"true"}, StateDir: t.TempDir(),
		MaxTokens: 100, MaxTokensTotal: 1000})
	if _, refused := s.refuseModelCall("p"); refused {
		t.Fatal("refused before any budget was spent")
	}
	parked := record.Session{ID: "p", State: record.Parked, ParkedBy: record.ParkedByBudget,
		Tokens: &record.Tokens{Input: 150, Output: 50}, Reason: "over its token budget"}
	s.step(machine.Booted{NextRun: 1, Sessions: []record.Session{parked}})
	msg, refused := s.refuseModelCall("p")
	if !refused || !strings.Contains(msg, "--max-tokens 100") || !strings.Contains(msg, "supervise resume --state-dir") {
		t.Fatalf("parked session: %q %v", msg, refused)
	}
	if _, refused := s.refuseModelCall("q"); refused {
		t.Fatal("another session refused while the state dir's budget is not spent")
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					s.refuseModelCall("p")
					s.refuseModelCall(s.proxySession())
				}
			}
		}()
	}
	s.step(machine.Booted{NextRun: 1, Sessions: []record.Session{parked}, Budget: machine.Budget{Spent: 5000, Parked: "p"}})
	close(stop)
	wg.Wait()
	msg, refused = s.refuseModelCall("q")
	if !refused || !strings.Contains(msg, "--max-tokens-total 1000") || !strings.Contains(msg, "supervise resume --state-dir") {
		t.Fatalf("spent state dir budget: %q %v", msg, refused)
	}
	if err := s.commitSync(s.putPolicy); err != nil {
		t.Fatal(err)
	}
	b, _, _, _, err := s.readBoot()
	if err != nil {
		t.Fatal(err)
	}
	if b.Budget.Spent != 5000 || b.Budget.Parked != "p" {
		t.Errorf("budget read back at boot: %+v", b.Budget)
	}
}
