package supervisor

import (
	"log/slog"
	"strings"
	"testing"
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
