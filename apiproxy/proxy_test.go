package apiproxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

// wait bounds every wait for something that must happen; it is generous,
// so that a loaded machine is never a failure.
const wait = 20 * time.Second

// recorder is a Sink that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []Event
	more   chan struct{}
}

func newRecorder() *recorder { return &recorder{more: make(chan struct{}, 1)} }

func (r *recorder) sink(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// waitFor waits until n events match keep, and returns the matching ones.
func (r *recorder) waitFor(t *testing.T, n int, keep func(Event) bool) []Event {
	t.Helper()
	deadline := time.After(wait)
	for {
		var got []Event
		for _, e := range r.all() {
			if keep == nil || keep(e) {
				got = append(got, e)
			}
		}
		if len(got) >= n {
			return got
		}
		select {
		case <-r.more:
		case <-deadline:
			t.Fatalf("waited %v for %d events, have %d: %+v", wait, n, len(got), r.all())
		}
	}
}

// fakeClock is Config.Now under the test's control.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// start runs a proxy whose upstreams are env's base URLs.
func start(t *testing.T, env map[string]string, cfg Config) (*Proxy, *recorder) {
	t.Helper()
	rec := newRecorder()
	cfg.Env = func(k string) string { return env[k] }
	cfg.Sink = rec.sink
	if cfg.Now == nil {
		cfg.Now = (&fakeClock{t: epoch}).Now
	}
	if cfg.TurnPrefix == "" {
		cfg.TurnPrefix = "t"
	}
	if cfg.Session == "" {
		cfg.Session = "run-1"
	}
	p, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, rec
}

// client is the agent: it asks for no compression (so that the test sees
// bytes as sent) and follows no redirect.
var client = &http.Client{
	Transport:     &http.Transport{DisableCompression: true},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// post sends a request through the proxy and reads the whole answer.
func post(t *testing.T, url string, h http.Header, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// claudeRequest is a Messages request as Claude Code sends it: tools
// offered (main) or not (a side request), and the results of tool calls.
func claudeRequest(main bool, results ...string) []byte {
	msgs := []any{map[string]any{"role": "user", "content": "fix the tests"}}
	for _, id := range results {
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "ok"}}})
	}
	b := map[string]any{"model": "claude-test", "stream": true, "max_tokens": 1000, "messages": msgs}
	if main {
		b["tools"] = []any{map[string]any{"name": "Bash", "input_schema": map[string]any{"type": "object"}}}
	}
	return mustJSON(b)
}

// codexRequest is a Responses request as Codex sends it.
func codexRequest(main bool, results ...string) []byte {
	input := []any{map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "fix the tests"}}}}
	for _, id := range results {
		input = append(input,
			map[string]any{"type": "function_call", "call_id": id, "name": "shell_command", "arguments": "{}"},
			map[string]any{"type": "function_call_output", "call_id": id, "output": "ok"})
	}
	b := map[string]any{"model": "gpt-test", "stream": true, "input": input}
	if main {
		b["tools"] = []any{map[string]any{"type": "function", "name": "shell_command", "parameters": map[string]any{"type": "object"}}}
	}
	return mustJSON(b)
}

// geminiRequest is a generateContent request as Gemini CLI sends it.
func geminiRequest(main, result bool) []byte {
	contents := []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "fix the tests"}}}}
	if result {
		contents = append(contents,
			map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "run_shell_command", "args": map[string]any{}}}}},
			map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{
				"id": "run_shell_command_1_0", "name": "run_shell_command", "response": map[string]any{"output": "ok"}}}}})
	}
	b := map[string]any{"contents": contents}
	if main {
		b["tools"] = []any{map[string]any{"functionDeclarations": []any{map[string]any{"name": "run_shell_command"}}}}
	}
	return mustJSON(b)
}

// strip keeps the fields a test compares.
func strip(es []Event) []Event {
	out := make([]Event, len(es))
	for i, e := range es {
		out[i] = Event{Kind: e.Kind, Provider: e.Provider, Session: e.Session, Turn: e.Turn, Tool: e.Tool,
			Detail: e.Detail, Outcome: e.Outcome, Input: e.Input, Output: e.Output, RetryAt: e.RetryAt}
	}
	return out
}

// agentScript answers like a model in a one-tool turn: the first main
// request of a turn gets a shell tool call, a request with a tool's result
// gets the final text, side requests get a title; every answer reports 20
// input and 10 output tokens.
func agentScript(q mockapi.Request) mockapi.Reply {
	switch {
	case q.Agent && !q.ToolResult:
		return mockapi.Reply{Kind: mockapi.Tool, Command: "npm test", InputTokens: 20, OutputTokens: 10}
	case q.Agent:
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done.", InputTokens: 20, OutputTokens: 10}
	}
	return mockapi.Reply{Kind: mockapi.Text, Text: "Title", InputTokens: 20, OutputTokens: 10}
}

// TestTurns drives one turn per provider through the proxy in front of
// the mock API, as each CLI sends it: a main request answered with a tool
// call, the tool's result answered with text, a side request, a second
// turn.
func TestTurns(t *testing.T) {
	for _, c := range []struct {
		name     string
		provider Provider
		mock     func(func(mockapi.Request) mockapi.Reply) *mockapi.Server
		path     string
		header   http.Header
		first    []byte // the turn's first request
		second   []byte // with the tool's result
		side     []byte
		session  string
		turn     string // the first turn's id
		tool     string
	}{
		{name: "anthropic", provider: Anthropic, mock: mockapi.Anthropic, path: "/v1/messages",
			header: http.Header{"X-Claude-Code-Session-Id": {"c26b47f2-f019-40f7-b0bd-f1fce6a84002"}, "X-Api-Key": {"sk-ant-test"}},
			first:  claudeRequest(true), second: claudeRequest(true, "toolu_mock1"), side: claudeRequest(false),
			session: "c26b47f2-f019-40f7-b0bd-f1fce6a84002", turn: "t1", tool: "Bash"},
		{name: "openai", provider: OpenAI, mock: mockapi.OpenAI, path: "/responses",
			header: http.Header{"Session-Id": {"01a2329e-e174-79b0-ba44-d95404acbe8c"}, "Authorization": {"Bearer sk-test"},
				"X-Codex-Turn-Metadata": {`{"session_id":"01a2329e-e174-79b0-ba44-d95404acbe8c","turn_id":"01a2329e-e19d-7370-bd23-e09d71cef07f","request_kind":"turn"}`}},
			first: codexRequest(true), second: codexRequest(true, "call_mock1"), side: codexRequest(false),
			session: "01a2329e-e174-79b0-ba44-d95404acbe8c", turn: "01a2329e-e19d-7370-bd23-e09d71cef07f", tool: "shell_command"},
		{name: "gemini", provider: Gemini, mock: mockapi.Gemini, path: "/v1beta/models/gemini-test:streamGenerateContent?alt=sse",
			header: http.Header{"X-Goog-Api-Key": {"AIza-test"}},
			first:  geminiRequest(true, false), second: geminiRequest(true, true), side: geminiRequest(false, false),
			session: "run-1", turn: "t1", tool: "run_shell_command"},
	} {
		t.Run(c.name, func(t *testing.T) {
			api := c.mock(agentScript)
			defer api.Close()
			env := map[string]string{"ANTHROPIC_BASE_URL": api.URL(), "OPENAI_BASE_URL": api.URL() + "/v1", "GOOGLE_GEMINI_BASE_URL": api.URL()}
			p, rec := start(t, env, Config{})
			url := p.URL(c.provider) + c.path
			usage := Event{Kind: Usage, Provider: c.provider, Session: c.session, Turn: c.turn, Input: 20, Output: 10}
			if resp, _ := post(t, url, c.header, c.first); resp.StatusCode != 200 {
				t.Fatalf("first request: %s", resp.Status)
			}
			got := strip(rec.waitFor(t, 3, nil))
			want := []Event{
				{Kind: TurnBegin, Provider: c.provider, Session: c.session, Turn: c.turn},
				usage,
				{Kind: Phase, Provider: c.provider, Session: c.session, Turn: c.turn, Tool: c.tool, Detail: "npm test"},
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("after the first request:\n got %+v\nwant %+v", got, want)
			}
			post(t, url, c.header, c.second)
			got = strip(rec.waitFor(t, 6, nil))[3:]
			want = []Event{
				{Kind: Phase, Provider: c.provider, Session: c.session, Turn: c.turn},
				usage,
				{Kind: TurnEnd, Provider: c.provider, Session: c.session, Turn: c.turn, Outcome: "completed"},
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("after the tool's result:\n got %+v\nwant %+v", got, want)
			}
			// A side request changes no turn; its tokens count.
			sidePath := c.path
			if c.provider == Gemini {
				sidePath = "/v1beta/models/gemini-test:generateContent"
			}
			post(t, p.URL(c.provider)+sidePath, c.header, c.side)
			got = strip(rec.waitFor(t, 7, nil))[6:]
			if side := (Event{Kind: Usage, Provider: c.provider, Session: c.session, Input: 20, Output: 10}); !reflect.DeepEqual(got, []Event{side}) {
				t.Fatalf("after a side request: %+v", got)
			}
			// The next main request opens the next turn.
			h := c.header.Clone()
			if c.provider == OpenAI {
				h.Set("X-Codex-Turn-Metadata", `{"turn_id":"second-turn"}`)
			}
			post(t, url, h, c.first)
			begin := strip(rec.waitFor(t, 8, nil))[7]
			want2 := "t2"
			if c.provider == OpenAI {
				want2 = "second-turn"
			}
			if begin.Kind != TurnBegin || begin.Turn != want2 || begin.Session != c.session {
				t.Fatalf("second turn: %+v", begin)
			}
			var in, out int64
			for _, e := range rec.waitFor(t, 4, func(e Event) bool { return e.Kind == Usage }) {
				in, out = in+e.Input, out+e.Output
			}
			if in != 80 || out != 40 {
				t.Errorf("usage sums to %d in, %d out; want 80 and 40", in, out)
			}
		})
	}
}

// TestSubagentKeepsTurn: an answer without tool calls does not end the
// turn while a tool call of the session awaits its result (a subagent
// answers while its parent's Task call runs).
func TestSubagentKeepsTurn(t *testing.T) {
	api := mockapi.Anthropic(func(q mockapi.Request) mockapi.Reply {
		if q.N == 1 {
			return mockapi.Reply{Kind: mockapi.Tool, Command: "delegate"}
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
	})
	defer api.Close()
	p, rec := start(t, map[string]string{"ANTHROPIC_BASE_URL": api.URL()}, Config{})
	h := http.Header{"X-Claude-Code-Session-Id": {"s1"}}
	url := p.URL(Anthropic) + "/v1/messages"
	post(t, url, h, claudeRequest(true))                // the parent calls a tool (toolu_mock1)
	post(t, url, h, claudeRequest(true))                // a subagent's request, answered with text
	post(t, url, h, claudeRequest(true, "toolu_mock1")) // the parent gets its tool's result
	got := rec.waitFor(t, 1, func(e Event) bool { return e.Kind == TurnEnd })
	rec.waitFor(t, 3, func(e Event) bool { return e.Kind == Usage })
	var kinds []EventKind
	for _, e := range rec.all() {
		if e.Kind != Usage {
			kinds = append(kinds, e.Kind)
		}
	}
	if want := []EventKind{TurnBegin, Phase, Phase, TurnEnd}; !reflect.DeepEqual(kinds, want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	if len(got) != 1 {
		t.Fatalf("turn ends: %+v", got)
	}
}

// TestLimits: a 429 or 529 to a main request makes the session wait for
// reconnect until the time the answer names, from each provider's hints.
func TestLimits(t *testing.T) {
	for _, c := range []struct {
		name     string
		provider Provider
		mock     func(func(mockapi.Request) mockapi.Reply) *mockapi.Server
		path     string
		body     []byte
		status   int
	}{
		{"anthropic 429", Anthropic, mockapi.Anthropic, "/v1/messages", claudeRequest(true), 429},
		{"anthropic 529", Anthropic, mockapi.Anthropic, "/v1/messages", claudeRequest(true), 529},
		{"openai", OpenAI, mockapi.OpenAI, "/responses", codexRequest(true), 429},
		{"gemini (RetryInfo in the body)", Gemini, mockapi.Gemini, "/v1beta/models/g:streamGenerateContent?alt=sse", geminiRequest(true, false), 429},
	} {
		t.Run(c.name, func(t *testing.T) {
			api := c.mock(func(q mockapi.Request) mockapi.Reply {
				if q.N == 1 {
					return mockapi.Reply{Kind: mockapi.Limit, Status: c.status, RetryAfter: 30 * time.Second}
				}
				return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
			})
			defer api.Close()
			env := map[string]string{"ANTHROPIC_BASE_URL": api.URL(), "OPENAI_BASE_URL": api.URL() + "/v1", "GOOGLE_GEMINI_BASE_URL": api.URL()}
			p, rec := start(t, env, Config{})
			resp, body := post(t, p.URL(c.provider)+c.path, nil, c.body)
			if resp.StatusCode != c.status || len(body) == 0 {
				t.Fatalf("status %d, body %d bytes: not passed through", resp.StatusCode, len(body))
			}
			w := rec.waitFor(t, 1, func(e Event) bool { return e.Kind == Waiting })[0]
			if !w.RetryAt.Equal(epoch.Add(30*time.Second)) || w.Session != "run-1" || w.Turn != "t1" {
				t.Fatalf("waiting: %+v, want retry at %v", w, epoch.Add(30*time.Second))
			}
			// The retry goes upstream: the model phase again, then the end.
			post(t, p.URL(c.provider)+c.path, nil, c.body)
			rec.waitFor(t, 1, func(e Event) bool { return e.Kind == TurnEnd })
			var kinds []EventKind
			for _, e := range rec.all() {
				if e.Kind != Usage {
					kinds = append(kinds, e.Kind)
				}
			}
			if want := []EventKind{TurnBegin, Waiting, Phase, TurnEnd}; !reflect.DeepEqual(kinds, want) {
				t.Fatalf("events %v, want %v", kinds, want)
			}
		})
	}
}

// TestLimitResetHeaders: a 429 that names its time only in reset headers.
func TestLimitResetHeaders(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Ratelimit-Reset-Tokens", "6m0s")
		w.Header().Set("X-Ratelimit-Remaining-Tokens", "0")
		w.Header().Set("X-Ratelimit-Reset-Requests", "1s")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"code":"rate_limit_exceeded"}}`)
	}))
	defer up.Close()
	p, rec := start(t, map[string]string{"OPENAI_BASE_URL": up.URL}, Config{})
	post(t, p.URL(OpenAI)+"/chat/completions", nil, mustJSON(map[string]any{"tools": []any{1}, "stream": true}))
	w := rec.waitFor(t, 1, func(e Event) bool { return e.Kind == Waiting })[0]
	if !w.RetryAt.Equal(epoch.Add(6 * time.Minute)) {
		t.Fatalf("retry at %v, want %v", w.RetryAt, epoch.Add(6*time.Minute))
	}
}

// TestStall: a stream of keep-alive pings only is a stall once
// StreamStall passes on the clock; a stream that keeps sending content is
// not, and neither is one that ended.
func TestStall(t *testing.T) {
	const stall = 20 * time.Millisecond
	t.Run("pings only", func(t *testing.T) {
		for _, c := range []struct {
			name     string
			provider Provider
			mock     func(func(mockapi.Request) mockapi.Reply) *mockapi.Server
			path     string
			body     []byte
			ping     string
		}{
			{"anthropic", Anthropic, mockapi.Anthropic, "/v1/messages", claudeRequest(true), "event: ping"},
			{"openai", OpenAI, mockapi.OpenAI, "/responses", codexRequest(true), ": keep-alive"},
			{"gemini", Gemini, mockapi.Gemini, "/v1beta/models/g:streamGenerateContent?alt=sse", geminiRequest(true, false), ": keep-alive"},
		} {
			t.Run(c.name, func(t *testing.T) {
				api := c.mock(func(mockapi.Request) mockapi.Reply {
					return mockapi.Reply{Kind: mockapi.Pings, Every: time.Millisecond}
				})
				defer api.Close()
				clk := &fakeClock{t: epoch}
				env := map[string]string{"ANTHROPIC_BASE_URL": api.URL(), "OPENAI_BASE_URL": api.URL() + "/v1", "GOOGLE_GEMINI_BASE_URL": api.URL()}
				p, rec := start(t, env, Config{StreamStall: stall, Now: clk.Now})
				resp, r := openStream(t, p.URL(c.provider)+c.path, c.body)
				defer resp.Body.Close()
				// Pings flow; the clock has not moved: no stall.
				for range 3 {
					readUntil(t, r, c.ping)
				}
				clk.Add(time.Minute)
				s := rec.waitFor(t, 1, func(e Event) bool { return e.Kind == Stall })[0]
				if s.Session != "run-1" || s.Turn != "t1" || s.Provider != c.provider {
					t.Fatalf("stall: %+v", s)
				}
			})
		}
	})
	t.Run("content", func(t *testing.T) {
		gate := make(chan struct{})
		sent := make(chan struct{})
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 5 {
				fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"%d\"}}\n\n", i)
				w.(http.Flusher).Flush()
				select {
				case <-gate:
				case <-r.Context().Done():
					return
				}
			}
			io.WriteString(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
			close(sent)
		}))
		defer up.Close()
		defer close(gate)
		clk := &fakeClock{t: epoch}
		p, rec := start(t, map[string]string{"ANTHROPIC_BASE_URL": up.URL}, Config{StreamStall: stall, Now: clk.Now})
		resp, r := openStream(t, p.URL(Anthropic)+"/v1/messages", claudeRequest(true))
		defer resp.Body.Close()
		for i := range 5 {
			readUntil(t, r, fmt.Sprintf(`"text":"%d"`, i))
			// Less than the stall time passes between content events,
			// while real timers fire many times over.
			clk.Add(stall - time.Millisecond)
			time.Sleep(3 * stall)
			gate <- struct{}{}
		}
		readUntil(t, r, "message_stop")
		<-sent
		// The stream ended: no timer is left to fire.
		clk.Add(time.Hour)
		time.Sleep(3 * stall)
		for _, e := range rec.all() {
			if e.Kind == Stall {
				t.Fatalf("a content stream stalled: %+v", rec.all())
			}
		}
	})
}

func openStream(t *testing.T, url string, body []byte) (*http.Response, *bufio.Reader) {
	t.Helper()
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %s", resp.Status)
	}
	return resp, bufio.NewReader(resp.Body)
}

// readUntil reads lines until one contains s, failing after wait.
func readUntil(t *testing.T, r *bufio.Reader, s string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for {
			l, err := r.ReadString('\n')
			if strings.Contains(l, s) {
				done <- nil
				return
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("reading for %q: %v", s, err)
		}
	case <-time.After(wait):
		t.Fatalf("%q did not arrive within %v", s, wait)
	}
}

// TestStreamFlushedPerEvent: the client reads the first event while the
// upstream holds the second back until the test says so.
func TestStreamFlushedPerEvent(t *testing.T) {
	gate := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	defer up.Close()
	p, _ := start(t, map[string]string{"ANTHROPIC_BASE_URL": up.URL}, Config{})
	resp, r := openStream(t, p.URL(Anthropic)+"/v1/messages", claudeRequest(true))
	defer resp.Body.Close()
	readUntil(t, r, "message_start") // the upstream is still holding message_stop back
	close(gate)
	readUntil(t, r, "message_stop")
}

// TestPassThrough: bodies, statuses and headers cross the proxy byte for
// byte, but for the hop-by-hop headers and Accept-Encoding; redirects are
// not followed.
func TestPassThrough(t *testing.T) {
	type seen struct {
		method, path, query string
		header              http.Header
		body                []byte
	}
	got := make(chan seen, 1)
	answer := make([]byte, 70000)
	for i := range answer {
		answer[i] = byte(i * 7)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), b}
		if r.URL.Query().Get("redirect") != "" {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
			return
		}
		w.Header()["X-Answer"] = []string{"a", "b"}
		w.Header().Set("Request-Id", "req_123")
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusTeapot)
		w.Write(answer)
	}))
	defer up.Close()
	p, _ := start(t, map[string]string{"ANTHROPIC_BASE_URL": up.URL + "/base"}, Config{})
	body := claudeRequest(true)
	h := http.Header{
		"X-Api-Key":         {"sk-ant-test"},
		"Anthropic-Version": {"2023-06-01"},
		"X-Multi":           {"1", "2"},
		"Accept-Encoding":   {"gzip, br"},
		"Connection":        {"keep-alive, X-Hop"},
		"X-Hop":             {"dropped"},
		"Te":                {"trailers"},
	}
	resp, b := post(t, p.URL(Anthropic)+"/v1/messages?beta=true&x=%2F", h, body)
	s := <-got
	if s.method != "POST" || s.path != "/base/v1/messages" || s.query != "beta=true&x=%2F" || !bytes.Equal(s.body, body) {
		t.Errorf("upstream saw %s %s ?%s and %d bytes (want the request's %d)", s.method, s.path, s.query, len(s.body), len(body))
	}
	for k, v := range h {
		switch k {
		case "Accept-Encoding", "Connection", "X-Hop", "Te":
			if s.header[k] != nil && k != "Te" {
				t.Errorf("upstream got %s: %q", k, s.header[k])
			}
		default:
			if !reflect.DeepEqual(s.header[k], v) {
				t.Errorf("upstream got %s %q, want %q", k, s.header[k], v)
			}
		}
	}
	if s.header.Get("X-Forwarded-For") != "" {
		t.Errorf("X-Forwarded-For added: %q", s.header.Get("X-Forwarded-For"))
	}
	if resp.StatusCode != http.StatusTeapot || !bytes.Equal(b, answer) ||
		!reflect.DeepEqual(resp.Header["X-Answer"], []string{"a", "b"}) || resp.Header.Get("Request-Id") != "req_123" {
		t.Errorf("client got %s, %d bytes (same: %v), X-Answer %q", resp.Status, len(b), bytes.Equal(b, answer), resp.Header["X-Answer"])
	}
	resp, _ = post(t, p.URL(Anthropic)+"/v1/messages?redirect=1", nil, body)
	<-got
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "/elsewhere" {
		t.Errorf("redirect: %s Location %q", resp.Status, resp.Header.Get("Location"))
	}
}

// TestSecretPrefix: nothing without the secret prefix reaches upstream.
func TestSecretPrefix(t *testing.T) {
	var mu sync.Mutex
	hits := 0
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
	}))
	defer up.Close()
	p, _ := start(t, map[string]string{"ANTHROPIC_BASE_URL": up.URL, "OPENAI_BASE_URL": up.URL, "GOOGLE_GEMINI_BASE_URL": up.URL}, Config{})
	base := strings.TrimSuffix(p.URL(Anthropic), "/anthropic")
	root := base[:strings.LastIndex(base, "/")]
	secret := base[len(root)+1:]
	for _, path := range []string{"/", "/anthropic/v1/messages", "/v1/messages", "/" + secret, "/" + secret + "/",
		"/" + secret + "/other/v1", "/" + strings.ToUpper(secret) + "/anthropic/v1/messages",
		"/" + secret[:len(secret)-1] + "/anthropic/v1/messages", "/" + secret + "x/anthropic/v1/messages",
		"/x/" + secret + "/anthropic/v1/messages"} {
		resp, _ := post(t, root+path, nil, claudeRequest(true))
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %s, want 404", path, resp.Status)
		}
	}
	// A WebSocket upgrade under the prefix is refused too.
	req, _ := http.NewRequest(http.MethodGet, p.URL(OpenAI)+"/responses", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("upgrade: %s, want 404", resp.Status)
	}
	mu.Lock()
	n := hits
	mu.Unlock()
	if n != 0 {
		t.Fatalf("%d requests reached upstream", n)
	}
	// The prefix itself works.
	resp, _ = post(t, p.URL(Anthropic)+"/v1/messages", nil, claudeRequest(true))
	if resp.StatusCode != 200 {
		t.Fatalf("with the prefix: %s", resp.Status)
	}
}

// TestNothingSecretLogged: credentials, bodies, paths and queries appear
// in no log line and no event, whatever happens upstream.
func TestNothingSecretLogged(t *testing.T) {
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	api := mockapi.Anthropic(func(q mockapi.Request) mockapi.Reply {
		if q.N%2 == 0 {
			return mockapi.Reply{Kind: mockapi.Error, Status: 500, Text: "ANSWER-SECRET-TEXT"}
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "ANSWER-SECRET-TEXT"}
	})
	defer api.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // connections to it are refused
	rec := newRecorder()
	p, err := Start(Config{Log: logger, Sink: rec.sink, StreamStall: time.Millisecond, Env: func(k string) string {
		return map[string]string{"ANTHROPIC_BASE_URL": api.URL(), "GOOGLE_GEMINI_BASE_URL": dead.URL + "/?key=ENV-SECRET-KEY",
			"OPENAI_BASE_URL": "http://user:ENV-SECRET-PASS@127.0.0.1:1/v1"}[k]
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h := http.Header{"X-Api-Key": {"sk-ant-HEADER-SECRET"}, "Authorization": {"Bearer sk-AUTH-SECRET"},
		"X-Goog-Api-Key": {"AIza-GOOG-SECRET"}, "X-Claude-Code-Session-Id": {"s1"}}
	body := mustJSON(map[string]any{"stream": true, "tools": []any{1}, "messages": []any{map[string]any{"role": "user", "content": "BODY-SECRET-PROMPT"}}})
	for range 4 {
		post(t, p.URL(Anthropic)+"/v1/messages?key=QUERY-SECRET", h, body)
	}
	post(t, p.URL(Gemini)+"/v1beta/models/g:streamGenerateContent?alt=sse&key=QUERY-SECRET", h, body)
	post(t, p.URL(OpenAI)+"/responses?key=QUERY-SECRET", h, body)
	rec.waitFor(t, 2, func(e Event) bool { return e.Kind == Usage })
	p.Close()
	out := logs.String()
	if !strings.Contains(out, "the upstream cannot be reached") {
		t.Fatalf("the upstream failures were not logged (is the log captured?):\n%s", out)
	}
	events := fmt.Sprintf("%+v", rec.all())
	for _, secret := range []string{"HEADER-SECRET", "AUTH-SECRET", "GOOG-SECRET", "QUERY-SECRET", "ENV-SECRET",
		"BODY-SECRET", "ANSWER-SECRET", strings.TrimPrefix(p.base, "http://"), "/v1/messages", "/responses"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %q:\n%s", secret, out)
		}
		if strings.Contains(events, secret) {
			t.Errorf("an event holds %q: %s", secret, events)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestEnv: the agent's environment, and base URLs refused at Start.
func TestEnv(t *testing.T) {
	p, err := Start(Config{Env: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	env := p.Env()
	if len(env) != 3 {
		t.Fatalf("Env: %q", env)
	}
	for i, name := range []string{"ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"} {
		prefix := name + "=http://127.0.0.1:"
		suffix := "/" + Provider(i).String()
		if !strings.HasPrefix(env[i], prefix) || !strings.HasSuffix(env[i], suffix) || len(p.secret) != 32 ||
			!strings.Contains(env[i], "/"+p.secret+"/") {
			t.Errorf("Env()[%d] = %q", i, env[i])
		}
	}
	if s := p.Session(); !strings.HasPrefix(s, "proxy-") || !validSession(s) {
		t.Errorf("default session %q", s)
	}
	for _, bad := range []string{"api.anthropic.com", "ftp://x", "http://", "::"} {
		_, err := Start(Config{Env: func(k string) string {
			if k == "OPENAI_BASE_URL" {
				return bad
			}
			return ""
		}})
		if !errors.Is(err, ErrUpstream) || strings.Contains(err.Error(), bad) {
			t.Errorf("base URL %q: %v", bad, err)
		}
	}
	if _, err := Start(Config{Session: "-bad"}); err == nil {
		t.Error("a session id beginning with '-' was accepted")
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestSessionTable: sessions beyond the table's size evict idle ones and
// never grow it; when every session has a turn open, new ones pass through
// without events.
func TestSessionTable(t *testing.T) {
	var n int
	tr := newTracker("t", func(Event) { n++ })
	main := request{main: true}
	for i := range maxSessions {
		tr.request(Anthropic, fmt.Sprint("s", i), main)
	}
	tr.request(Anthropic, "one-more", main)
	if len(tr.sessions) != maxSessions || tr.dropped != 1 || n != maxSessions {
		t.Fatalf("full table: %d sessions, %d dropped, %d events", len(tr.sessions), tr.dropped, n)
	}
	tr.answer(Anthropic, "s7", main, &answer{complete: true}) // s7's turn ends: it may be evicted
	tr.request(Anthropic, "one-more", main)
	if _, ok := tr.sessions["s7"]; ok || tr.sessions["one-more"] == nil || len(tr.sessions) != maxSessions {
		t.Fatalf("the idle session was not evicted")
	}
}

// TestCodexTurnIDs: Codex names its turns; a request naming another turn
// than the open one begins it (the proxy saw no end of the last).
func TestCodexTurnIDs(t *testing.T) {
	var got []string
	tr := newTracker("t", func(e Event) { got = append(got, e.Kind.String()+" "+e.Turn) })
	for _, turn := range []string{"A", "A", "B", "B"} {
		tr.request(OpenAI, "s", request{main: true, turn: turn})
	}
	tr.answer(OpenAI, "s", request{main: true, turn: "B"}, &answer{complete: true})
	tr.request(OpenAI, "s", request{main: true})
	want := []string{"turn-begin A", "turn-begin B", "turn-end B", "turn-begin t3"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// TestCompressedRequest: a body the client compressed passes unread.
func TestCompressedRequest(t *testing.T) {
	api := mockapi.Anthropic(nil)
	defer api.Close()
	p, rec := start(t, map[string]string{"ANTHROPIC_BASE_URL": api.URL()}, Config{})
	resp, _ := post(t, p.URL(Anthropic)+"/v1/messages", http.Header{"Content-Encoding": {"zstd"}}, claudeRequest(true))
	if resp.StatusCode != 200 || len(api.Requests()) != 1 {
		t.Fatalf("%s, %d requests upstream", resp.Status, len(api.Requests()))
	}
	// Its answer's tokens count (an agent cannot hide its spend by
	// compressing), but it opens no turn: a readable request after it is
	// the first to.
	post(t, p.URL(Anthropic)+"/v1/messages", nil, claudeRequest(true))
	rec.waitFor(t, 1, func(e Event) bool { return e.Kind == TurnEnd })
	got := rec.all()
	if len(got) != 4 || got[0].Kind != Usage || got[0].Turn != "" || got[1].Kind != TurnBegin {
		t.Fatalf("events of both requests: %+v", got)
	}
}

// TestEscapedPath: a path the client escaped is read as the same call and
// forwarded as escaped.
func TestEscapedPath(t *testing.T) {
	api := mockapi.Gemini(nil)
	defer api.Close()
	p, rec := start(t, map[string]string{"GOOGLE_GEMINI_BASE_URL": api.URL()}, Config{})
	post(t, p.URL(Gemini)+"/v1beta/models/g%3AstreamGenerateContent?alt=sse", nil, geminiRequest(true, false))
	rec.waitFor(t, 1, func(e Event) bool { return e.Kind == TurnEnd })
	if q := api.Requests(); len(q) != 1 || q[0].Path != "/v1beta/models/g:streamGenerateContent" {
		t.Fatalf("upstream saw %+v", q)
	}
}

// heldStream is an upstream that sends events and then holds the stream
// open, without its end, until the request is cancelled: the moment an
// agent has read its final answer and exits while the proxy still waits
// for the upstream's end of stream.
func heldStream(events string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, events)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
}

// TestTurnEndOfADeliveredAnswerSurvivesClose: an agent that read its
// turn's final answer and exited at once, before the upstream ended the
// stream, has finished its turn. Close (the death) must still deliver
// the turn's end, before it returns; an answer cut before its final event
// ends nothing.
func TestTurnEndOfADeliveredAnswerSurvivesClose(t *testing.T) {
	final := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":20}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":10}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, tc := range []struct {
		name, events, until string
		agentExits          bool
		stalled             bool // the held stream is reported stalled first
		ends                bool
	}{
		{"final answer read, agent gone", final, "message_stop", true, false, true},
		{"final answer read, agent still there", final, "message_stop", false, false, true},
		{"final answer read, then the stream reported stalled", final, "message_stop", false, true, false},
		{"cut before the final event", "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":20}}}\n\n", "message_start", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := heldStream(tc.events)
			defer up.Close()
			clk := &fakeClock{t: epoch}
			p, rec := start(t, map[string]string{"ANTHROPIC_BASE_URL": up.URL}, Config{StreamStall: 20 * time.Millisecond, Now: clk.Now})
			resp, r := openStream(t, p.URL(Anthropic)+"/v1/messages", claudeRequest(true))
			readUntil(t, r, tc.until)
			if tc.stalled {
				clk.Add(time.Minute)
				rec.waitFor(t, 1, func(e Event) bool { return e.Kind == Stall })
			}
			if tc.agentExits {
				resp.Body.Close()
			}
			p.Close()
			got := rec.all()
			ended := slices.ContainsFunc(got, func(e Event) bool { return e.Kind == TurnEnd })
			if ended != tc.ends {
				t.Fatalf("turn end delivered by Close: %v, want %v; events: %+v", ended, tc.ends, got)
			}
			if !slices.ContainsFunc(got, func(e Event) bool { return e.Kind == TurnBegin }) {
				t.Fatalf("no turn begin: %+v", got)
			}
			resp.Body.Close()
			if n := len(rec.all()); n != len(got) {
				t.Fatalf("an event came after Close returned: %+v", rec.all()[len(got):])
			}
		})
	}
}
