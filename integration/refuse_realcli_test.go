package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/apiproxy"
	"github.com/supervise-dev/supervise/integration/mockapi"
)

// Issue 29 item 5, the proxy's side: a call the supervisor refuses (a
// session over its budget) is answered by the proxy itself, in the
// provider's own error format, and each pinned CLI stops on it at once:
// it exits non-zero, prints the message (which names the budget and the
// command that lifts it), and sends no retry. Nothing reaches the API.

// refusalText is what the supervisor's Refuse callback says.
const refusalText = "supervise: session over its token budget (--max-tokens 1000): no more model calls; " +
	"a person lifts it with: supervise resume --state-dir /x/state SESSION"

func TestRealRefused(t *testing.T) {
	t.Parallel()
	codex := codexCLI()
	codex.install = nil // no hooks: nothing but the proxy
	for _, c := range []struct {
		name string
		cli  realCLI
		argv []string
	}{
		{"claude", claudeNoHooks(), []string{"claude", "-p", realPrompt}},
		// docs/proxy.md's wiring: codex-proxy writes the proxy's URL into
		// a private profile, for the test's own provider "mock".
		{"codex", codex, []string{"codex-proxy", realPrompt}},
		{"gemini", geminiCLI(), []string{"gemini", "-p", realPrompt}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newRealEnv(t, c.cli)
			r.answer(func(mockapi.Request) mockapi.Reply { return mockapi.Reply{Kind: mockapi.Text, Text: "Done."} })
			var asked atomic.Int32
			var mu sync.Mutex
			var events []apiproxy.Event
			upstream := map[string]string{"ANTHROPIC_BASE_URL": r.api.URL(), "OPENAI_BASE_URL": r.api.URL() + "/v1",
				"GOOGLE_GEMINI_BASE_URL": r.api.URL()}
			p, err := apiproxy.Start(apiproxy.Config{
				Env:  func(k string) string { return upstream[k] },
				Sink: func(e apiproxy.Event) { mu.Lock(); events = append(events, e); mu.Unlock() },
				Refuse: func(string) (string, bool) {
					asked.Add(1)
					return refusalText, true
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			code, out, took := runCLI(t, r, c.argv, append(p.Env(), "CODEX_PROXY_PROVIDER=mock"))
			mu.Lock()
			defer mu.Unlock()
			shown := ""
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "supervise resume") {
					shown = l
					break
				}
			}
			t.Logf("summary %s refused: exit %d after %s, %d calls refused, %d reached the API; it printed: %.400s",
				c.name, code, took.Round(100*time.Millisecond), asked.Load(), len(r.api.Requests()), shown)
			if code == 0 {
				t.Errorf("%s exited 0 although every model call was refused", c.name)
			}
			if n := len(r.api.Requests()); n != 0 {
				t.Errorf("%d model calls reached the API, want 0: the proxy answers refused calls itself", n)
			}
			if !strings.Contains(out, "supervise resume") {
				t.Errorf("%s's output does not carry the refusal's message (want %q in it)", c.name, "supervise resume")
			}
			refused := 0
			for _, e := range events {
				switch e.Kind {
				case apiproxy.Refused:
					refused++
				case apiproxy.TurnBegin, apiproxy.Phase, apiproxy.TurnEnd:
					t.Errorf("a refused call changed a turn: %+v", e)
				}
			}
			if refused != int(asked.Load()) {
				t.Errorf("%d Refused events for %d refused calls", refused, asked.Load())
			}
			// No retry: the agent loop's call is refused once, plus at
			// most the CLI's side calls (none of the pinned three sends
			// one before its first turn).
			if n := asked.Load(); n < 1 || n > 2 {
				t.Errorf("%d calls refused, want 1 or 2: a CLI that retries a refusal is not stopped by it", n)
			}
		})
	}
}

// runCLI runs one agent CLI command outside supervise, in r's project with
// r's environment plus extra (later entries win), stdin /dev/null, and
// returns its exit code, its stdout and stderr together, and how long it
// took.
func runCLI(t *testing.T, r *realEnv, argv []string, extra []string) (int, string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	examples, _ := filepath.Abs(filepath.Join("..", "examples", "codex"))
	path := examples + ":" + realCLIDir() + ":" + filepath.Dir(superviseBin) + ":" + os.Getenv("PATH")
	// Look the program up in the PATH given to it.
	bin, err := lookPath(argv[0], path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, argv[1:]...)
	// TMPDIR: Gemini CLI writes an error report there.
	cmd.Env = append(append(append(os.Environ(), r.vars...), "PATH="+path, "TMPDIR="+r.dir), extra...)
	cmd.Dir = r.proj
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("%v did not exit within 150s: it did not stop on the refusal\n%s", argv, lastBytes(string(out), 2000))
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out), took
}

// lookPath finds file in the directories of path.
func lookPath(file, path string) (string, error) {
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, file)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &exec.Error{Name: file, Err: exec.ErrNotFound}
}
